#!/usr/bin/env bash
# Instructions per request of a sandbox route (issue 42: a placeholder and `scrub: true`, "on") against
# the same static Bearer route without them ("off") and with `scrub: true` alone ("scrub", to tell
# the two costs apart), counted by callgrind in the harness of
# ../shared/bench-anchors/instructions-vs-nginx.sh: one worker pinned to CPU 0 beside an nginx
# upstream, wrk keep-alive on CPU 1, 2 s warm-up, 8 s counted. Every client sends the placeholder as
# `Authorization: Bearer …`: the "on" route checks and replaces it, the others replace the
# client's Authorization (`client_authorization: replace`, the default), so all get the same bytes.
# /small is the anchor's 36-byte answer (wrk -c16); /big is 1 MiB of the pattern of
# bench/scrub-cells.sh (wrk -c4). Counts are repeatable whatever else the machine does.
#   bench/instructions-scrub.sh PATH-TO-release-tokenproxy
set -u
bin=$1
d=$(mktemp -d /tmp/tokenproxy-instructions-scrub.XXXXXX); mkdir -p "$d/logs" "$d/www"
chmod 755 "$d" "$d/www"  # nginx's workers read /big as another user when started as root
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 -c 'import sys; p = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"; sys.stdout.buffer.write(p * (1048576 // len(p)))' >"$d/www/big"
up_port=$(free_port)
cat >"$d/up.conf" <<CONF
worker_processes 1; daemon off; pid $d/up.pid; error_log $d/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:$up_port; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } location /big { root $d/www; } } }
CONF
placeholder=tp-bench-placeholder-0123456789abcdef
for cell in off scrub on; do
  {
    echo "upstream: http://127.0.0.1:$up_port"
    echo "workers: 1"
    printf 'credentials:\n  type: static\n  token_env: BENCH_TOKEN\n'
    case $cell in
      on) printf 'placeholder:\n  value_env: BENCH_PLACEHOLDER\nscrub: true\n' ;;
      scrub) echo "scrub: true" ;;
      off) echo "scrub: false" ;;
    esac
    printf 'store:\n  path: %s/%s/tokens.json\nlog:\n  level: warn\n' "$d" "$cell"
  } >"$d/$cell.yaml"
done
cp "$bin" "$d/tp" && strip --strip-debug "$d/tp"
taskset -c 0 nginx -p "$d" -c "$d/up.conf" & up=$!
count() {  # cell path connections
  local cell=$1 path=$2 conns=$3 port; port=$(free_port)
  { echo "listen: 127.0.0.1:$port"; cat "$d/$cell.yaml"; } >"$d/$cell-$path.yaml"
  BENCH_TOKEN=test-token-123 BENCH_PLACEHOLDER=$placeholder taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$d/$cell-$path.out" "$d/tp" serve --config "$d/$cell-$path.yaml" \
    2>"$d/$cell-$path.vg" & local p=$!
  local auth="Authorization: Bearer $placeholder"
  for _ in $(seq 100); do curl -sf -o /dev/null -H "$auth" "http://127.0.0.1:$port/$path" && break; sleep 0.3; done
  [[ $path != big ]] || cmp -s <(curl -s -H "$auth" "http://127.0.0.1:$port/big") "$d/www/big" ||
    { echo "/big through the $cell route is not the file" >&2; kill "$p"; exit 1; }
  taskset -c 1 wrk -t1 -c"$conns" -d2s -H "$auth" "http://127.0.0.1:$port/$path" >/dev/null
  callgrind_control -i on "$p" >/dev/null
  local n; n=$(taskset -c 1 wrk -t1 -c"$conns" -d8s -H "$auth" "http://127.0.0.1:$port/$path" | awk '/requests in/ {print $1}')
  callgrind_control -i off "$p" >/dev/null
  kill -TERM "$p"; wait "$p" 2>/dev/null
  local t; t=$(callgrind_annotate "$d/$cell-$path.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo $((t / n))
}
declare -A per
for path in small big; do
  conns=$([[ $path == small ]] && echo 16 || echo 4)
  for cell in off scrub on; do per[$cell,$path]=$(count "$cell" "$path" "$conns"); done
done
kill "$up" 2>/dev/null; wait "$up" 2>/dev/null
echo "profiles: $d/{off,scrub,on}-{small,big}.out" >&2
for path in small big; do
  echo "instructions per /$path request: off ${per[off,$path]}, scrub ${per[scrub,$path]}, on (placeholder and scrub)" \
    "${per[on,$path]}; on - off $((per[on,$path] - per[off,$path])), scrub - off $((per[scrub,$path] - per[off,$path]))"
done
