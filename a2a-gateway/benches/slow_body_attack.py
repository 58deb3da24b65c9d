#!/usr/bin/env python3
"""Slow-body attack on an HTTP/1.1 server, loopback only (spec GW-23; docs/BENCHMARKS.md, "a2a-gateway under a
slow-body attack").

Opens CONNECTIONS connections that each send a request head declaring DECLARED bytes of body, then SENT bytes of it,
and stall. While they are open a normal client sends one request at a time on its own kept-alive connection and the
script reports its latency (p50, p99, failures). It reports the server's RSS (summed over PIDS and their children)
at idle, at its peak under attack, and after the attack connections closed (after SETTLE seconds).

    ulimit -n 20000
    python3 a2a-gateway/benches/slow_body_attack.py --target 127.0.0.1:8443 --pid <server pid> \
        --connections 3000 --declared 1048576 --sent 1024 --hold 20 --settle 10

Only loopback targets are accepted.
"""

import argparse
import asyncio
import json
import os
import statistics
import time


def rss_kib(pids):
    """RSS in KiB of the processes and their children (nginx: its master and workers)."""
    seen = set()
    todo = list(pids)
    total = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return total


async def attacker(host, port, head, sent, hold_until, stats):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        stats["refused"] += 1
        return
    try:
        writer.write(head + b" " * sent)
        await writer.drain()
        stats["open"] += 1
        # Stall: read whatever the server answers (an early refusal), until the hold ends.
        while time.monotonic() < hold_until:
            try:
                data = await asyncio.wait_for(reader.read(4096), timeout=max(0.1, hold_until - time.monotonic()))
            except asyncio.TimeoutError:
                break
            if not data:
                stats["closed_by_server"] += 1
                break
            if data.startswith(b"HTTP/1.1 "):
                status = data[9:12].decode(errors="replace")
                stats["answers"][status] = stats["answers"].get(status, 0) + 1
    except OSError:
        stats["errors"] += 1
    finally:
        writer.close()


async def normal_client(host, port, request, until, lat):
    reader = writer = None
    fails = 0
    while time.monotonic() < until:
        t = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length:
                await asyncio.wait_for(reader.readexactly(length), timeout=10)
            if not head.startswith(b"HTTP/1.1 2"):
                fails += 1
            lat.append(time.monotonic() - t)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            fails += 1
            writer = None
        await asyncio.sleep(0.01)
    return fails


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="host:port (loopback)")
    ap.add_argument("--pid", type=int, action="append", required=True, help="server process (repeatable)")
    ap.add_argument("--connections", type=int, default=3000)
    ap.add_argument("--declared", type=int, default=1048576)
    ap.add_argument("--sent", type=int, default=1024)
    ap.add_argument("--hold", type=float, default=20.0, help="seconds the attack connections stay open")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after they close before the last RSS")
    ap.add_argument("--path", default="/a2a/negotiate", help="path the attack posts to")
    ap.add_argument("--probe", default="/a2a/capabilities", help="path the normal client GETs")
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("loopback targets only")
    port = int(port)
    head = (
        f"POST {a.path} HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 0.3\r\nA2A-Sender-ID: did:web:attacker.example\r\n"
        f"Content-Type: application/json\r\nContent-Length: {a.declared}\r\n\r\n"
    ).encode()
    probe = f"GET {a.probe} HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 0.3\r\n\r\n".encode()

    # Idle: a few probes first, so that what a first request allocates is in the baseline.
    lat = []
    await normal_client(host, port, probe, time.monotonic() + 1.0, lat)
    await asyncio.sleep(1.0)
    idle = rss_kib(a.pid)

    stats = {"open": 0, "refused": 0, "errors": 0, "closed_by_server": 0, "answers": {}}
    hold_until = time.monotonic() + a.hold
    attackers = []
    for i in range(a.connections):
        attackers.append(asyncio.create_task(attacker(host, port, head, a.sent, hold_until, stats)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)
    peak = idle
    lat = []
    client = asyncio.create_task(normal_client(host, port, probe, hold_until, lat))
    while time.monotonic() < hold_until:
        peak = max(peak, rss_kib(a.pid))
        await asyncio.sleep(0.25)
    fails = await client
    await asyncio.gather(*attackers)
    await asyncio.sleep(a.settle)
    after = rss_kib(a.pid)
    out = {
        "connections": a.connections,
        "declared": a.declared,
        "sent": a.sent,
        "attack_open": stats["open"],
        "attack_refused_connect": stats["refused"],
        "attack_answers": stats["answers"],
        "attack_closed_by_server": stats["closed_by_server"],
        "rss_idle_mib": round(idle / 1024, 1),
        "rss_peak_mib": round(peak / 1024, 1),
        "rss_after_mib": round(after / 1024, 1),
        "after_over_idle": round(after / idle, 2) if idle else None,
        "client_requests": len(lat),
        "client_failures": fails,
        "client_p50_ms": round(pct(lat, 50) * 1000, 2),
        "client_p99_ms": round(pct(lat, 99) * 1000, 2),
        "client_mean_ms": round(statistics.mean(lat) * 1000, 2) if lat else None,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
