#!/usr/bin/env bash
# Lists the files of Sources/ that one request crosses, counted from the code as it runs
# (docs/ARCHITECTURE.md, "A request"), for two requests:
#   plain   a keep-alive GET through a route with a static bearer token;
#   tunnel  the same GET inside a CONNECT tunnel that the forward proxy intercepts (TLS to the client
#           with a leaf its CA minted), as in Tests/EndToEndTests/ForwardProxyTests.swift.
# Each is measured after a warm-up GET on the same connection, so the list holds what every such
# request runs, not start-up, the first connection or the tunnel's set-up.
#
# How: the debug binary (a copy without its DWARF, which valgrind 3.19 cannot read) runs one worker
# under callgrind with instrumentation off; `callgrind_control -i on` just before the measured request
# is sent and `-i off` once its answer is read. Kept are the functions the event loop's thread ran
# that its dispatch (`EventLoop.run`) reaches in the call graph, without the loop's periodic timers
# (the timeout sweep, every 0.2 s, and the certificate watch, every 1 s), which may fire inside the
# window but belong to no request. A function's file is the object file of the build that defines
# its symbol (one .o per source file in a debug build, output-file-map.json), so no debug info is
# needed; a symbol several objects define (compiler-made helpers such as outlined copies) names none,
# nor does the standard library's own code emitted into one of our objects.
#
#   scripts/request-walk.sh            builds the debug binary first (swift build -j 2)
#   BUILD=0 scripts/request-walk.sh    uses the debug build as it is
#   scripts/request-walk.sh --verbose  also lists, under each file, the functions that ran
# Needs valgrind, python3 and the Swift toolchain (swift demangle); scripts/setup.sh installs valgrind.
set -Eeuo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
for tool in valgrind callgrind_control python3 nm strip; do
    command -v "$tool" >/dev/null || { echo "request-walk.sh: needs $tool (scripts/setup.sh)" >&2; exit 2; }
done
if [[ ${BUILD:-1} == 1 ]]; then timeout 3600 swift build -j 2 >&2; fi
BIN_DIR=$(swift build --show-bin-path)
[[ -x $BIN_DIR/tokenproxy ]] || { echo "request-walk.sh: no $BIN_DIR/tokenproxy" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/request-walk.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$BIN_DIR/tokenproxy" "$WORK/tokenproxy"
strip --strip-debug "$WORK/tokenproxy"
timeout 1200 python3 "$ROOT/scripts/request-walk.py" --root "$ROOT" --bin-dir "$BIN_DIR" --binary "$WORK/tokenproxy" --work "$WORK" "$@"
