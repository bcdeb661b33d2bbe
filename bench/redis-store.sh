#!/usr/bin/env bash
# The Redis store's figures (issue 13), beside the file store's, in one run:
#  1. refresh latency: N refreshes per store, driven by expiry (4 s tokens: forced refreshes back off
#     1, 2, 4 … s apart, docs/OBSERVABILITY.md); the time each took as the token thread logs it
#     ("... succeeded in X ms": lock or lease, re-read, the identity provider's call, the durable
#     write, unlock), median and p90;
#  2. per-request cost: wrk against a proxy on each store, alternating, R rounds of D seconds; req/s
#     and the proxy's CPU time per request (from /proc/PID/stat). The request path never touches
#     the store, so the two should agree within noise.
# Local servers only: Tests/servers/oauth_server.py (identity provider), echo_upstream.py, and two
# redis-servers on free ports, one plain (redis://) and one TLS only (rediss://, certificates made
# with openssl for the run). Writes bench/REDIS-STORE.md.
#   bench/redis-store.sh                 # BIN=.build/release/tokenproxy when built, else the debug build
#   N=30 D=5 R=3 bench/redis-store.sh
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${BIN:-}
if [[ -z $BIN ]]; then
    if [[ -x $ROOT/.build/release/tokenproxy ]]; then BIN=$ROOT/.build/release/tokenproxy; else BIN=$ROOT/.build/debug/tokenproxy; fi
