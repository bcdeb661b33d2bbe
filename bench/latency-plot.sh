#!/usr/bin/env bash
# Added latency percentiles and RSS against request rate, tokenproxy beside nginx (issue 22 point 7):
# one nginx upstream answering /small, nginx as a proxy (pooled upstream connections, the
# Authorization header set) and tokenproxy (one worker, a static token) in front of it, driven by
# bench/latency_plot.py's paced client. Not run in CI: it takes minutes and its figures depend on
# the machine. Needs nginx and Python's matplotlib (pip install matplotlib).
#   bench/latency-plot.sh [PATH-TO-RELEASE-tokenproxy]   (default .build-release/release/tokenproxy)
#   RATES=250,500,1000 SECONDS_PER_STEP=10 bench/latency-plot.sh
# Writes bench/latency-vs-rate.png and .json (OUT=path.png elsewhere).
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
d=$(mktemp -d); mkdir -p "$d/logs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up=$(free_port); px=$(free_port); tp=$(free_port)
cat >"$d/up.conf" <<CONF
worker_processes 1; daemon off; pid $d/up.pid; error_log $d/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:$up; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } } }
CONF
cat >"$d/px.conf" <<CONF
worker_processes 1; daemon off; master_process off; pid $d/px.pid; error_log $d/logs/pe.log;
events {}
http { access_log off;
upstream u { server 127.0.0.1:$up; keepalive 64; }
server { listen 127.0.0.1:$px; keepalive_requests 1000000;
 location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection "";
   proxy_set_header Authorization "Bearer test-token-123"; } } }
CONF
cat >"$d/tp.yaml" <<CONF
listen: 127.0.0.1:$tp
upstream: http://127.0.0.1:$up
workers: 1
credentials:
  type: static
  token_env: BENCH_TOKEN
store:
  path: $d/store/tokens.json
CONF
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$d"; }
trap cleanup EXIT
nginx -p "$d" -c "$d/up.conf" & pids+=($!)
nginx -p "$d" -c "$d/px.conf" & pids+=($!); nginx_pid=$!
BENCH_TOKEN=test-token-123 "$BIN" serve --config "$d/tp.yaml" 2>"$d/logs/tp.log" & pids+=($!); tp_pid=$!
for port in $up $px $tp; do
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.1; done
done
python3 "$HERE/latency_plot.py" --direct-port "$up" --nginx-port "$px" --nginx-pid "$nginx_pid" \
  --tokenproxy-port "$tp" --tokenproxy-pid "$tp_pid" --rates "${RATES:-250,500,1000,2000,3000}" \
  --seconds "${SECONDS_PER_STEP:-10}" --out "${OUT:-$HERE/latency-vs-rate.png}" \
  --title "added latency and RSS vs rate ($(date -u +%Y-%m-%d), $(nproc) cores; $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))"
