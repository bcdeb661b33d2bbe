#!/usr/bin/env bash
# The DPoP cell (RFC 9449, README "Secretless in Kubernetes"): /small through
#   nginx     proxy_pass with a fixed `Authorization: Bearer` (nginx cannot make DPoP proofs),
#   plain     tokenproxy with a static Bearer token,
#   dpop      tokenproxy with a DPoP-bound token: a fresh ES256 proof on every request,
# all to the same nginx upstream, which verifies nothing, so the proxy's own cost shows. Prints
# req/s at c1 and c64 (wrk, DURATION seconds each) and, with valgrind installed, instructions per
# request of plain and dpop (callgrind, as bench/instructions.sh counts them).
#   bench/dpop.sh [BIN]      BIN: a release tokenproxy (default .build-release/release/tokenproxy)
# The token comes from Tests/servers/dpop_servers.py (python3 with flask and joserfc).
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
DURATION=${DURATION:-5}
[[ -x $BIN ]] || { echo "no tokenproxy binary at $BIN" >&2; exit 2; }
for tool in nginx wrk python3 curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
D=$(mktemp -d /tmp/tokenproxy-dpop-bench.XXXXXX)
mkdir -p "$D/logs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
UP=$(free_port) NGX=$(free_port) PLAIN=$(free_port) DPOP=$(free_port)
cat >"$D/nginx.conf" <<EOF
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
EOF
nginx -p "$D/" -c "$D/nginx.conf" & pids+=($!)
python3 -u "$ROOT/Tests/servers/dpop_servers.py" --port 0 --access-ttl 3600 >"$D/as.out" 2>"$D/as.err" & pids+=($!)
for _ in $(seq 100); do grep -q READY "$D/as.out" && break; sleep 0.1; done
AS=$(awk '/READY/ {print $2}' "$D/as.out")
config() {  # NAME PORT CREDENTIALS
    printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\nworkers: 1\ncredentials:\n%s\nstore:\n  path: %s/%s/tokens.json\nlog:\n  level: warn\n' \
        "$2" "$UP" "$3" "$D" "$1" >"$D/$1.yaml"
}
config plain "$PLAIN" $'  type: static\n  token_env: BENCH_TOKEN'
config dpop "$DPOP" "  type: oauth2_client_credentials
  token_url: http://127.0.0.1:$AS/oauth/token
  client_id: bench
  client_auth: none
  dpop: {}"
export BENCH_TOKEN=test-token-123
"$BIN" serve --config "$D/plain.yaml" 2>"$D/plain.log" & pids+=($!)
"$BIN" serve --config "$D/dpop.yaml" 2>"$D/dpop.log" & pids+=($!)
for port in $NGX $PLAIN $DPOP; do
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.1; done
done
rate() { wrk -t1 -c"$2" -d"${DURATION}s" "http://127.0.0.1:$1/small" | awk '/Requests\/sec/ {printf "%.0f", $2}'; }
printf '%-8s %10s %10s\n' cell c1 c64
for cell in nginx:$NGX plain:$PLAIN dpop:$DPOP; do
    wrk -t1 -c64 -d1s "http://127.0.0.1:${cell#*:}/small" >/dev/null  # warm
    printf '%-8s %10s %10s\n' "${cell%%:*}" "$(rate "${cell#*:}" 1)" "$(rate "${cell#*:}" 64)"
done
if command -v valgrind >/dev/null && command -v callgrind_control >/dev/null; then
    # valgrind cannot read the DWARF 5 the Swift toolchain writes: profile a copy without it.
    cp "$BIN" "$D/tp-cg" && strip --strip-debug "$D/tp-cg"
    for cell in plain dpop; do
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
