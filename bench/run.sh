#!/usr/bin/env bash
# tokenproxy, measured side by side with nginx, HAProxy and Caddy on the anchor benchmark.
#
#   bench/run.sh            # about 15 min: installs what is missing, builds in release mode,
#                           # runs ../shared/bench-anchors/run.sh with tokenproxy as the extra
#                           # target, then a memory check, then writes bench/RESULTS.md
#
# Settings (environment; the anchor script's own settings pass through to it):
#   DURATION=10 REPS=3      seconds per wrk run, rounds (medians and same-round ratios need >= 3)
#   SCENARIOS="small:1 small:64 big:8 tls:1 tls:64"
#   STATE_DIR=/tmp/bench-anchors   the anchor script's state (results.tsv, logs, tls/ca.pem)
#   BENCH_DIR=$STATE_DIR/tpb   tokenproxy's configs, logs, memory samples and the copy of the binary
#                          that runs (named tpb-serve: a `pkill tokenproxy` elsewhere on a shared
#                          machine, or a rebuild during the run, cannot touch it)
#   BIN=path                use this binary instead of building one
#   SKIP_ANCHORS=1          only the memory check (uses the last results.tsv for the table)
#   SKIP_MEMORY=1           only the anchor run
#   SLOW_BYTES=1073741824 SLOW_RATE=64M   the slow reader: bytes to stream, curl --limit-rate
#   NO_INSTALL=1            never call apt-get (fail if a tool is missing)
#   OUT=bench/RESULTS.md    where the report goes (the hand-written part outside the markers is kept)
# Not part of CI: it makes no assertions about speed.
set -Eeuo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { log "bench/run.sh: error: $*"; exit 2; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null) || die "not inside the tokenproxy git checkout"
ANCHORS="$ROOT/../shared/bench-anchors/run.sh"
[[ -f $ANCHORS ]] || die "the anchor benchmark is missing: expected $ANCHORS (the shared bench-anchors folder beside the repository)"
ANCHORS=$(cd -- "$(dirname -- "$ANCHORS")" && pwd)/run.sh

export DURATION=${DURATION:-10}
export REPS=${REPS:-3}
export SCENARIOS=${SCENARIOS:-"small:1 small:64 big:8 tls:1 tls:64"}
export STATE_DIR=${STATE_DIR:-${TMPDIR:-/tmp}/bench-anchors}
BENCH_DIR=${BENCH_DIR:-$STATE_DIR/tpb}
SLOW_BYTES=${SLOW_BYTES:-1073741824}
SLOW_RATE=${SLOW_RATE:-64M}
OUT=${OUT:-$HERE/RESULTS.md}
TOKEN_VALUE=test-token-123
PORT=18090 TLS_PORT=18094 MEM_PORT=18095

# ---------------------------------------------------------------- tools
need=()
for t in nginx haproxy caddy wrk curl openssl taskset ss flock python3 pgrep; do
    command -v "$t" >/dev/null 2>&1 || need+=("$t")
done
if ((${#need[@]})); then
    [[ -z ${NO_INSTALL:-} ]] || die "missing tools: ${need[*]}"
    pkgs=()
    for t in "${need[@]}"; do
        case $t in
            taskset | flock) pkgs+=(util-linux) ;;
            ss) pkgs+=(iproute2) ;;
            pgrep) pkgs+=(procps) ;;
            python3) pkgs+=(python3) ;;
            *) pkgs+=("$t") ;;
        esac
    done
    SUDO=()
    ((EUID == 0)) || SUDO=(sudo)
    log "bench/run.sh: installing ${pkgs[*]} with apt-get"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null \
        || { "${SUDO[@]}" apt-get update -qq >/dev/null && "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null; } \
        || die "apt-get could not install ${pkgs[*]}"
fi

# ---------------------------------------------------------------- build
if [[ -z ${BIN:-} ]]; then
    log "bench/run.sh: building tokenproxy (release, scratch path .build-release)"
    # Linked as the Docker image links it (static Swift runtime, lld, packed relocations): see README.
    release=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs
        -Xlinker --symbol-ordering-file=scripts/startup-order.txt -Xlinker --no-warn-symbol-ordering --scratch-path .build-release)
    (cd "$ROOT" && swift build "${release[@]}" --product tokenproxy >&2)
    BIN="$(cd "$ROOT" && swift build "${release[@]}" --show-bin-path)/tokenproxy"
