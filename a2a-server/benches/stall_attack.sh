#!/usr/bin/env bash
# LIM-7 under attack: `a2a-server --demo` and nginx, each under --conns connections stalled after 1 KiB of a 1 MiB
# declared body, measured by the stall_attack bench (RSS idle / peak / after, a normal client's p50 and p99).
# Loopback only.
#
#   cargo build --release -p a2a-agent --bin a2a-server && cargo build --release -p a2a-server --bench stall_attack
#   a2a-server/benches/stall_attack.sh target/release/a2a-server target/release/deps/stall_attack-<hash> [conns]
#
# nginx runs one worker (its RSS is measured; the master's does not move) with a location that buffers request bodies
# (`proxy_pass`, request buffering on, client_body_buffer_size 16k) and one answering GET from memory.
set -euo pipefail
server=${1:?usage: stall_attack.sh <a2a-server binary> <stall_attack bench binary> [conns]}
bench=${2:?usage: stall_attack.sh <a2a-server binary> <stall_attack bench binary> [conns]}
conns=${3:-3000}
ulimit -n 20000
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

port=$(free_port)
"$server" --demo --listen "127.0.0.1:$port" >/dev/null 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/a2a/capabilities" >/dev/null && break; sleep 0.1; done
echo "== a2a-server --demo (pid $agent)"
"$bench" --addr "127.0.0.1:$port" --pid "$agent" --conns "$conns" --post /a2a/negotiate --path /a2a/capabilities
kill $agent; wait $agent 2>/dev/null || true

dir=$(mktemp -d)
port=$(free_port)
cat > "$dir/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 10000; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server {
    listen 127.0.0.1:$port;
    location = /a2a/capabilities { default_type application/json; return 200 '{"capabilities":[]}'; }
    location /a2a/ { client_max_body_size 2m; client_body_buffer_size 16k; proxy_pass http://127.0.0.1:9; }
  }
}
EOF
nginx -c "$dir/nginx.conf" -g 'daemon off;' &
master=$!
trap 'kill $master 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/a2a/capabilities" >/dev/null && break; sleep 0.1; done
worker=$(pgrep -P "$master" | head -1)
echo "== nginx $(nginx -v 2>&1 | sed 's/.*\///') (worker pid $worker)"
"$bench" --addr "127.0.0.1:$port" --pid "$worker" --conns "$conns" --post /a2a/negotiate --path /a2a/capabilities
