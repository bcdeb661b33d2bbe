#!/bin/bash
# Exits 0 when tokenproxy's admin listener answers GET /healthz with 200, 1 otherwise.
# Used by the image's HEALTHCHECK and usable as a Kubernetes exec probe. It needs nothing but
# bash (its /dev/tcp redirection), so the runtime image carries no curl.
#
#   TOKENPROXY_HEALTH_ADDRESS  host:port of the admin listener (default 127.0.0.1:9901)
#   TOKENPROXY_HEALTH_PATH     the path to ask for (default /healthz; /readyz for readiness)
set -u

address="${TOKENPROXY_HEALTH_ADDRESS:-127.0.0.1:9901}"
path="${TOKENPROXY_HEALTH_PATH:-/healthz}"
host="${address%:*}"
port="${address##*:}"
host="${host#[}"
host="${host%]}"

if ! exec 3<>"/dev/tcp/${host}/${port}"; then
    echo "tokenproxy-healthcheck: cannot connect to ${address}" >&2
    exit 1
fi
printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$path" "$address" >&3

status_line=""
if ! IFS= read -r -t 4 status_line <&3; then
    echo "tokenproxy-healthcheck: no answer from ${address}" >&2
    exit 1
fi
exec 3<&-

case "$status_line" in
    "HTTP/1."[01]" 200 "* | "HTTP/1."[01]" 200"$'\r') exit 0 ;;
esac
echo "tokenproxy-healthcheck: ${path}: ${status_line%$'\r'}" >&2
exit 1