fi
N=${N:-30} D=${D:-5} R=${R:-3} C=${C:-8}
for t in wrk redis-server redis-cli curl python3 openssl; do
    command -v "$t" >/dev/null || { echo "redis-store.sh: needs $t (apt-get install wrk redis-server curl)" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/tokenproxy-redis-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

ready_port() {  # FILE: waits for "READY <port>" and prints the port
    for _ in $(seq 300); do
        if grep -q '^READY ' "$1" 2>/dev/null; then awk '/^READY /{print $2; exit}' "$1"; return; fi
        sleep 0.05
    done
    echo "no READY in $1" >&2; exit 1
}
listening() {  # FILE PREFIX: the address after "PREFIXlistening on "
    for _ in $(seq 300); do
        a=$(grep -o "$2listening on [^ ]*" "$1" 2>/dev/null | head -1 | awk '{print $NF}')
        [[ -n $a ]] && { echo "$a"; return; }
        sleep 0.05
    done
    echo "no listening line in $1" >&2; cat "$1" >&2; exit 1
}

python3 "$ROOT/Tests/servers/oauth_server.py" --port 0 --access-ttl 4 --client "app:bench-secret" --user "alice:bench-pw" >"$WORK/idp.out" 2>"$WORK/idp.err" & pids+=($!)
python3 "$ROOT/Tests/servers/echo_upstream.py" --port 0 >"$WORK/up.out" 2>"$WORK/up.err" & pids+=($!)
IDP=$(ready_port "$WORK/idp.out"); UP=$(ready_port "$WORK/up.out")
RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK" --save "" --appendonly yes --appendfsync always --logfile "$WORK/redis.log" & pids+=($!)
for _ in $(seq 100); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
# The same server again, TLS only.
(cd "$WORK" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 &&
    printf 'subjectAltName=IP:127.0.0.1\n' >san.cnf &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.cnf -out server.pem) >/dev/null 2>&1
TPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/tls"
redis-server --port 0 --tls-port "$TPORT" --tls-cert-file "$WORK/server.pem" --tls-key-file "$WORK/server.key" \
    --tls-ca-cert-file "$WORK/ca.pem" --tls-auth-clients no --bind 127.0.0.1 --dir "$WORK/tls" --save "" --appendonly yes \
    --appendfsync always --logfile "$WORK/redis-tls.log" & pids+=($!)
for _ in $(seq 100); do redis-cli --tls --cacert "$WORK/ca.pem" -p "$TPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

config() {  # NAME STORE-SECTION
    cat >"$WORK/$1.yaml" <<YAML
listen: 127.0.0.1:0
upstream: http://127.0.0.1:$UP
workers: 1
admin:
  listen: 127.0.0.1:0
credentials:
  type: oauth2_refresh
  token_url: http://127.0.0.1:$IDP/oauth/token
  client_id: app
  client_secret_env: BENCH_CLIENT_SECRET
  refresh_margin: 2s
log:
  level: info
$2
YAML
}
export BENCH_CLIENT_SECRET=bench-secret
config file "store:
  path: $WORK/state/tokens.json"
config redis "store:
  backend: redis
  url: redis://127.0.0.1:$RPORT/0
  key: bench/session"
config rediss "store:
  backend: redis
  url: rediss://127.0.0.1:$TPORT/0
  ca_file: $WORK/ca.pem
  key: bench/session"
STORES="file redis rediss"

declare -A PID ADDR ADMIN
for s in $STORES; do
    printf 'bench-pw\n' | "$BIN" login --config "$WORK/$s.yaml" --username alice --password-stdin 2>/dev/null
    "$BIN" serve --config "$WORK/$s.yaml" 2>"$WORK/$s.log" & pids+=($!); PID[$s]=$!
    ADDR[$s]=$(listening "$WORK/$s.log" "info ")
    ADMIN[$s]=$(listening "$WORK/$s.log" "admin ")
done

# 1. Refresh latency: the stores refresh side by side as their tokens near expiry (every ~2 s).
declare -A REFRESH
for _ in $(seq $((N * 4 + 40))); do
    done_all=1
    for s in $STORES; do
        (( $(grep -c 'refresh (expiry) succeeded in' "$WORK/$s.log" || true) >= N )) || done_all=0
    done
    (( done_all )) && break
    sleep 1
done
for s in $STORES; do
    REFRESH[$s]=$(grep -o 'refresh (expiry) succeeded in [0-9]* ms' "$WORK/$s.log" | head -n "$N" | awk '{print $5}' | sort -n |
        awk '{a[NR]=$1} END {printf "median %d ms, p90 %d ms, min %d ms, max %d ms (n=%d)", a[int((NR+1)/2)], a[int(NR*0.9+0.5)], a[1], a[NR], NR}')
done

# 2. Per-request cost, alternating.
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
declare -A RPS CPU
for r in $(seq "$R"); do
    for s in $STORES; do
        t0=$(cpu_ticks "${PID[$s]}")
        out=$(wrk -t1 -c"$C" -d"${D}s" "http://${ADDR[$s]}/small" 2>&1)
        t1=$(cpu_ticks "${PID[$s]}")
        reqs=$(awk '/requests in/{print $1}' <<<"$out")
        rps=$(awk '/Requests\/sec/{print $2}' <<<"$out")
        us=$(python3 -c "print(round(($t1-$t0)/$(getconf CLK_TCK)*1e6/max(1,$reqs),1))")
        RPS[$s]+="$rps "; CPU[$s]+="$us "
    done
done

{
    echo "# Redis store figures"
    echo
    echo "\`bench/redis-store.sh\` (N=$N refreshes, $R rounds of wrk -t1 -c$C -d${D}s, alternating), $(date -u +%Y-%m-%dT%H:%MZ),"
    echo "binary \`${BIN#"$ROOT"/}\`, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
    echo "Identity provider: Tests/servers/oauth_server.py (Authlib, local); upstream: Tests/servers/echo_upstream.py."
    echo
    echo "| store | refresh latency (at expiry, as the token thread logs it) | req/s per round | proxy CPU µs per request per round |"
    echo "| --- | --- | --- | --- |"
    for s in $STORES; do
        echo "| $s | ${REFRESH[$s]} | ${RPS[$s]} | ${CPU[$s]} |"
    done
    echo
    echo "The request path reads the token from memory (one lock-protected load) with either store: the"
    echo "per-request columns differ only by noise. The refresh column is where the store shows: the file"
    echo "store's flock, read, fsync'd write and rename against Redis's lease, read, fenced Lua write and"
    echo "release (5 round trips; appendfsync always in this run); rediss adds the TLS records of the same"
    echo "round trips (its connections are kept, so the handshake is paid once)."
} | tee "$HERE/REDIS-STORE.md"
