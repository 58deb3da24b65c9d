#!/usr/bin/env bash
# Per-sender fairness under a flood (spec LIM-4, LIM-5), with every party in its own process: sender A (a Python
# stdlib client, benches/flood/measure.py) makes HANDSHAKES full handshakes (NEGOTIATE, EXECUTE with the payload,
# CONFIRM, RESULT?wait_ms) at RATE per second over one kept-alive connection and records each one's latency, first
# with the agent idle ("unloaded"), then while sender B floods at full speed with wrk (benches/flood/flooder.lua:
# NEGOTIATE and EXECUTE without CONFIRM, alternately, so B's negotiation and received shares stay full) on each of
# FLOOD_CONNECTIONS connections counts. Alternated ROUNDS times. Prints per slice A's p50/p99, failed handshakes and
# the flood's req/s, then the medians over the rounds and the flooded/unloaded ratios.
# Each slice also lists the handshakes of A over 10 ms with their start time in the slice (where a tail comes from).
#
#   cargo build --release --bin a2a-server
#   a2a-server/benches/flood.sh target/release/a2a-server memory   # in-memory store
#   a2a-server/benches/flood.sh target/release/a2a-server redis    # starts its own redis-server on a free port
#
# The agent: a generated agent.toml (one `echo_message` capability, auth_requirement = "none", echo handler) with
# [limits] max_negotiations_per_sender = 100 and max_received_per_sender = 100 so that the flood fills B's shares in
# well under a second. Loopback only, free ports. The agent, redis-server and both clients run under `chrt -f 10`
# when allowed (else `nice -n -10`, else as they are) so that other jobs on a shared machine weigh less.
# Environment: ROUNDS (3), HANDSHAKES (100), RATE (10), FLOOD_CONNECTIONS ("4 16"), FLOOD_THREADS (2),
# SCHED (`rt`; `nice` runs everything at `nice -n -10`, ahead of other jobs but time-sliced; `default` runs everything
# at the default priority, beside whatever else the machine runs). With the agent pinned to one CPU use `nice`:
# under `rt` (SCHED_FIFO) a thread that always has work is never preempted by another of the same priority, so the
# agent's serving thread, busy with the flood, holds off its own execution thread until it blocks — hundreds of ms
# that no agent running at a normal priority sees; AGENT_SCHED=nice runs the agent alone at `nice -n -10` and
# everything else as SCHED says,
# SHARE (unset: the agent's default `max_in_progress_per_sender`, LIM-14; e.g. SHARE=100000 for no share at all),
# AGENT_LOG (1: the agent logs each of sender A's requests with its latency inside the agent, JSON, and the slow
# handshakes are listed with the time the agent spent on them).
# Where a tail comes from: under `rt` a probe (benches/flood/stall_probe.py) per CPU, pinned to it, runs at a
# real-time priority above all the others (`chrt -f 50`) and records every time it woke more than 2 ms late — then no
# real-time task ran on that CPU, whatever the agent did; each of A's handshakes over 10 ms is listed with the
# probes' stalls it overlapped (on any CPU) and, with AGENT_LOG=1, the time the agent spent on its requests.
# AGENT_CPUS / CLIENT_CPUS (unset: no pinning; e.g. AGENT_CPUS=1 CLIENT_CPUS=0): pin the agent to CPUs of its own and
# redis-server, both senders and wrk to the others (`taskset -c`), as when the flooder runs on another machine — on a
# machine where the flood shares the agent's cores, the kernel's scheduler, not the agent, decides the other
# sender's tail (LIM-17). The unloaded slices are pinned the same way, so the ratio compares like with like.
# Exits 1 if any of sender A's handshakes failed.
set -euo pipefail
bin=${1:?usage: flood.sh <a2a-server binary> [memory|redis]}
store=${2:-memory}
rounds=${ROUNDS:-3}
handshakes=${HANDSHAKES:-100}
rate=${RATE:-10}
flood_conns=${FLOOD_CONNECTIONS:-4 16}
flood_threads=${FLOOD_THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)/flood
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
if [ "${SCHED:-rt}" = default ]; then prio=(); elif [ "${SCHED:-rt}" = nice ]; then prio=(nice -n -10); elif chrt -f 10 true 2>/dev/null; then prio=(chrt -f 10); elif nice -n -10 true 2>/dev/null; then prio=(nice -n -10); else prio=(); fi

