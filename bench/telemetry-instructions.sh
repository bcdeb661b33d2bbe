#!/usr/bin/env bash
# Instructions per /small request with telemetry (sample_ratio 1.0, every request's spans exported to
# an OTLP receiver) and without, the whole process counted by callgrind: the event loop and the
# exporter's thread, which encodes and posts the spans (CONTRACT.md "Telemetry"). The set-up of
# ../shared/bench-anchors/instructions-vs-nginx.sh: one worker pinned to CPU 0 beside an nginx
# upstream, wrk -c16 keep-alive on CPU 1, 2 s warm-up, 8 s counted. Counts are repeatable whatever
# else the machine does, unlike bench/telemetry.sh's rates.
#   bench/telemetry-instructions.sh [BIN]      default .build/release/tokenproxy
#   KEEP=DIR keeps the callgrind outputs (off.out, on.out) for callgrind_annotate
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
BIN=${1:-$ROOT/.build/release/tokenproxy}
d=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
mkdir -p "$d/logs"
cat >"$d/up.conf" <<CONF
worker_processes 1; daemon off; pid $d/up.pid; error_log $d/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:18680; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } } }
CONF
taskset -c 0 nginx -p "$d" -c "$d/up.conf" & pids+=($!)
python3 "$ROOT/Tests/servers/otlp_receiver.py" --port 18683 >"$d/receiver.out" 2>&1 & pids+=($!)
cp "$BIN" "$d/tp" && strip --strip-debug "$d/tp"
count() {  # name, port, extra configuration lines
    printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:18680\nworkers: 1\ncredentials: {type: static, token_env: BENCH_TOKEN}\nstore: {path: %s/store-%s/tokens.json}\n%s\n' \
        "$2" "$d" "$1" "$3" >"$d/$1.yaml"
    BENCH_TOKEN=test-token-123 taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$d/$1.out" "$d/tp" serve --config "$d/$1.yaml" 2>"$d/$1.vg" & local p=$!
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$2/small" && break; sleep 0.3; done
    taskset -c 1 wrk -t1 -c16 -d2s "http://127.0.0.1:$2/small" >/dev/null
    # The warm-up's spans are exported (a batch goes within 1 s) before the count starts.
    sleep 3
    callgrind_control -i on "$p" >/dev/null
    local n; n=$(taskset -c 1 wrk -t1 -c16 -d8s "http://127.0.0.1:$2/small" | awk '/requests in/ {print $1}')
    # The spans of the last requests are exported within the 1 s batch interval: counted too.
    sleep 2
    callgrind_control -i off "$p" >/dev/null
    kill -TERM "$p"; wait "$p" 2>/dev/null || true
    local t; t=$(callgrind_annotate "$d/$1.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    echo "$1: $n requests, $((t / n)) instructions per request; export warnings: $(grep -c 'not exported' "$d/$1.vg" || true)"
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$d/$1.out" "$KEEP/"; fi
}
for port in 18680 18683; do
    for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
done
count off 18681 ""
count on 18682 "telemetry: {endpoint: http://127.0.0.1:18683, sample_ratio: 1.0}"
curl -s http://127.0.0.1:18683/test/seen | python3 -c 'import json,sys; s=json.load(sys.stdin); print("receiver:", len(s["spans"]), "spans,", s["exports"], "exports,", s["refused"], "refused")'
