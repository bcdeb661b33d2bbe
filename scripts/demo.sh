#!/usr/bin/env bash
# A self-contained tour: builds tokenproxy, starts a local echo upstream, puts tokenproxy in front
# of it with a static token, and shows what the upstream receives. Everything it starts is stopped
# when it exits. Set DEMO_TOKEN to choose the token, TOKENPROXY_BIN to use a binary built elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

token="${DEMO_TOKEN:-demo-token-$(date +%s)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tokenproxy-demo.XXXXXX")"
upstream_pid=""
proxy_pid=""

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cleanup() {
    status=$?
    if [ -n "$proxy_pid" ] && kill -0 "$proxy_pid" 2>/dev/null; then
        kill -TERM "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
    fi
    if [ -n "$upstream_pid" ] && kill -0 "$upstream_pid" 2>/dev/null; then
        kill -TERM "$upstream_pid" 2>/dev/null || true
        wait "$upstream_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to $3 seconds for a line matching the extended regex $2 in file $1 and prints it.
wait_for_line() {
    local file="$1" pattern="$2" seconds="$3" pid="$4" line=""
    local deadline=$((SECONDS + seconds))
    while [ "$SECONDS" -lt "$deadline" ]; do
        line="$(grep -m1 -E "$pattern" "$file" 2>/dev/null || true)"
        if [ -n "$line" ]; then
            printf '%s\n' "$line"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

scripts/setup.sh

if [ -n "${TOKENPROXY_BIN:-}" ]; then
    bin="$TOKENPROXY_BIN"
    say "Using $bin (TOKENPROXY_BIN)"
else
    say "Building tokenproxy (swift build)"
    swift build --product tokenproxy 2>&1 | tail -n 1
    bin="$(swift build --show-bin-path)/tokenproxy"
fi

say "Starting the echo upstream (Tests/servers/echo_upstream.py): it answers with what it received"
python3 -u Tests/servers/echo_upstream.py --port 0 >"$work/upstream.out" 2>"$work/upstream.err" &
upstream_pid=$!
ready="$(wait_for_line "$work/upstream.out" '^READY [0-9]+$' 10 "$upstream_pid")" || {
    echo "the echo upstream did not start:" >&2
    cat "$work/upstream.err" >&2
    exit 1
}
upstream_port="${ready#READY }"
echo "upstream: http://127.0.0.1:$upstream_port/api"

cat >"$work/tokenproxy.yaml" <<YAML
listen: 127.0.0.1:0
upstream: http://127.0.0.1:$upstream_port/api
credentials:
  type: static
  token_env: DEMO_TOKEN
log:
  level: info
YAML
say "Configuration ($work/tokenproxy.yaml)"
cat "$work/tokenproxy.yaml"

say "Starting tokenproxy serve"
DEMO_TOKEN="$token" "$bin" serve --config "$work/tokenproxy.yaml" 2>"$work/proxy.err" &
proxy_pid=$!
line="$(wait_for_line "$work/proxy.err" 'listening on ' 20 "$proxy_pid")" || {
    echo "tokenproxy did not report 'listening on ADDRESS'; its stderr:" >&2
    cat "$work/proxy.err" >&2
    exit 1
}
address="$(printf '%s\n' "$line" | grep -oE 'listening on [^ "]+' | head -n1)"
address="${address#listening on }"
echo "tokenproxy: http://$address  (log line: $line)"

show() {
    # Prints the status and what the upstream received: method, path and Authorization.
    python3 -c '
import json, sys
status, body = sys.argv[1], sys.stdin.read()
print("  status:", status)
try:
    echo = json.loads(body)
except ValueError:
    print("  body:", body[:200]); sys.exit(0)
if "method" not in echo:
    print("  body:", body[:200]); sys.exit(0)
print("  upstream saw:", echo["method"], echo["path"])
for name, value in echo["headers"]:
    if name.lower() in ("authorization", "host", "x-forwarded-for"):
        print("   ", name + ":", value)
if echo.get("body"):
    print("    body:", echo["body"])
' "$1"
}

say "1. GET /hello through the proxy: the upstream gets Authorization: Bearer <DEMO_TOKEN>"
echo "\$ curl http://$address/hello?lang=en"
out="$(curl -sS -w '\n%{http_code}' "http://$address/hello?lang=en")"
show "${out##*$'\n'}" <<<"${out%$'\n'*}"

say "2. The client's own Authorization header is replaced"
echo "\$ curl -H 'Authorization: Bearer something-else' http://$address/users/42"
out="$(curl -sS -w '\n%{http_code}' -H 'Authorization: Bearer something-else' "http://$address/users/42")"
show "${out##*$'\n'}" <<<"${out%$'\n'*}"

say "3. A POST body is forwarded as sent"
echo "\$ curl -d '{\"name\":\"demo\"}' -H 'Content-Type: application/json' http://$address/items"
out="$(curl -sS -w '\n%{http_code}' -H 'Content-Type: application/json' -d '{"name":"demo"}' "http://$address/items")"
show "${out##*$'\n'}" <<<"${out%$'\n'*}"

say "tokenproxy's log (stderr); the token never appears in it"
cat "$work/proxy.err"
if grep -qF "$token" "$work/proxy.err"; then
    echo "!! the token appeared in the log" >&2
    exit 1
fi

say "Stopping tokenproxy (SIGTERM) and the upstream"
kill -TERM "$proxy_pid"
status=0
wait "$proxy_pid" || status=$?
proxy_pid=""
echo "tokenproxy exited with status $status"
