#!/usr/bin/env bash
# Instructions per proxied /small request with 40 routes (20 host routes, 20 path routes; the request
# hits the last path route, /p19/, whose prefix is stripped), tokenproxy against nginx configured
# with the same 20 server names and 20 locations, counted by callgrind in one harness: one worker
# pinned to CPU 0 beside an nginx upstream; wrk -c16 keep-alive on CPU 1; 2 s warm-up, 8 s counted.
# The single-route harness is bench-anchors' instructions-vs-nginx.sh; this is its 40-route cell.
#   bench/instructions-routes.sh PATH-TO-release-tokenproxy
set -u
bin=$1
d=$(mktemp -d); mkdir -p "$d/logs" "$d/store"
cat >"$d/up.conf" <<CONF
worker_processes 1; daemon off; pid $d/up.pid; error_log $d/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:18580; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } } }
CONF
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
cp "$bin" "$d/tp" && strip --strip-debug "$d/tp"
taskset -c 0 nginx -p "$d" -c "$d/up.conf" & up=$!
count() {  # name port cmd...
  local name=$1 port=$2; shift 2
  BENCH_TOKEN=test-token-123 taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$d/$name.out" "$@" 2>"$d/$name.vg" & local p=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/p19/small" && break; sleep 0.3; done
  taskset -c 1 wrk -t1 -c16 -d2s "http://127.0.0.1:$port/p19/small" >/dev/null
  callgrind_control -i on "$p" >/dev/null
  local n; n=$(taskset -c 1 wrk -t1 -c16 -d8s "http://127.0.0.1:$port/p19/small" | awk '/requests in/ {print $1}')
  callgrind_control -i off "$p" >/dev/null
  kill -TERM "$p"; wait "$p" 2>/dev/null
  local t; t=$(callgrind_annotate "$d/$name.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo $((t / n))
}
ng=$(count nginx 18581 nginx -p "$d" -c "$d/px.conf")
tp=$(count tokenproxy 18582 "$d/tp" serve --config "$d/tp.yaml")
kill "$up" 2>/dev/null; wait "$up" 2>/dev/null
echo "profiles: $d/nginx.out $d/tokenproxy.out" >&2
echo "instructions per /p19/small request, 40 routes: nginx $ng, tokenproxy $tp, ratio $(python3 -c "print(f'{$tp/$ng:.2f}')")"