aprio=("${prio[@]}")
if [ "${AGENT_SCHED:-}" = nice ]; then aprio=(nice -n -10); fi
apin=(); cpin=()
if [ -n "${AGENT_CPUS:-}" ]; then apin=(taskset -c "$AGENT_CPUS"); fi
if [ -n "${CLIENT_CPUS:-}" ]; then cpin=(taskset -c "$CLIENT_CPUS"); fi

store_toml=
if [ "$store" = redis ]; then
  rp=$(free_port)
  "${cpin[@]}" "${prio[@]}" redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$rp" ping >/dev/null 2>&1 && break; sleep 0.1; done
  store_toml="[store]
redis_url = \"redis://127.0.0.1:$rp\""
fi
port=$(free_port)
cat >"$work/agent.toml" <<TOML
[agent]
did = "did:web:localhost%3A$port"

[limits]
max_negotiations_per_sender = 100
max_received_per_sender = 100
${SHARE:+max_in_progress_per_sender = $SHARE}

$store_toml

[[capabilities]]
name = "echo_message"
description = "Echoes the message"
auth_requirement = "none"
input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
handler = { kind = "echo" }
TOML
agent_env=(env -u REDIS_URL)
if [ "${AGENT_LOG:-0}" = 1 ]; then
  agent_env+=(RUST_LOG='info,a2a_server[a2a_request{sender_id=did:web:measured.example.com}]=debug' A2A_LOG_FORMAT=json)
fi
"${agent_env[@]}" "${apin[@]}" "${aprio[@]}" "$bin" --config "$work/agent.toml" --listen "127.0.0.1:$port" >"$work/agent.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/a2a/capabilities" -H 'A2A-Version: 0.3' >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/a2a/capabilities" -H 'A2A-Version: 0.3' >/dev/null || { cat "$work/agent.log"; exit 1; }

echo "store $store, scheduling: ${prio[*]:-default} (the agent: ${aprio[*]:-default}), share: ${SHARE:-default}, agent CPUs: ${AGENT_CPUS:-any}, clients' CPUs: ${CLIENT_CPUS:-any}, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# warm-up: connections, allocator, Redis scripts
"${cpin[@]}" "${prio[@]}" python3 "$here/measure.py" "$port" 20 50 did:web:warmup.example.com >/dev/null

results="$work/results.jsonl"
measure() { # label flood_conns(0 = none)
  local label=$1 c=$2 wrk_pid= out
  if [ "$c" != 0 ]; then
    FLOOD_SENDER=flooder "${cpin[@]}" "${prio[@]}" wrk -t"$flood_threads" -c"$c" -d600s -s "$here/flooder.lua" \
      "http://127.0.0.1:$port" >"$work/wrk.out" 2>&1 &
    wrk_pid=$!
    sleep 1 # B's shares fill
  fi
  local probe_pids=() cpu
  rm -f "$work"/probe.*.out
  if [ "${prio[*]:-}" = "chrt -f 10" ]; then
    for cpu in $(seq 0 $(($(nproc) - 1))); do # one probe per CPU: the kernel holds real-time tasks per CPU
      taskset -c "$cpu" chrt -f 50 python3 "$here/stall_probe.py" >"$work/probe.$cpu.out" &
      probe_pids+=($!)
    done
  fi
  out=$("${cpin[@]}" "${prio[@]}" python3 "$here/measure.py" "$port" "$handshakes" "$rate" did:web:measured.example.com)
  for p in "${probe_pids[@]}"; do kill -TERM "$p"; done
  for p in "${probe_pids[@]}"; do wait "$p" || true; done
  if [ -n "$wrk_pid" ]; then
    kill -INT "$wrk_pid"
    wait "$wrk_pid" || true
  fi
  python3 - "$label" "$c" "$work/wrk.out" "$out" "$results" "$work/agent.log" "$work"/probe.*.out <<'PY'
import datetime, json, math, re, sys
label, c, wrk_out, out, results = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
probes = [json.loads(t) for t in (open(f).read().strip() for f in sys.argv[7:] if not f.endswith("*.out")) if t]
probe = {"stalls": sorted(st for p in probes for st in p["stalls"])} if probes else None
agent_times = []  # (wall-clock end, ms) of sender A's requests, when the agent logs them (AGENT_LOG=1)
for l in open(sys.argv[6], errors="replace"):
    if '"request answered"' not in l:
        continue
    try:
        r = json.loads(l)
        if r.get("span", {}).get("sender_id") != "did:web:measured.example.com":
            continue  # another sender's 4xx, logged at info
        end = datetime.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).timestamp()
        agent_times.append((end, r["fields"]["latency_us"] / 1000))
    except (ValueError, KeyError):
        pass
