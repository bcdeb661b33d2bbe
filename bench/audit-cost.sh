#!/usr/bin/env bash
# What the audit log (`audit.path`, CONTRACT.md "Programs in a sandbox") costs a request: the same
# tokenproxy (one worker, a static token) in front of the same nginx upstream's /small, without and
# with `audit:`, measured two ways:
#   - instructions per request (callgrind, wrk -c64 for 8 s after 2 s of warm-up): repeatable on a
#     busy host, but blind to the time the kernel spends in the audit line's write(2);
#   - req/s at /small c64 (wrk, ROUNDS rounds alternating the two, DURATION s each): the whole cost,
#     but only meaningful on a quiet host.
#   bench/audit-cost.sh                  both; BIN defaults to the release binary, else the debug one
#   MODE=instructions bench/audit-cost.sh, MODE=throughput bench/audit-cost.sh
# Prints one line per measure with the ratio with audit / without.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
MODE=${MODE:-both}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
BIN=${BIN:-$ROOT/.build-release/release/tokenproxy}
[[ -x $BIN ]] || BIN=$ROOT/.build/debug/tokenproxy
[[ -x $BIN ]] || { echo "no tokenproxy binary: swift build first (or set BIN)" >&2; exit 2; }
for tool in nginx wrk curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
WORK=$(mktemp -d /tmp/audit-cost.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
[[ -n ${KEEP:-} ]] && cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; echo "kept $WORK" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
UPSTREAM_PORT=$(free_port)
mkdir -p "$WORK/nginx/logs" "$WORK/nginx/tmp"
cat >"$WORK/nginx/upstream.conf" <<CONF
daemon off; worker_processes 1; pid $WORK/nginx/nginx.pid; error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off; keepalive_requests 10000000; keepalive_timeout 300s;
    client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi; uwsgi_temp_path $WORK/nginx/tmp/uwsgi; scgi_temp_path $WORK/nginx/tmp/scgi;
    server { listen 127.0.0.1:$UPSTREAM_PORT; location /small { return 200 "0123456789abcdef0123456789abcdef"; } }
}
CONF
nginx -p "$WORK/nginx/" -c "$WORK/nginx/upstream.conf" -e logs/error.log &
pids+=($!)

# config NAME PORT AUDIT-LINES: a configuration file for one of the two proxies.
config() {
    printf 'listen: 127.0.0.1:%s\nworkers: 1\nupstream: http://127.0.0.1:%s\ncredentials: {type: static, token_env: BENCH_TOKEN}\n%s\n' \
        "$2" "$UPSTREAM_PORT" "$3" >"$WORK/$1.yaml"
}
OFF_PORT=$(free_port)
ON_PORT=$(free_port)
config off "$OFF_PORT" ""
config on "$ON_PORT" "audit: {path: $WORK/audit.jsonl}"

wait_for() { for _ in $(seq 150); do curl -sf -o /dev/null "$1" && return 0; sleep 0.2; done; echo "nothing answers $1" >&2; exit 1; }

# instructions NAME PORT: instructions per request of tokenproxy with NAME.yaml under callgrind.
instructions() {
    local name=$1 url=http://127.0.0.1:$2/small out=$WORK/callgrind-$1.out
    # valgrind cannot read the DWARF 5 the Swift toolchain writes: profile a copy without it.
    cp "$BIN" "$WORK/tp-$name" && strip --strip-debug "$WORK/tp-$name"
    BENCH_TOKEN=bench-token valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$WORK/tp-$name" serve --config "$WORK/$name.yaml" 2>"$WORK/cg-$name.log" &
    local pid=$!
    pids+=("$pid")
    wait_for "$url"
    wrk -t1 -c64 -d2s "$url" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    local requests total
    requests=$(wrk -t1 -c64 -d8s "$url" | awk '/requests in/ {print $1}')
    callgrind_control -i off "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    echo "audit $name: $requests requests, $total instructions" >&2
    echo $((total / requests))
}

# throughput: ROUNDS rounds of wrk -c64 against each, alternating; the median ratio on / off.
throughput() {
    BENCH_TOKEN=bench-token "$BIN" serve --config "$WORK/off.yaml" 2>"$WORK/off.log" &
    pids+=($!)
    BENCH_TOKEN=bench-token "$BIN" serve --config "$WORK/on.yaml" 2>"$WORK/on.log" &
    pids+=($!)
    wait_for "http://127.0.0.1:$OFF_PORT/small"
    wait_for "http://127.0.0.1:$ON_PORT/small"
    local ratios=()
    for round in $(seq "$ROUNDS"); do
        local off on
        off=$(wrk -t2 -c64 -d"${DURATION}s" "http://127.0.0.1:$OFF_PORT/small" | awk '/Requests\/sec/ {print $2}')
        on=$(wrk -t2 -c64 -d"${DURATION}s" "http://127.0.0.1:$ON_PORT/small" | awk '/Requests\/sec/ {print $2}')
        ratios+=("$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')")
        echo "round $round: without audit $off req/s, with audit $on req/s" >&2
    done
    printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END { printf "throughput /small c64: median ratio with audit / without %.3f (%d rounds)\n", r[int((NR + 1) / 2)], NR }'
}

echo "binary: $BIN" >&2
if [[ $MODE == both || $MODE == instructions ]]; then
    command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 2; }
    off=$(instructions off "$OFF_PORT")
    on=$(instructions on "$ON_PORT")
    awk -v a="$on" -v b="$off" 'BEGIN { printf "instructions per /small request: %d without audit, %d with (ratio %.3f)\n", b, a, a / b }'
    echo "audit lines written: $(wc -l <"$WORK/audit.jsonl")" >&2
fi
if [[ $MODE == both || $MODE == throughput ]]; then
    throughput
fi
