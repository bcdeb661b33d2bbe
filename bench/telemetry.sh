#!/usr/bin/env bash
# /small with telemetry (sample_ratio 1.0, every request's spans exported) against the same binary
# without it (CONTRACT.md "Telemetry"; issue 43's bar: at least 0.85x): one worker pinned to CPU 0
# beside an nginx upstream, wrk on CPU 1, the two proxies measured in turns.
#   bench/telemetry.sh [CONNECTIONS] [ROUNDS]      (default 64 connections, 3 rounds of 10 s)
#   BIN=path/to/tokenproxy                         default .build/release/tokenproxy
#   COLLECTOR=decoder|sink|python                  default decoder
# The collector stands for one on another machine, so it should take little of the CPUs the proxy
# and wrk measure with. `decoder` is Tests/servers/otlp_receiver.py --count-only: every batch
# decoded with opentelemetry-proto and its spans counted (printed at the end against the requests
# sent), none kept. `sink` is an nginx on CPU 1 that reads each POST whole and answers 200 with an
# empty body (an empty ExportTraceServiceResponse, OTLP/HTTP "Success") and logs each export's
# size. `python` is the receiver as the tests run it, keeping every span as JSON: on this 2-core
# machine it takes half a CPU at these rates, beside wrk and the proxy, so its figure measures
# the receiver as much as the proxy.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
BIN=${BIN:-$ROOT/.build/release/tokenproxy}
CONNECTIONS=${1:-64}
ROUNDS=${2:-3}
COLLECTOR=${COLLECTOR:-decoder}
d=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
source "$HERE/lib/callgrind.sh"  # for its nginx upstream's configuration only
upstream_config "$d" 18580
taskset -c 0 nginx -p "$d" -c "$d/up.conf" & pids+=($!)
case $COLLECTOR in
sink)
    mkdir -p "$d/sink/logs"
    cat >"$d/sink/sink.conf" <<CONF
worker_processes 1; daemon off; pid $d/sink/pid; error_log $d/sink/logs/e.log;
events {}
http { log_format export "\$request_uri \$content_length \$status";
server { listen 127.0.0.1:18583; keepalive_requests 1000000; client_max_body_size 16m;
 access_log $d/sink/exports.log export;
 location /v1/ { return 200; } } }
CONF
    taskset -c 1 nginx -p "$d/sink" -c "$d/sink/sink.conf" & pids+=($!)
    collector=$!
    ;;
python | decoder)
    python3 "$ROOT/Tests/servers/otlp_receiver.py" --port 18583 $([ "$COLLECTOR" = decoder ] && echo --count-only) >"$d/receiver.out" 2>&1 &
    pids+=($!)
    collector=$!
    ;;
*) echo "COLLECTOR: sink, decoder or python" >&2; exit 2 ;;
esac
config() {  # port, extra lines
    printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:18580\nworkers: 1\ncredentials: {type: static, token_env: BENCH_TOKEN}\nstore: {path: %s/store-%s/tokens.json}\n%s\n' \
        "$1" "$d" "$1" "$2" >"$d/tp-$1.yaml"
}
config 18581 ""
config 18582 "telemetry: {endpoint: http://127.0.0.1:18583, sample_ratio: 1.0}"
declare -A proxy
for port in 18581 18582; do
    BENCH_TOKEN=test-token-123 taskset -c 0 "$BIN" serve --config "$d/tp-$port.yaml" 2>"$d/tp-$port.err" & pids+=($!)
    proxy[$port]=$!
done
for port in 18580 18581 18582 18583; do
    for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
done
# A process's CPU time (user and system, every thread: the exporter's too), in clock ticks; with
# its children's (the sink's nginx worker).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tree_ticks() {
    local sum child
    sum=$(ticks "$1")
    for child in $(pgrep -P "$1"); do sum=$((sum + $(ticks "$child"))); done
    echo "$sum"
}
collector_ticks=0
declare -A cpu=([18581]=0 [18582]=0) served=([18581]=0 [18582]=0)
# round PORT: one 10 s round; sets `rate` to its requests per second and adds its requests and
# the proxy's CPU ticks up (in this shell: no command substitution around it).
round() {
    local before out
    before=$(ticks "${proxy[$1]}")
    out=$(taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d10s "http://127.0.0.1:$1/small")
    cpu[$1]=$((cpu[$1] + $(ticks "${proxy[$1]}") - before))
    served[$1]=$((served[$1] + $(awk '/requests in/ {print $1}' <<<"$out")))
    rate=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
}
taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s "http://127.0.0.1:18581/small" >/dev/null
warm=$(taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d2s "http://127.0.0.1:18582/small" | awk '/requests in/ {print $1}')
off=(); on=()
for _ in $(seq "$ROUNDS"); do
    round 18581
    off+=("$rate")
    before=$(tree_ticks "$collector")
    round 18582
    on+=("$rate")
    collector_ticks=$((collector_ticks + $(tree_ticks "$collector") - before))
done
python3 - "${off[*]}" "${on[*]}" "${cpu[18581]} ${served[18581]} ${cpu[18582]} ${served[18582]} $(getconf CLK_TCK) $collector_ticks $ROUNDS" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(off), statistics.median(on)
print(f"/small: without telemetry {a:.0f} req/s, sample_ratio 1.0 {b:.0f} req/s, ratio {b / a:.2f} (bar 0.85)")
print("rounds without:", off, "with:", on)
cpu_off, n_off, cpu_on, n_on, hz, collector, rounds = (int(x) for x in sys.argv[3].split())
us_off, us_on = cpu_off / hz / n_off * 1e6, cpu_on / hz / n_on * 1e6
print(f"the proxy's CPU time per request (every thread): without {us_off:.1f} us, with {us_on:.1f} us ({us_on / us_off:.2f}x)")
print(f"the collector's CPU time while telemetry was measured: {collector / hz:.1f} s in {rounds * 10} s")
PY
sleep 2  # the last batch
grep -c "not exported" "$d/tp-18582.err" | sed 's/^/export warnings: /' || true
if [ "$COLLECTOR" = decoder ]; then
    curl -s http://127.0.0.1:18583/test/seen | python3 -c 'import json, sys; s = json.load(sys.stdin)
print("collector: %d exports decoded, %d spans, %d refused" % (s["exports"], s["counted"].get("/v1/traces", 0), s["refused"]))'
    echo "requests with telemetry, warm-up included: $((served[18582] + warm)) (a SERVER and a CLIENT span each)"
fi
if [ "$COLLECTOR" = sink ]; then
    awk '$1 == "/v1/traces" { n++; bytes += $2; if ($3 != 200) bad++ }
         END { printf "collector: %d trace exports, %.1f MB, %d not answered 200\n", n, bytes / 1e6, bad }' "$d/sink/exports.log"
fi
