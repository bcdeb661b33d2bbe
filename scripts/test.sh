#!/usr/bin/env bash
# Builds tokenproxy and runs every test: unit tests and the end-to-end tests that drive the real
# binary (.build/debug/tokenproxy, or $TOKENPROXY_BIN) against the Python servers in Tests/servers.
# Extra arguments go to `swift test` (e.g. `scripts/test.sh --filter LogsTests`). The slow memory
# tests run only with TOKENPROXY_SLOW_TESTS=1 (`TOKENPROXY_SLOW_TESTS=1 scripts/test.sh --filter MemoryTests`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/setup.sh

jobs="${SWIFT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
echo "==> swift build"
swift build -j "$jobs"
echo "==> swift test"
swift test -j "$jobs" "$@"
