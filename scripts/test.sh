#!/usr/bin/env bash
# Builds tokenproxy and runs every test: unit tests and the end-to-end tests that drive the real
# binary (.build/debug/tokenproxy, or $TOKENPROXY_BIN) against the Python servers in Tests/servers.
# Extra arguments go to `swift test` (e.g. `scripts/test.sh --filter LogsTests`). The slow memory
# tests run only with TOKENPROXY_SLOW_TESTS=1 (`TOKENPROXY_SLOW_TESTS=1 scripts/test.sh --filter MemoryTests`).
# At the end it prints each test target's time, from the run's own xUnit report (scripts/test-times.py).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/setup.sh

jobs="${SWIFT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
echo "==> swift build"
swift build -j "$jobs"
echo "==> swift test"
report="$(mktemp -d)"
trap 'rm -rf "$report"' EXIT
status=0
swift test -j "$jobs" --xunit-output "$report/tests.xml" "$@" || status=$?
scripts/test-times.py "$report"/*.xml || true
exit "$status"
