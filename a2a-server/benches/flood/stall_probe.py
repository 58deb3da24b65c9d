"""A scheduler-stall probe for flood.sh: sleeps 1 ms in a loop (run it at a real-time priority above every other
process of the bench, `chrt -f 50`) and records each wake-up that came more than 2 ms late, with its wall-clock time.
A late wake-up of the highest-priority task means that no real-time task ran on any CPU for that long: the kernel
held them all (its RT throttling, or on Linux 6.12+ the fair server that gives other tasks 50 ms of each second),
whatever the agent does. Runs until SIGTERM/SIGINT; prints one JSON line: {"wakeups": n, "stalls": [[t, ms], ...]}.

usage: stall_probe.py
"""
import json
import signal
import sys
import time

stalls, n, running = [], 0, True


def stop(*_):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
while running:
    t = time.monotonic()
    time.sleep(0.001)
    late = (time.monotonic() - t) * 1000 - 1
    n += 1
    if late > 2:
        stalls.append([round(time.time() - late / 1000, 4), round(late, 1)])
print(json.dumps({"wakeups": n, "stalls": stalls}))
sys.stdout.flush()
