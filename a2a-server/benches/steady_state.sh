#!/usr/bin/env bash
# Steady state (spec LIM-6): NEGOTIATE and the warm path with wrk against three agents served side by side, one on a
# fresh store, one holding 90 % of its bounds, one at its bounds where every new negotiation replaces one (LIM-4);
# measured alternately, ROUNDS times, in one run. Prints req/s per slice, the medians and their ratio to the fresh
# store's, and the memory each stored negotiation costs (RSS of the agent; Redis: used_memory).
#
#   cargo build --release -p a2a-agent --bin a2a-server
#   a2a-server/benches/steady_state.sh target/release/a2a-server memory   # a2a-server --demo, in-memory store
#   a2a-server/benches/steady_state.sh target/release/a2a-server redis    # the same capability on a redis-server each
#
# Environment: ROUNDS (3), SECONDS_PER_SLICE (5), CONNECTIONS (1; the warm path runs one thread per connection).
# The fills: 90 % = 90 senders x 1 000 negotiations (max_negotiations 100 000, max_negotiations_per_sender 1 000)
# and 9 senders x 1 000 executions waiting for CONFIRM (max_received_executions 10 000); at the bound = 99 senders x
# 1 000 negotiations plus the measuring senders' own, so that the store holds 100 000 and every NEGOTIATE replaces
# the sender's own negotiation closest to expiry.
set -euo pipefail
bin=${1:?usage: steady_state.sh <a2a-server binary> memory|redis}
store=${2:-memory}
rounds=${ROUNDS:-3}
slice=${SECONDS_PER_SLICE:-5}
conns=${CONNECTIONS:-1}
here=$(cd "$(dirname "$0")" && pwd)/steady
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

declare -A port pid rport
start() { # name
  local name=$1 p
  p=$(free_port)
  if [ "$store" = redis ]; then
    local rp
    rp=$(free_port)
    redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do redis-cli -p "$rp" ping >/dev/null 2>&1 && break; sleep 0.1; done
    rport[$name]=$rp
    cat >"$work/$name.toml" <<TOML
[agent]
did = "did:web:localhost%3A$p"
[[capabilities]]
name = "submit_report"
description = "Files a report (echo)"
auth_requirement = "none"
input_schema = { type = "object", properties = { title = { type = "string", minLength = 1 }, timestamp = { type = "string", format = "date-time" } }, required = ["title", "timestamp"] }
handler = { kind = "echo" }
TOML
    REDIS_URL="redis://127.0.0.1:$rp" "$bin" --config "$work/$name.toml" --listen "127.0.0.1:$p" >"$work/$name.log" 2>&1 &
  else
    "$bin" --demo --listen "127.0.0.1:$p" >"$work/$name.log" 2>&1 &
  fi
  pids+=($!)
  pid[$name]=$!
  port[$name]=$p
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$p/a2a/capabilities" -H 'A2A-Version: 0.3' >/dev/null && break; sleep 0.1; done
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/${pid[$1]}/status"; }
redis_bytes() { redis-cli -p "${rport[$1]}" info memory | awk -F: '/^used_memory:/ {print $2+0}'; }
# wrk_rate name script seconds [env...]: prints req/s (2xx only; non-2xx answers are counted and reported)
wrk_rate() {
  local name=$1 script=$2 secs=$3
  shift 3
  local out
  out=$(env "$@" wrk -t"$conns" -c"$conns" -d"${secs}s" -s "$here/$script" "http://127.0.0.1:${port[$name]}" 2>&1)
  local total bad
  total=$(echo "$out" | awk '/requests in/ {print $1}')
  bad=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  bad=${bad:-0}
  python3 -c "print(f'{($total - $bad) / $secs:.0f}')"
  [ "$bad" = 0 ] || echo "  ($name $script: $bad non-2xx answers)" >&2
}
# fill name script senders prefix: runs until each of `senders` senders made at least 1 050 requests
fill() {
  local name=$1 script=$2 senders=$3 prefix=$4 done=0 want out n
  want=$((senders * 1050))
  while [ "$done" -lt "$want" ]; do
    out=$(SENDERS=$senders PREFIX=$prefix wrk -t2 -c2 -d5s -s "$here/$script" "http://127.0.0.1:${port[$name]}" 2>&1)
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    done=$((done + n))
  done
}

for s in fresh ninety bound; do start $s; done
before_rss=$(rss_kb ninety)
[ "$store" = redis ] && before_redis=$(redis_bytes ninety)
# The measuring senders hold their negotiations before the bound is reached (at the bound a sender holding none is
# refused; one holding some replaces its own).
for s in fresh ninety bound; do
  wrk_rate $s warm.lua 1 PREFIX=warm >/dev/null
  wrk_rate $s negotiate.lua 1 SENDERS=1 PREFIX=bench >/dev/null
done
fill ninety negotiate.lua 90 fill
after_rss=$(rss_kb ninety)
[ "$store" = redis ] && after_redis=$(redis_bytes ninety)
fill ninety fill_received.lua 9 recv
fill bound negotiate.lua 99 fill
fill bound fill_received.lua 9 recv
echo "store: $store; rounds: $rounds; $slice s slices; $conns connection(s)"
echo "memory per negotiation: RSS +$(( (after_rss - before_rss) )) KiB for 90 000 negotiations = $(python3 -c "print(f'{($after_rss - $before_rss) * 1024 / 90000:.0f}')") bytes each"
[ "$store" = redis ] && echo "Redis used_memory: +$((after_redis - before_redis)) bytes for 90 000 negotiations = $(python3 -c "print(f'{($after_redis - $before_redis) / 90000:.0f}')") bytes each"
declare -A res
for r in $(seq "$rounds"); do
  for s in fresh ninety bound; do
    res[neg,$s,$r]=$(wrk_rate $s negotiate.lua "$slice" SENDERS=1 PREFIX=bench)
    res[warm,$s,$r]=$(wrk_rate $s warm.lua "$slice" PREFIX=warm)
    echo "round $r $s: NEGOTIATE ${res[neg,$s,$r]} req/s, warm path ${res[warm,$s,$r]} req/s"
  done
done
for what in neg warm; do
  for s in fresh ninety bound; do
    vals=$(for r in $(seq "$rounds"); do echo "${res[$what,$s,$r]}"; done | sort -n | tr '\n' ' ')
    med=$(echo "$vals" | python3 -c "import sys, statistics; print(int(statistics.median(map(int, sys.stdin.read().split()))))")
    eval "med_${what}_$s=$med"
    echo "$what $s: $vals median $med"
  done
  f=$(eval echo "\$med_${what}_fresh")
  n=$(eval echo "\$med_${what}_ninety")
  b=$(eval echo "\$med_${what}_bound")
  echo "$what ratios: 90 % / fresh $(python3 -c "print(f'{$n / $f:.2f}')"), at the bound / fresh $(python3 -c "print(f'{$b / $f:.2f}')")"
done
