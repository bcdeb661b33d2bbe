#!/usr/bin/env bash
# Quick same-run comparison while tuning (not the report: use bench/run.sh for that).
#   bench/ab.sh CELL...      e.g. bench/ab.sh small:1 small:64 big:8 tls:1 tls:64
# Needs one earlier bench/run.sh (or bench-anchors run.sh) with the same STATE_DIR: it reuses the
# nginx wrappers, /big and the CA it left there. Starts the upstream nginx, the nginx proxy and
# tokenproxy (BIN, default the release build) pinned to CPU 0, then runs wrk (CPU 1) for D seconds
# per target, alternating, R rounds, and prints req/s and the ratio to nginx of each round.
# PERF=1 records `perf record -g` of tokenproxy during its runs into $STATE_DIR/tokenproxy/perf-CELL.data.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
STATE_DIR=${STATE_DIR:-/tmp/bench-anchors}
STATE_ABS=$(cd "$STATE_DIR" && pwd)
BENCH_DIR=$STATE_ABS/tpb
cp "${BIN:-$ROOT/.build-release/release/tokenproxy}" "$BENCH_DIR/tpb-ab.new" && mv -f "$BENCH_DIR/tpb-ab.new" "$BENCH_DIR/tpb-ab"
BIN=$BENCH_DIR/tpb-ab
D=${D:-5} R=${R:-3}
[[ -f $STATE_ABS/upstream.nginx.conf && -f $STATE_ABS/tls/ca.pem && -f $BENCH_DIR/plain.yaml ]] || { echo "run bench/run.sh once first" >&2; exit 2; }
export BENCH_TOKEN=test-token-123 BENCH_TLS_CA=$STATE_ABS/tls/ca.pem
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
taskset -c 0 nginx -p "$STATE_ABS/" -c "$STATE_ABS/upstream.nginx.conf" -e logs/upstream.error.log & pids+=($!)
taskset -c 0 nginx -p "$STATE_ABS/" -c "$STATE_ABS/proxy.nginx.conf" -e logs/proxy-nginx.error.log & pids+=($!)
taskset -c 0 "$BIN" serve --config "$BENCH_DIR/plain.yaml" 2>"$BENCH_DIR/ab-plain.log" & pids+=($!); TP=$!
sed "s|^  ca_file: .*|  ca_file: $BENCH_TLS_CA|" "$BENCH_DIR/tls.yaml" >"$BENCH_DIR/ab-tls.yaml"
taskset -c 0 "$BIN" serve --config "$BENCH_DIR/ab-tls.yaml" 2>"$BENCH_DIR/ab-tls.log" & pids+=($!); TPT=$!
for u in http://127.0.0.1:18081/small http://127.0.0.1:18090/small http://127.0.0.1:18094/small http://127.0.0.1:18091/small; do
    for _ in $(seq 100); do curl -sf -o /dev/null "$u" && break; sleep 0.1; done
done
rps() { taskset -c 1 wrk -t1 -c"$2" -d"${D}s" --latency "$1" | awk '/^Requests\/sec/ {r=$2} $1=="99%" {p=$2} END {printf "%s %s\n", r, p}'; }
for cell in "$@"; do
    path=${cell%%:*} c=${cell##*:}
    if [[ $path == tls ]]; then n=http://127.0.0.1:18091/small t=http://127.0.0.1:18094/small pid=$TPT
    else n=http://127.0.0.1:18081/$path t=http://127.0.0.1:18090/$path pid=$TP; fi
    taskset -c 1 wrk -t1 -c"$c" -d1s "$n" >/dev/null; taskset -c 1 wrk -t1 -c"$c" -d1s "$t" >/dev/null
    for ((i = 1; i <= R; i++)); do
        read -r a ap < <(rps "$n" "$c")
        if [[ -n ${PERF:-} && $i == 1 ]]; then
            perf record -g -p "$pid" -o "$BENCH_DIR/perf-${path}-c$c.data" -- sleep "$D" >/dev/null 2>&1 &
            perfpid=$!
        fi
        read -r b bp < <(rps "$t" "$c")
        [[ -n ${perfpid:-} ]] && { wait "$perfpid" || true; perfpid=; }
        awk -v cell="$cell" -v a="$a" -v b="$b" -v ap="$ap" -v bp="$bp" -v i="$i" \
            'BEGIN {printf "%-9s round %d  nginx %9.0f (p99 %s)  tokenproxy %9.0f (p99 %s)  ratio %.2f\n", cell, i, a, ap, b, bp, b / a}'
    done
done
grep -h VmHWM "/proc/$TP/status" "/proc/$TPT/status" 2>/dev/null || true