rps = non2xx = total = None
if c:
    text = open(wrk_out).read()
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    rps = float(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    non2xx = int(m.group(1)) if m else 0
    m = re.search(r"(\d+) requests in", text)
    total = int(m.group(1)) if m else None
ms = sorted(out["ms"])
pct = lambda p: ms[max(0, math.ceil(p * len(ms)) - 1)] if ms else float("nan")
row = {"label": label, "conns": c, "ok": out["ok"], "failed": out["failed"], "p50": pct(0.5), "p99": pct(0.99),
       "max": ms[-1] if ms else float("nan"), "flood_rps": rps, "flood_non2xx": non2xx, "flood_total": total,
       "errors": out["errors"]}
line = (f"  {label:>10}: A ok {row['ok']} failed {row['failed']}  p50 {row['p50']:.2f} ms  p99 {row['p99']:.2f} ms"
        f"  max {row['max']:.2f} ms")
if c:
    line += f"  flood {rps:.0f} req/s ({non2xx} of {total} non-2xx: B past its shares)"
stalls = probe["stalls"] if probe else []
slow, explained = [], 0
for t, m, w in zip(out["at"], out["ms"], out["wall"]):
    if m <= 10:
        continue
    # the probe's stalls that overlap the handshake, and the time the agent spent on its requests
    hit = sum(ms for at, ms in stalls if at < w + m / 1000 and at + ms / 1000 > w)
    inside = sum(ms for end, ms in agent_times if w <= end <= w + m / 1000 + 0.001)
    explained += hit >= m / 2
    item = f"{t:.1f}s:{m:.0f}ms"
    if probe:
        item += f"[stall {hit:.0f}]"
    if agent_times:
        item += f"[agent {inside:.1f}]"
    slow.append(item)
row["slow"] = len(slow)
row["slow_in_stall"] = explained
row["stall_ms"] = sum(ms for _, ms in stalls)
row["stalls"] = len(stalls)
if probe:
    line += (f"\n              probes: {len(stalls)} stalls over 2 ms, {row['stall_ms']:.0f} ms in all (all CPUs)"
             f" (longest {max([ms for _, ms in stalls], default=0):.0f} ms)")
if slow:
    line += f"\n              handshakes over 10 ms (start:latency[probe stall overlapping, ms][agent-side ms]) {' '.join(slow)}"
if out["errors"]:
    line += f"  errors {out['errors']}"
with open(results, "a") as f:
    f.write(json.dumps(row) + "\n")
print(line)
PY
}

for r in $(seq "$rounds"); do
  echo "round $r (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  measure unloaded 0
  for c in $flood_conns; do measure "flood c=$c" "$c"; done
done

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = list(dict.fromkeys(r["label"] for r in rows))
med = lambda label, k: statistics.median(r[k] for r in rows if r["label"] == label)
base50, base99 = med("unloaded", "p50"), med("unloaded", "p99")
print(f"medians over {len(rows) // len(labels)} rounds:")
print("| slice | A failed | A p50 ms | A p99 ms | p50 ratio | p99 ratio | flood req/s | A over 10 ms | of them in a probe stall |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for l in labels:
    failed = sum(r["failed"] for r in rows if r["label"] == l)
    p50, p99 = med(l, "p50"), med(l, "p99")
    rps = "" if l == "unloaded" else f"{med(l, 'flood_rps'):.0f}"
    slow = sum(r.get("slow", 0) for r in rows if r["label"] == l)
    in_stall = sum(r.get("slow_in_stall", 0) for r in rows if r["label"] == l)
    print(f"| {l} | {failed} | {p50:.2f} | {p99:.2f} | {p50 / base50:.2f} | {p99 / base99:.2f} | {rps} | {slow} | {in_stall} |")
total_failed = sum(r["failed"] for r in rows)
print(f"sender A failed handshakes in all slices: {total_failed}")
sys.exit(1 if total_failed else 0)
PY
