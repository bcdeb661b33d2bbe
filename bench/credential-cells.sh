#!/usr/bin/env bash
# Where the credential goes, and what it costs: /small through
#   nginx     proxy_pass with a fixed `Authorization: Bearer` (the anchor; nginx makes no proofs or
#             signatures),
#   plain     tokenproxy with a static Bearer token,
#   apikey    tokenproxy with the token in `X-API-Key` (`inject: {header: X-API-Key, format: "{token}"}`),
#   dpop      tokenproxy with a DPoP-bound token: a fresh ES256 proof on every request (RFC 9449),
#   sigv4     tokenproxy with `type: aws`: every request signed with SigV4 (static keys from the
#             environment, service execute-api),
# all to the same nginx upstream, which verifies nothing, so the proxy's own cost shows. Prints req/s
# at c1 and c64 (wrk, DURATION seconds each), the ratio to nginx at c64, and, with valgrind
# installed, instructions per request of each tokenproxy cell (callgrind, as bench/instructions.sh
# counts them).
#   bench/credential-cells.sh [BIN]   BIN: a release tokenproxy (default .build-release/release/tokenproxy)
#   CELLS="plain sigv4"               the tokenproxy cells to run (default: all four)
# The DPoP token comes from Tests/servers/dpop_servers.py (python3 with flask and joserfc).
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
DURATION=${DURATION:-5}
CELLS=${CELLS:-plain apikey dpop sigv4}
[[ -x $BIN ]] || { echo "no tokenproxy binary at $BIN" >&2; exit 2; }
for tool in nginx wrk python3 curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
D=$(mktemp -d /tmp/tokenproxy-credential-cells.XXXXXX)
mkdir -p "$D/logs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
UP=$(free_port) NGX=$(free_port)
cat >"$D/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $D/nginx.pid; error_log $D/logs/error.log;
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path $D; proxy_temp_path $D; fastcgi_temp_path $D; uwsgi_temp_path $D; scgi_temp_path $D;
  keepalive_requests 1000000;
  upstream up { server 127.0.0.1:$UP; keepalive 256; }
  server { listen 127.0.0.1:$UP; location /small { return 200 "hello, small body\n"; } }
  server { listen 127.0.0.1:$NGX;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_set_header Authorization "Bearer test-token-123"; } }
}
NGINX
nginx -p "$D/" -c "$D/nginx.conf" & pids+=($!)

# The `credentials:` (and `inject:`) lines of each cell.
credentials() {
    case $1 in
    plain) printf '  type: static\n  token_env: BENCH_TOKEN\n' ;;
    apikey) printf '  type: static\n  token_env: BENCH_TOKEN\ninject:\n  header: X-API-Key\n  format: "{token}"\n' ;;
    dpop) printf '  type: oauth2_client_credentials\n  token_url: http://127.0.0.1:%s/oauth/token\n  client_id: bench\n  client_auth: none\n  dpop: {}\n' "$AS" ;;
    sigv4) printf '  type: aws\n  source: environment\n  region: eu-west-1\n  service: execute-api\n' ;;
    *) echo "unknown cell $1" >&2; exit 2 ;;
    esac
}
config() {  # CELL PORT FILE
    printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\nworkers: 1\ncredentials:\n%s\nstore:\n  path: %s/%s/tokens.json\nlog:\n  level: warn\n' \
        "$2" "$UP" "$(credentials "$1")" "$D" "$1" >"$3"
}
if [[ " $CELLS " == *" dpop "* ]]; then
    python3 -u "$ROOT/Tests/servers/dpop_servers.py" --port 0 --access-ttl 3600 >"$D/as.out" 2>"$D/as.err" & pids+=($!)
    for _ in $(seq 100); do grep -q READY "$D/as.out" && break; sleep 0.1; done
    AS=$(awk '/READY/ {print $2}' "$D/as.out")
fi
export BENCH_TOKEN=test-token-123
# Example keys of the AWS documentation: the upstream checks nothing.
export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
declare -A PORT
for cell in $CELLS; do
    PORT[$cell]=$(free_port)
    config "$cell" "${PORT[$cell]}" "$D/$cell.yaml"
    "$BIN" serve --config "$D/$cell.yaml" 2>"$D/$cell.log" & pids+=($!)
done
for port in $NGX "${PORT[@]}"; do
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.1; done
done
rate() { wrk -t1 -c"$2" -d"${DURATION}s" "http://127.0.0.1:$1/small" | awk '/Requests\/sec/ {printf "%.0f", $2}'; }
printf '%-8s %10s %10s %12s\n' cell c1 c64 "c64/nginx"
nginx64=
for cell in nginx $CELLS; do
    port=${PORT[$cell]:-$NGX}
    wrk -t1 -c64 -d1s "http://127.0.0.1:$port/small" >/dev/null  # warm
    c1=$(rate "$port" 1) c64=$(rate "$port" 64)
    [[ $cell == nginx ]] && nginx64=$c64
    printf '%-8s %10s %10s %12s\n' "$cell" "$c1" "$c64" "$(awk -v a="$c64" -v b="$nginx64" 'BEGIN {printf "%.2f", a / b}')"
done
if command -v valgrind >/dev/null && command -v callgrind_control >/dev/null; then
    # valgrind cannot read the DWARF 5 the Swift toolchain writes: profile a copy without it.
    cp "$BIN" "$D/tp-cg" && strip --strip-debug "$D/tp-cg"
    for cell in $CELLS; do
        port=$(free_port)
        sed "s/^listen: .*/listen: 127.0.0.1:$port/" "$D/$cell.yaml" >"$D/cg-$cell.yaml"
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$D/cg-$cell.out" \
            "$D/tp-cg" serve --config "$D/cg-$cell.yaml" 2>"$D/cg-$cell.log" &
        cg=$!
        for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.2; done
        wrk -t1 -c16 -d2s "http://127.0.0.1:$port/small" >/dev/null
        callgrind_control -i on "$cg" >/dev/null
        requests=$(wrk -t1 -c16 -d"${DURATION}s" "http://127.0.0.1:$port/small" | awk '/requests in/ {print $1}')
        callgrind_control -i off "$cg" >/dev/null
        kill -TERM "$cg"; wait "$cg" 2>/dev/null || true
        total=$(callgrind_annotate "$D/cg-$cell.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        echo "$cell: $((total / requests)) instructions per request ($requests requests)"
    done
fi
echo "(files in $D)"
