#!/usr/bin/env bash
# Instructions per proxied /small request with `audit.path` set against the same configuration
# without it, counted by callgrind in the harness of bench-anchors' instructions-vs-nginx.sh
# (bench/lib/callgrind.sh): one worker pinned to CPU 0 beside an nginx upstream; wrk -c16
# keep-alive on CPU 1; 2 s warm-up, 8 s counted. Counts are repeatable whatever else the machine
# does; they leave out the kernel's time in write(2) (bench/audit-cost.sh measures throughput for that).
#   bench/audit-instructions.sh PATH-TO-release-tokenproxy
# Prints the two counts and their difference; the profiles stay for `callgrind_annotate` (their
# paths on stderr).
set -u
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib/callgrind.sh"
trap stop_bench_processes EXIT
export BENCH_TOKEN=test-token-123
d=$(mktemp -d)
proxy_config "$d/off.yaml" 18681 18680 "$d/store" ""
proxy_config "$d/on.yaml" 18682 18680 "$d/store" "audit: {path: $d/audit.jsonl}"
stripped_copy "$1" "$d/tp"
start_upstream "$d" 18680
count() {  # name port
    count_instructions "$d/$1.out" "http://127.0.0.1:$2/small" "$d/tp" serve --config "$d/$1.yaml"
    echo "$instructions_per_request"
}
off=$(count off 18681)
on=$(count on 18682)
lines=$(wc -l <"$d/audit.jsonl")
echo "profiles: $d/off.out $d/on.out (audit lines written: $lines)" >&2
echo "instructions per /small request: audit off $off, audit on $on, the audit's cost $((on - off)) (ratio $(python3 -c "print(f'{$on/$off:.3f}')"))"
