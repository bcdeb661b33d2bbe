#!/usr/bin/env bash
# What a placeholder and `scrub: true` cost (issue 42: at least 0.9x the same route without them, on
# /small c64 and /big): the same static Bearer route without them ("off") and with both ("on"),
# beside nginx (the anchor), all to one nginx upstream. Every client sends the placeholder as
# `Authorization: Bearer …`: "on" checks and replaces it, "off" replaces the client's Authorization
# (`client_authorization: replace`, the default) and nginx sets its own, so all get the same bytes.
# /small is 18 bytes; /big is 1 MiB of text (the pattern of Tests/servers/echo_upstream.py) in which
# the token's first byte occurs every 64 bytes (its `-`, which the scan looks for, never). Prints
# req/s of /small at c64 and of /big at c8 (wrk -t1, DURATION seconds each, ROUNDS rounds whose
# order alternates): each round's on/off ratios, their median and range, and the mean req/s.
#   bench/scrub-cells.sh [BIN]   BIN: a release tokenproxy (default .build-release/release/tokenproxy)
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-2}
[[ -x $BIN ]] || { echo "no tokenproxy binary at $BIN" >&2; exit 2; }
for tool in nginx wrk python3 curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
D=$(mktemp -d /tmp/tokenproxy-scrub-cells.XXXXXX)
mkdir -p "$D/logs" "$D/www"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 -c 'import sys; p = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"; sys.stdout.buffer.write(p * (1048576 // len(p)))' >"$D/www/big"
UP=$(free_port) NGX=$(free_port)
cat >"$D/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $D/nginx.pid; error_log $D/logs/error.log;
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path $D; proxy_temp_path $D; fastcgi_temp_path $D; uwsgi_temp_path $D; scgi_temp_path $D;
  keepalive_requests 1000000;
  upstream up { server 127.0.0.1:$UP; keepalive 256; }
  server { listen 127.0.0.1:$UP; location /small { return 200 "hello, small body\n"; } location /big { root $D/www; } }
  server { listen 127.0.0.1:$NGX;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_set_header Authorization "Bearer test-token-123"; } }
}
NGINX
nginx -p "$D/" -c "$D/nginx.conf" & pids+=($!)
export BENCH_TOKEN=test-token-123 BENCH_PLACEHOLDER=tp-bench-placeholder-0123456789abcdef
AUTH="Authorization: Bearer $BENCH_PLACEHOLDER"
declare -A PORT
for cell in off on; do
    PORT[$cell]=$(free_port)
    sandbox=$([[ $cell == on ]] && echo 'placeholder:\n  value_env: BENCH_PLACEHOLDER\nscrub: true' || echo 'scrub: false')
    printf "listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\nworkers: 1\ncredentials:\n  type: static\n  token_env: BENCH_TOKEN\n$sandbox\nstore:\n  path: %s/%s/tokens.json\nlog:\n  level: warn\n" \
        "${PORT[$cell]}" "$UP" "$D" "$cell" >"$D/$cell.yaml"
    "$BIN" serve --config "$D/$cell.yaml" 2>"$D/$cell.log" & pids+=($!)
done
PORT[nginx]=$NGX
for port in "${PORT[@]}"; do
    for _ in $(seq 100); do curl -sf -o /dev/null -H "$AUTH" "http://127.0.0.1:$port/small" && break; sleep 0.1; done
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT[on]}/small") == 403 ]] ||
    { echo "the sandbox route takes a request without its placeholder" >&2; exit 1; }
cmp -s <(curl -s -H "$AUTH" "http://127.0.0.1:${PORT[on]}/big") "$D/www/big" || { echo "the scrubbing route's /big is not the file" >&2; exit 1; }
rate() { wrk -t1 -c"$3" -d"${DURATION}s" -H "$AUTH" "http://127.0.0.1:$1/$2" | awk '/Requests\/sec/ {printf "%.0f", $2}'; }
declare -A SUM RATE
ROUND_RATIOS=()
order=(nginx off on)
for round in $(seq "$ROUNDS"); do
    for cell in "${order[@]}"; do
        wrk -t1 -c64 -d1s -H "$AUTH" "http://127.0.0.1:${PORT[$cell]}/small" >/dev/null  # warm
        RATE[$cell,small]=$(rate "${PORT[$cell]}" small 64)
        RATE[$cell,big]=$(rate "${PORT[$cell]}" big 8)
        SUM[$cell,small]=$(( ${SUM[$cell,small]:-0} + RATE[$cell,small] ))
        SUM[$cell,big]=$(( ${SUM[$cell,big]:-0} + RATE[$cell,big] ))
    done
    ROUND_RATIOS+=("$(awk -v r="$round" -v a="${RATE[on,small]}" -v b="${RATE[off,small]}" -v c="${RATE[on,big]}" -v d="${RATE[off,big]}" \
        'BEGIN {printf "round %d on/off: /small c64 %.2f, /big c8 %.2f", r, a / b, c / d}')")
    order=("${order[2]}" "${order[1]}" "${order[0]}")  # the next round in the other order
done
printf '%s\n' "${ROUND_RATIOS[@]}"
spread() {  # field of ROUND_RATIOS: the median (lowest-highest)
    printf '%s\n' "${ROUND_RATIOS[@]}" | awk -v f="$1" '{print $f + 0}' | sort -n |
        awk '{v[NR] = $1} END {printf "%.2f (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR]}'
}
echo "median of $ROUNDS rounds: /small c64 $(spread 6), /big c8 $(spread 9)"
printf '%-6s %14s %12s\n' cell "/small c64" "/big c8"
for cell in nginx off on; do
    printf '%-6s %14s %12s\n' "$cell" $(( SUM[$cell,small] / ROUNDS )) $(( SUM[$cell,big] / ROUNDS ))
done
awk -v a="${SUM[on,small]}" -v b="${SUM[off,small]}" -v c="${SUM[on,big]}" -v d="${SUM[off,big]}" \
    'BEGIN {printf "on/off: /small c64 %.2f, /big c8 %.2f\n", a / b, c / d}'
if command -v valgrind >/dev/null && command -v callgrind_control >/dev/null; then
    # Instructions per request (callgrind, as bench/credential-cells.sh counts them): what a busy
    # machine's req/s cannot show steadily. curl sends each path COUNT times on one connection.
    cp "$BIN" "$D/tp-cg" && strip --strip-debug "$D/tp-cg"
    for cell in off on; do
        port=$(free_port)
        sed "s/^listen: .*/listen: 127.0.0.1:$port/" "$D/$cell.yaml" >"$D/cg-$cell.yaml"
        for path in small big; do
            count=$([[ $path == small ]] && echo 2000 || echo 50)
            urls=$(for _ in $(seq "$count"); do printf 'http://127.0.0.1:%s/%s ' "$port" "$path"; done)
            valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$D/cg-$cell-$path.out" \
                "$D/tp-cg" serve --config "$D/cg-$cell.yaml" 2>"$D/cg-$cell-$path.log" &
            cg=$!
            for _ in $(seq 200); do curl -sf -o /dev/null -H "$AUTH" "http://127.0.0.1:$port/$path" && break; sleep 0.2; done
            callgrind_control -i on "$cg" >/dev/null
            # shellcheck disable=SC2086
            curl -s -H "$AUTH" $urls >/dev/null
            callgrind_control -i off "$cg" >/dev/null
            kill -TERM "$cg"; wait "$cg" 2>/dev/null || true
            total=$(callgrind_annotate "$D/cg-$cell-$path.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
            echo "$cell /$path: $((total / count)) instructions per request"
        done
    done
fi
echo "(files in $D)"
