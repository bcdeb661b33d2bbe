#!/usr/bin/env bash
# Instructions per /small request with telemetry (sample_ratio 1.0, every request's spans exported to
# an OTLP receiver) and without, the whole process counted by callgrind: the event loop and the
# exporter's thread, which encodes and posts the spans (CONTRACT.md "Telemetry"). The set-up of
# ../shared/bench-anchors/instructions-vs-nginx.sh (bench/lib/callgrind.sh): one worker pinned to
# CPU 0 beside an nginx upstream, wrk -c16 keep-alive on CPU 1, 2 s warm-up, 8 s counted. Counts are
# repeatable whatever else the machine does, unlike bench/telemetry.sh's rates.
#   bench/telemetry-instructions.sh [BIN]      default .build/release/tokenproxy
#   KEEP=DIR keeps the callgrind outputs (off.out, on.out) for callgrind_annotate
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
source "$HERE/lib/callgrind.sh"
BIN=${1:-$ROOT/.build/release/tokenproxy}
export BENCH_TOKEN=test-token-123
d=$(mktemp -d)
trap 'stop_bench_processes; rm -rf "$d"' EXIT
start_upstream "$d" 18680
python3 "$ROOT/Tests/servers/otlp_receiver.py" --port 18683 >"$d/receiver.out" 2>&1 & bench_pids+=($!)
stripped_copy "$BIN" "$d/tp"
# The warm-up's spans are exported (a batch goes within 1 s) before the count starts; the spans of
# the last requests are exported within the 1 s batch interval: counted too.
CG_SETTLE_BEFORE=3 CG_SETTLE_AFTER=2
count() {  # name, port, extra configuration lines
    proxy_config "$d/$1.yaml" "$2" 18680 "$d/store-$1" "$3"
    count_instructions "$d/$1.out" "http://127.0.0.1:$2/small" "$d/tp" serve --config "$d/$1.yaml"
    echo "$1: $counted_requests requests, $instructions_per_request instructions per request; export warnings: $(grep -c 'not exported' "$d/$1.vg" || true)"
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$d/$1.out" "$KEEP/"; fi
}
for port in 18680 18683; do
    for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
done
count off 18681 ""
count on 18682 "telemetry: {endpoint: http://127.0.0.1:18683, sample_ratio: 1.0}"
curl -s http://127.0.0.1:18683/test/seen | python3 -c 'import json,sys; s=json.load(sys.stdin); print("receiver:", len(s["spans"]), "spans,", s["exports"], "exports,", s["refused"], "refused")'
