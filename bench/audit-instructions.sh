#!/usr/bin/env bash
# Instructions per proxied /small request with `audit.path` set against the same configuration
# without it, counted by callgrind in the harness of bench-anchors' instructions-vs-nginx.sh: one
# worker pinned to CPU 0 beside an nginx upstream; wrk -c16 keep-alive on CPU 1; 2 s warm-up, 8 s
# counted. Counts are repeatable whatever else the machine does; they leave out the kernel's time
# in write(2) (bench/audit-cost.sh measures throughput for that).
#   bench/audit-instructions.sh PATH-TO-release-tokenproxy
# Prints the two counts and their difference; the profiles stay for `callgrind_annotate` (their
# paths on stderr).
set -u
bin=$1
d=$(mktemp -d); mkdir -p "$d/logs" "$d/store"
cat >"$d/up.conf" <<CONF
worker_processes 1; daemon off; pid $d/up.pid; error_log $d/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:18680; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } } }
CONF
# config NAME PORT EXTRA: the same proxy, EXTRA its only difference.
config() {
  printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:18680\nworkers: 1\ncredentials:\n  type: static\n  token_env: BENCH_TOKEN\nstore:\n  path: %s/store/tokens.json\n%s\n' \
    "$2" "$d" "$3" >"$d/$1.yaml"
}
config off 18681 ""
config on 18682 "audit:
  path: $d/audit.jsonl"
cp "$bin" "$d/tp" && strip --strip-debug "$d/tp"
taskset -c 0 nginx -p "$d" -c "$d/up.conf" & up=$!
count() {  # name port
  local name=$1 port=$2
  BENCH_TOKEN=test-token-123 taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$d/$name.out" "$d/tp" serve --config "$d/$name.yaml" 2>"$d/$name.vg" & local p=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.3; done
  taskset -c 1 wrk -t1 -c16 -d2s "http://127.0.0.1:$port/small" >/dev/null
  callgrind_control -i on "$p" >/dev/null 2>&1
  local n; n=$(taskset -c 1 wrk -t1 -c16 -d8s "http://127.0.0.1:$port/small" | awk '/requests in/ {print $1}')
  callgrind_control -i off "$p" >/dev/null 2>&1
  kill -TERM "$p"; wait "$p" 2>/dev/null
  local t; t=$(callgrind_annotate "$d/$name.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo $((t / n))
}
off=$(count off 18681)
on=$(count on 18682)
kill "$up" 2>/dev/null; wait "$up" 2>/dev/null
lines=$(wc -l <"$d/audit.jsonl")
echo "profiles: $d/off.out $d/on.out (audit lines written: $lines)" >&2
echo "instructions per /small request: audit off $off, audit on $on, the audit's cost $((on - off)) (ratio $(python3 -c "print(f'{$on/$off:.3f}')"))"
