#!/usr/bin/env bash
# Instructions per proxied request, counted by callgrind for tokenproxy and for nginx in the same
# harness: repeatable whatever else the machine runs, so changes to the hot path can be compared on a
# busy host (req/s cannot), and the two proxies can be compared at all.
#   bench/instructions.sh [plain|tls]       needs one earlier bench/run.sh (its nginx upstream and CA)
#   TOKEN=$(head -c 1000 /dev/zero | tr '\0' a) bench/instructions.sh   the same with a 1000-byte token
#   SKIP_NGINX=1 bench/instructions.sh      tokenproxy only
# Both run one worker pinned to CPU 0 beside the upstream nginx; wrk -c16 keep-alive on CPU 1; 2 s of
# warm-up, then 8 s counted. nginx is configured as the anchor benchmark's proxy (pooled upstream
# connections, the Authorization header set, no buffering) with its master process off, so that
# callgrind sees the worker. Prints both counts and their ratio, and leaves the profiles in
# $STATE_DIR/tpb/callgrind.out and callgrind-nginx.out for callgrind_annotate. The harness is
# bench/lib/callgrind.sh.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib/callgrind.sh"
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
STATE_DIR=$(cd "${STATE_DIR:-/tmp/bench-anchors}" && pwd)
BENCH_DIR=$STATE_DIR/tpb
KIND=${1:-plain}
[[ -f $STATE_DIR/upstream.nginx.conf && -f $BENCH_DIR/$KIND.yaml ]] || { echo "run bench/run.sh once first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
TOKEN_VALUE=${TOKEN:-test-token-123}
export BENCH_TOKEN=$TOKEN_VALUE
NGINX_PORT=18096
if [[ $KIND == tls ]]; then URL=http://127.0.0.1:18094/small; else URL=http://127.0.0.1:18090/small; fi
stripped_copy "${BIN:-$ROOT/.build-release/release/tokenproxy}" "$BENCH_DIR/tpb-cg"
sed "s|^  ca_file: .*|  ca_file: $STATE_DIR/tls/ca.pem|" "$BENCH_DIR/$KIND.yaml" >"$BENCH_DIR/cg.yaml"
if [[ $KIND == tls ]]; then
    UPSTREAM="server 127.0.0.1:18443; keepalive 256;"
    PASS="proxy_pass https://origin; proxy_ssl_verify on; proxy_ssl_trusted_certificate $STATE_DIR/tls/ca.pem;
          proxy_ssl_name localhost; proxy_ssl_server_name on; proxy_ssl_session_reuse on; proxy_ssl_protocols TLSv1.2 TLSv1.3;"
else
    UPSTREAM="server 127.0.0.1:18080; keepalive 256;"
    PASS="proxy_pass http://origin;"
fi
mkdir -p "$BENCH_DIR/nginx-cg/logs" "$BENCH_DIR/nginx-cg/tmp"
cat >"$BENCH_DIR/nginx-cg/proxy.conf" <<CONF
daemon off; master_process off; worker_processes 1;
pid $BENCH_DIR/nginx-cg/nginx.pid; error_log $BENCH_DIR/nginx-cg/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off; server_tokens off; tcp_nodelay on; keepalive_timeout 300s; keepalive_requests 10000000;
    client_body_temp_path $BENCH_DIR/nginx-cg/tmp/body; proxy_temp_path $BENCH_DIR/nginx-cg/tmp/proxy;
    fastcgi_temp_path $BENCH_DIR/nginx-cg/tmp/fastcgi; uwsgi_temp_path $BENCH_DIR/nginx-cg/tmp/uwsgi;
    scgi_temp_path $BENCH_DIR/nginx-cg/tmp/scgi;
    upstream origin { $UPSTREAM keepalive_requests 10000000; keepalive_timeout 300s; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $PASS
            proxy_http_version 1.1; proxy_set_header Connection "";
            proxy_set_header Authorization "Bearer $TOKEN_VALUE";
            proxy_buffering off; proxy_buffer_size 64k; proxy_buffers 8 64k;
        }
    }
}
CONF
trap stop_bench_processes EXIT
taskset -c 0 nginx -p "$STATE_DIR/" -c "$STATE_DIR/upstream.nginx.conf" -e logs/upstream.error.log & bench_pids+=($!)

# count NAME URL OUT COMMAND...: instructions per request of COMMAND serving URL.
count() {
    local name=$1 url=$2 out=$3
    shift 3
    count_instructions "$out" "$url" "$@"
    echo "$KIND $name: $counted_requests requests, $counted_instructions instructions, $instructions_per_request per request ($out)" >&2
}
count tokenproxy "$URL" "$BENCH_DIR/callgrind.out" "$BENCH_DIR/tpb-cg" serve --config "$BENCH_DIR/cg.yaml"
tp=$instructions_per_request
if [[ -n ${SKIP_NGINX:-} ]]; then
    echo "$KIND: tokenproxy $tp instructions per request"
    exit 0
fi
count nginx "http://127.0.0.1:$NGINX_PORT/small" "$BENCH_DIR/callgrind-nginx.out" nginx -p "$BENCH_DIR/nginx-cg/" -c "$BENCH_DIR/nginx-cg/proxy.conf"
ng=$instructions_per_request
awk -v k="$KIND" -v tp="$tp" -v ng="$ng" 'BEGIN { printf "%s: tokenproxy %d, nginx %d instructions per request (ratio %.2f)\n", k, tp, ng, tp / ng }'