fi
[[ -x $BIN ]] || die "no tokenproxy binary at $BIN"

# ---------------------------------------------------------------- configs
mkdir -p "$BENCH_DIR"
BENCH_DIR=$(cd -- "$BENCH_DIR" && pwd)
cp "$BIN" "$BENCH_DIR/tpb-serve.new" && mv -f "$BENCH_DIR/tpb-serve.new" "$BENCH_DIR/tpb-serve"
BIN="$BENCH_DIR/tpb-serve"
"$BIN" --version >"$BENCH_DIR/version.txt" 2>&1 || true
write_config() {  # FILE LISTEN UPSTREAM [CA]
    {
        echo "listen: $2"
        echo "upstream: $3"
        echo "workers: 1"
        echo "credentials:"
        echo "  type: static"
        echo "  token_env: BENCH_TOKEN"
        if [[ -n ${4:-} ]]; then
            echo "upstream_tls:"
            echo "  ca_file: $4"
        fi
        # No limits: the anchor's nginx keeps idle upstream connections 300 s (conf/proxy.nginx.conf),
        # and so does tokenproxy by default (docs/ENGINE.md, "The pool": 60 s emptied the pool between
        # a cell's rounds and refilled it with new TLS handshakes inside the measured run).
        echo "log:"
        echo "  level: info"
    } >"$1"
}
write_config "$BENCH_DIR/plain.yaml" "127.0.0.1:$PORT" "http://127.0.0.1:18080"
# The tls instance's config is written when it starts: the anchor script makes the CA first and
# hands its path over as BENCH_TLS_CA.
cat >"$BENCH_DIR/serve-tls.sh" <<EOF
#!/usr/bin/env bash
set -eu
: "\${BENCH_TLS_CA:?bench-anchors/run.sh exports the path of the CA}"
{
    echo "listen: 127.0.0.1:$TLS_PORT"
    echo "upstream: https://127.0.0.1:18443"
    echo "workers: 1"
    echo "credentials:"
    echo "  type: static"
    echo "  token_env: BENCH_TOKEN"
    echo "upstream_tls:"
    echo "  ca_file: \$BENCH_TLS_CA"
    echo "log:"
    echo "  level: info"
} >"$BENCH_DIR/tls.yaml"
exec "$BIN" serve --config "$BENCH_DIR/tls.yaml"
EOF
chmod +x "$BENCH_DIR/serve-tls.sh"
export BENCH_TOKEN=$TOKEN_VALUE

# ---------------------------------------------------------------- memory sampler
# Peak RSS (VmHWM) of the tokenproxy processes the anchor script starts, read every second while
# they live (the kernel forgets it when a process exits).
SAMPLES="$BENCH_DIR/rss-samples.tsv"
sampler() {
    : >"$SAMPLES"
    while :; do
        for pid in $(pgrep -f -- "$BIN serve --config $BENCH_DIR/" 2>/dev/null || true); do
            st=/proc/$pid/status
            [[ -r $st ]] || continue
            cfg=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | awk '{print $NF}')
            awk -v pid="$pid" -v cfg="${cfg##*/}" '/^VmHWM:/ {h = $2} /^VmRSS:/ {r = $2} END {if (h) printf "%s\t%s\t%s\t%s\n", pid, cfg, h, r}' "$st" >>"$SAMPLES" 2>/dev/null || true
        done
        sleep 1
    done
}

