#!/usr/bin/env bash
# tokenproxy's reliability figures (issue 12 point 12), written up in docs/RELIABILITY.md "Figures".
#
#   bench/reliability.sh [figure ...]    figures: slowloris idle fds drain memory refused (default: all)
#
# Each figure runs in under two minutes and prints the numbers it measured (`name: value` lines).
# Settings (environment):
#   BIN=path          the tokenproxy binary to measure; by default one is built in release mode
#                     (scratch path .build-release, as bench/run.sh does) and copied to a temporary
#                     file, so that a rebuild during the run cannot change what runs
#   LORIS=500         slow-loris connections of each kind
#   IDLE=10000        idle client connections
#   FD_CONNECTIONS=400 connections against `ulimit -n 256`
#   INFLIGHT=20       requests in flight at SIGTERM
#   MEMORY_BYTES=1000000000  bytes uploaded (twice) and downloaded
#   REFUSED=20000 REFUSED_RATE=200   clients refused with max_connections full, and how many a second
# Needs python3 and curl; uses wrk for latencies when installed. Makes no assertions.
set -Eeuo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$HERE/.." && pwd)

if [[ -z ${BIN:-} ]]; then
    echo "bench/reliability.sh: building tokenproxy (release, scratch path .build-release)" >&2
    (cd "$ROOT" && swift build -c release --scratch-path .build-release --product tokenproxy >&2)
    BIN="$(cd "$ROOT" && swift build -c release --scratch-path .build-release --show-bin-path)/tokenproxy"
fi
[[ -x $BIN ]] || { echo "bench/reliability.sh: no tokenproxy binary at $BIN" >&2; exit 2; }
COPY=$(mktemp "${TMPDIR:-/tmp}/tp-reliability-bin.XXXXXX")
trap 'rm -f "$COPY"' EXIT
cp "$BIN" "$COPY"
chmod 0755 "$COPY"

# 10,000 idle connections need more descriptors than the usual 1024 (the proxy and the client each).
ulimit -n "$(ulimit -Hn)"
python3 "$HERE/reliability.py" "$COPY" "$@"
