#!/usr/bin/env bash
# Runs the whole test suite (unit and end-to-end) under a sanitizer:
#
#   scripts/sanitize.sh address|thread [swift test arguments]
#
# Everything is built with `--sanitize=KIND` in its own scratch folder (.build-sanitize-KIND), so
# the regular .build stays as it is, and the end-to-end tests start the sanitized binary
# (TOKENPROXY_BIN, see Tests/TestSupport/Paths.swift). Every sanitized process, the test runner and
# each tokenproxy the tests start, writes its reports to .build-sanitize-KIND/reports/; the run
# fails when the tests fail or when any report was written (a child's report would otherwise go
# unnoticed in a log the test never reads). Suppressions, for third-party code only and each with
# its reason, live in scripts/sanitize/KIND.supp. Results and timings: docs/RELIABILITY.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

kind="${1:-}"
case "$kind" in
address | thread) shift ;;
*)
    echo "usage: scripts/sanitize.sh address|thread [swift test arguments]" >&2
    exit 2
    ;;
esac

scripts/setup.sh

scratch="$root/.build-sanitize-$kind"
reports="$scratch/reports"
jobs="${SWIFT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
rm -rf "$reports"
mkdir -p "$reports"

suppressions="$root/scripts/sanitize/$kind.supp"
case "$kind" in
address)
    # detect_leaks: LeakSanitizer at every sanitized process's exit (a leak is a report too).
    options="log_path=$reports/asan:detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
    [ -f "$suppressions" ] && export LSAN_OPTIONS="suppressions=$suppressions:print_suppressions=0"
    export ASAN_OPTIONS="$options"
    ;;
thread)
    options="log_path=$reports/tsan:halt_on_error=0:second_deadlock_stack=1"
    [ -f "$suppressions" ] && options="$options:suppressions=$suppressions"
    export TSAN_OPTIONS="$options"
    ;;
esac

# The Swift runtime's own crash backtracer reads other threads' stacks, which AddressSanitizer reports
# as a second error on top of the real one; the sanitizer's report is the one wanted here.
export SWIFT_BACKTRACE=enable=no

start=$(date +%s)
echo "==> swift build --sanitize=$kind"
swift build -j "$jobs" --sanitize="$kind" --scratch-path "$scratch"
built=$(date +%s)

export TOKENPROXY_BIN="$scratch/debug/tokenproxy"
echo "==> swift test --sanitize=$kind (TOKENPROXY_BIN=$TOKENPROXY_BIN)"
status=0
swift test -j "$jobs" --sanitize="$kind" --scratch-path "$scratch" "$@" || status=$?
done_at=$(date +%s)

echo "==> build $((built - start)) s, tests $((done_at - built)) s"
shopt -s nullglob
found=("$reports"/*)
if [ "${#found[@]}" -gt 0 ]; then
    echo "==> $kind sanitizer reports (${#found[@]} file(s) in $reports):" >&2
    for file in "${found[@]}"; do
        echo "--- $file" >&2
        grep -E '^(SUMMARY|WARNING|ERROR):' "$file" | head -5 >&2 || true
    done
    status=1
fi
if [ "$status" -eq 0 ]; then
    echo "==> clean: the whole suite passed under the $kind sanitizer with no report"
fi
exit "$status"
