#!/usr/bin/env bash
# The warm path on Redis against the in-memory store with Redis on a CPU of its own, as in a deployment where
# redis-server runs beside (not inside) the agents' CPU budget: redis-server on CPU 1, the bench (client and agent)
# on CPU 0, both SCHED_FIFO 10 (run as root). Both stores get the same single CPU for client and agent.
#
#   cargo bench -p a2a-server --bench handshake --no-run
#   a2a-server/benches/redis_own_cpu.sh target/release/deps/handshake-<hash> [bench options]
#
# Default bench options: --iterations 1000 --seconds 5 --store both --only warm-off. Prints the bench's table,
# then redis-server's CPU (INFO cpu) for the whole run.
set -euo pipefail
bench=${1:?usage: redis_own_cpu.sh <handshake bench binary> [bench options]}
shift
[ $# -gt 0 ] || set -- --iterations 1000 --seconds 5 --store both --only warm-off
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 1 chrt -f 10 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
redis=$!
trap 'kill $redis 2>/dev/null; wait $redis 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
REDIS_URL="redis://127.0.0.1:$port" taskset -c 0 chrt -f 10 "$bench" "$@"
redis-cli -p "$port" info cpu | grep -E '^used_cpu_(user|sys):'
