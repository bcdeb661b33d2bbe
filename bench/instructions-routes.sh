#!/usr/bin/env bash
# Instructions per proxied /small request with 40 routes (20 host routes, 20 path routes; the request
# hits the last path route, /p19/, whose prefix is stripped), tokenproxy against nginx configured
# with the same 20 server names and 20 locations, counted by callgrind in one harness
# (bench/lib/callgrind.sh): one worker pinned to CPU 0 beside an nginx upstream; wrk -c16
# keep-alive on CPU 1; 2 s warm-up, 8 s counted.
# The single-route harness is bench-anchors' instructions-vs-nginx.sh; this is its 40-route cell.
#   bench/instructions-routes.sh PATH-TO-release-tokenproxy
set -u
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib/callgrind.sh"
trap stop_bench_processes EXIT
export BENCH_TOKEN=test-token-123
d=$(mktemp -d); mkdir -p "$d/logs" "$d/store"
servers=""; locations=""; routes=""
for i in $(seq 0 19); do
  servers+="server { listen 127.0.0.1:18581; server_name h$i.example.test; location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Authorization \"Bearer test-token-123\"; } }
"
  locations+=" location /p$i/ { proxy_pass http://u/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Authorization \"Bearer test-token-123\"; }
"
  routes+="  - {name: h$i, match: {host: h$i.example.test}, upstream: \"http://127.0.0.1:18580\", credentials: {type: static, token_env: BENCH_TOKEN}}
"
done
for i in $(seq 0 19); do
  routes+="  - {name: p$i, match: {path_prefix: /p$i/}, upstream: \"http://127.0.0.1:18580\", credentials: {type: static, token_env: BENCH_TOKEN}}
"
done
cat >"$d/px.conf" <<CONF
worker_processes 1; daemon off; master_process off; pid $d/px.pid; error_log $d/logs/pe.log;
events {}
http { access_log off;
upstream u { server 127.0.0.1:18580; keepalive 64; }
$servers
server { listen 127.0.0.1:18581 default_server; keepalive_requests 1000000;
$locations } }
CONF
cat >"$d/tp.yaml" <<CONF
listen: 127.0.0.1:18582
workers: 1
store:
  path: $d/store/tokens.json
routes:
$routes
CONF
stripped_copy "$1" "$d/tp"
start_upstream "$d" 18580
count_instructions "$d/nginx.out" http://127.0.0.1:18581/p19/small nginx -p "$d" -c "$d/px.conf"
ng=$instructions_per_request
count_instructions "$d/tokenproxy.out" http://127.0.0.1:18582/p19/small "$d/tp" serve --config "$d/tp.yaml"
tp=$instructions_per_request
echo "profiles: $d/nginx.out $d/tokenproxy.out" >&2
echo "instructions per /p19/small request, 40 routes: nginx $ng, tokenproxy $tp, ratio $(python3 -c "print(f'{$tp/$ng:.2f}')")"