ANCHOR_RC=0
if [[ -z ${SKIP_ANCHORS:-} ]]; then
    sampler &
    SAMPLER_PID=$!
    trap 'kill "$SAMPLER_PID" 2>/dev/null || true' EXIT
    ANCHOR_CMD="EXTRA_NAME=tokenproxy EXTRA_PORT=$PORT EXTRA_TLS_PORT=$TLS_PORT DURATION=$DURATION REPS=$REPS SCENARIOS=\"$SCENARIOS\" $ANCHORS"
    log "bench/run.sh: $ANCHOR_CMD"
    echo "$ANCHOR_CMD" >"$BENCH_DIR/anchor-command.txt"
    EXTRA_NAME=tokenproxy EXTRA_PORT=$PORT EXTRA_TLS_PORT=$TLS_PORT \
        EXTRA_CMD="$BIN serve --config $BENCH_DIR/plain.yaml" \
        EXTRA_TLS_CMD="$BENCH_DIR/serve-tls.sh" \
        "$ANCHORS" || ANCHOR_RC=$?
    kill "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    trap - EXIT
fi

# ---------------------------------------------------------------- memory: idle, and one slow reader of 1 GiB
MEM="$BENCH_DIR/memory.tsv"
if [[ -z ${SKIP_MEMORY:-} ]]; then
    log "bench/run.sh: memory check: idle, then one client reading $SLOW_BYTES bytes at $SLOW_RATE/s"
    UP_OUT="$BENCH_DIR/echo-upstream.out"
    python3 "$ROOT/Tests/servers/echo_upstream.py" --port 0 >"$UP_OUT" 2>"$BENCH_DIR/echo-upstream.err" &
    UP_PID=$!
    PX_PID=
    cleanup_mem() {
        [[ -n $PX_PID ]] && kill "$PX_PID" 2>/dev/null
        kill "$UP_PID" 2>/dev/null
        wait 2>/dev/null
        return 0
    }
    trap cleanup_mem EXIT
    for _ in $(seq 100); do grep -q READY "$UP_OUT" 2>/dev/null && break; sleep 0.1; done
    UP_PORT=$(awk '/READY/ {print $2}' "$UP_OUT")
    [[ -n $UP_PORT ]] || die "the echo upstream did not start (see $BENCH_DIR/echo-upstream.err)"
    write_config "$BENCH_DIR/memory.yaml" "127.0.0.1:$MEM_PORT" "http://127.0.0.1:$UP_PORT"
    "$BIN" serve --config "$BENCH_DIR/memory.yaml" 2>"$BENCH_DIR/memory-proxy.log" &
    PX_PID=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$MEM_PORT/small" && break; sleep 0.1; done
    kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
    sleep 2
    idle_rss=$(kb "$PX_PID" VmRSS) idle_hwm=$(kb "$PX_PID" VmHWM)
    t0=$(date +%s.%N)
    got=$(curl -s --limit-rate "$SLOW_RATE" -o /dev/null -w '%{size_download}' "http://127.0.0.1:$MEM_PORT/big?bytes=$SLOW_BYTES")
    t1=$(date +%s.%N)
    stream_hwm=$(kb "$PX_PID" VmHWM)
    sleep 2
    after_rss=$(kb "$PX_PID" VmRSS)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
    printf 'idle_rss_kb\t%s\nidle_hwm_kb\t%s\nstream_bytes\t%s\nstream_rate\t%s\nstream_seconds\t%s\nstream_hwm_kb\t%s\nafter_rss_kb\t%s\n' \
        "$idle_rss" "$idle_hwm" "$got" "$SLOW_RATE" "$secs" "$stream_hwm" "$after_rss" >"$MEM"
    cleanup_mem
    trap - EXIT
    [[ $got == "$SLOW_BYTES" ]] || log "bench/run.sh: warning: the slow reader got $got of $SLOW_BYTES bytes"
fi

# ---------------------------------------------------------------- report
python3 "$HERE/report.py" --results "$STATE_DIR/results.tsv" --runs "$STATE_DIR/results.md" \
    --samples "$SAMPLES" --memory "$MEM" --command "$BENCH_DIR/anchor-command.txt" --out "$OUT"
log "bench/run.sh: wrote $OUT"
if ((ANCHOR_RC != 0)); then
    log "bench/run.sh: the anchor run failed (exit status $ANCHOR_RC): see $STATE_DIR/logs"
    exit "$ANCHOR_RC"
fi
