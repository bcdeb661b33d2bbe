#!/usr/bin/env bash
# Builds every libFuzzer target (Tests/Fuzz/Sources/Fuzz*) and runs each for SECONDS (default 60),
# starting from the seed corpus kept in Tests/Fuzz/corpus/<target>. Exits 1 when any target crashed
# (an assertion, a trap, an AddressSanitizer report, a leak, a timeout or running out of memory).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 600 FuzzRequestParser
#                                              (SECONDS=0: build only)
#
# The targets exist only when TOKENPROXY_FUZZ is set (Package.swift), and are built here with
# `-sanitize=fuzzer,address` (coverage instrumentation, libFuzzer, AddressSanitizer) in their own
# scratch folder (.build-fuzz), so the regular `swift build` and `swift test` are unaffected. Each
# target's main.swift hands the process to libFuzzer's driver (FuzzSupport's runFuzzer): SwiftPM
# makes main.swift the entry point, so the usual `-parse-as-library` with libFuzzer's own main
# does not link. lld links (the toolchain ships it; gold stops with an internal error on these
# binaries). What a run finds beyond the seeds stays in
# .build-fuzz/corpus/<target>; a crashing input lands in .build-fuzz/artifacts/<target>/ and is
# replayed with `.build-fuzz/debug/<target> FILE`. See docs/RELIABILITY.md.
#
# Environment: FUZZ_JOBS (targets fuzzed at once, default 1), SWIFT_BUILD_JOBS, FUZZ_ARGS (more
# libFuzzer flags, e.g. "-max_len=16384").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${1:-60}"
shift || true
case "$seconds" in
'' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
    exit 2
    ;;
esac

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for dir in Tests/Fuzz/Sources/Fuzz*/; do
        name="$(basename "$dir")"
        [ -f "$dir/main.swift" ] && targets+=("$name")
    done
fi

scratch="$root/.build-fuzz"
jobs="${SWIFT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
fuzz_jobs="${FUZZ_JOBS:-1}"
export TOKENPROXY_FUZZ=1
# libFuzzer and AddressSanitizer print the crash; the Swift runtime's backtracer would only add a
# spurious AddressSanitizer report of its own (it reads the crashed thread's stack).
export SWIFT_BACKTRACE=enable=no

# The toolchain ships libFuzzer and the sanitizer runtimes (lib/swift/clang/lib/linux); only libcurl's
# headers (for the Curl module that the answer targets link through IdentityHTTP) may be missing on a
# fresh machine.
scripts/setup.sh >/dev/null

for target in "${targets[@]}"; do
    echo "==> building $target"
    swift build -c debug -j "$jobs" --scratch-path "$scratch" --product "$target" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
done
if [ "$seconds" -eq 0 ]; then
    echo "==> built; SECONDS=0 runs nothing"
    exit 0
fi

# One run: a working corpus (new inputs are written there) ahead of the read-only seeds.
run_one() {
    local target="$1"
    local work="$scratch/corpus/$target" artifacts="$scratch/artifacts/$target/" log="$scratch/logs/$target.log"
    local dict
    mkdir -p "$work" "$artifacts" "$(dirname "$log")"
    # Tokens of the input's language help the mutator past the first keyword.
    case "$target" in
    *Request* | *Chunked* | *Response*) dict=http ;;
    *Configuration*) dict=yaml ;;
    *) dict=json ;;
    esac
    # stdin from /dev/null: a configuration may name /dev/stdin as a secret file.
    # shellcheck disable=SC2086
    if "$scratch/debug/$target" "$work" "Tests/Fuzz/corpus/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts" -dict="Tests/Fuzz/dict/$dict.dict" ${FUZZ_ARGS:-} </dev/null >"$log" 2>&1; then
        echo "ok" >"$log.status"
    else
        echo "crashed" >"$log.status"
    fi
}

echo "==> fuzzing ${#targets[@]} target(s) for ${seconds}s each, $fuzz_jobs at a time"
running=0
for target in "${targets[@]}"; do
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$fuzz_jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

failed=0
printf '%-24s %-8s %12s %8s %8s %8s\n' target result executions exec/s cov ft
for target in "${targets[@]}"; do
    log="$scratch/logs/$target.log"
    status="$(cat "$log.status" 2>/dev/null || echo missing)"
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
    cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)"
    ft="$(grep -Eo 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)"
    printf '%-24s %-8s %12s %8s %8s %8s\n' "$target" "$status" "${execs:--}" "${rate:--}" "${cov:--}" "${ft:--}"
    if [ "$status" != ok ]; then
        failed=1
        echo "    log: $log" >&2
        grep -E 'ERROR: |Fatal error|Test unit written' "$log" | head -5 | sed 's/^/    /' >&2 || true
    fi
done
exit "$failed"
