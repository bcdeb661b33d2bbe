#!/usr/bin/env bash
# Instructions per proxied request, counted by callgrind: repeatable whatever else the machine runs,
# so changes to the hot path can be compared on a busy host (req/s cannot).
#   bench/instructions.sh [plain|tls]       needs one earlier bench/run.sh (its nginx upstream and CA)
#   TOKEN=$(head -c 1000 /dev/zero | tr '\0' a) bench/instructions.sh   the same with a 1000-byte token
# Prints the count, and leaves the profile in $STATE_DIR/tpb/callgrind.out for callgrind_annotate.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
STATE_DIR=$(cd "${STATE_DIR:-/tmp/bench-anchors}" && pwd)
BENCH_DIR=$STATE_DIR/tpb
KIND=${1:-plain}
[[ -f $STATE_DIR/upstream.nginx.conf && -f $BENCH_DIR/$KIND.yaml ]] || { echo "run bench/run.sh once first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
if [[ $KIND == tls ]]; then URL=http://127.0.0.1:18094/small; else URL=http://127.0.0.1:18090/small; fi
# valgrind cannot read the DWARF 5 the Swift toolchain writes: profile a copy without it.
cp "${BIN:-$ROOT/.build-release/release/tokenproxy}" "$BENCH_DIR/tpb-cg" && strip --strip-debug "$BENCH_DIR/tpb-cg"
sed "s|^  ca_file: .*|  ca_file: $STATE_DIR/tls/ca.pem|" "$BENCH_DIR/$KIND.yaml" >"$BENCH_DIR/cg.yaml"
OUT=$BENCH_DIR/callgrind.out
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
taskset -c 0 nginx -p "$STATE_DIR/" -c "$STATE_DIR/upstream.nginx.conf" -e logs/upstream.error.log & pids+=($!)
BENCH_TOKEN=${TOKEN:-test-token-123} taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT" \
    "$BENCH_DIR/tpb-cg" serve --config "$BENCH_DIR/cg.yaml" 2>"$BENCH_DIR/cg.log" & pids+=($!)
for _ in $(seq 100); do curl -sf -o /dev/null "$URL" && break; sleep 0.2; done
taskset -c 1 wrk -t1 -c16 -d2s "$URL" >/dev/null  # warm: connections made, caches filled
callgrind_control -i on >/dev/null
requests=$(taskset -c 1 wrk -t1 -c16 -d8s "$URL" | awk '/requests in/ {print $1}')
callgrind_control -i off >/dev/null
kill -TERM "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
total=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$KIND: $requests requests, $total instructions, $((total / requests)) per request ($OUT)"
