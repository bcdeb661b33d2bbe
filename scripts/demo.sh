#!/usr/bin/env bash
# The self-contained demo: a local OAuth2 authorization server (Authlib) that issues 20-second JWT
# access tokens and rotates refresh tokens, a protected API that checks every token, and tokenproxy
# in front of the API. It logs in once with `tokenproxy login`, serves, and sends a request every
# few seconds for about a minute, so that refreshes happen between successful requests; the
# proxy's refresh log lines are shown as they come. Everything it starts is stopped when it exits.
#
# DEMO_SECONDS (default 60) sets how long requests are sent; TOKENPROXY_BIN uses a binary built elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${DEMO_SECONDS:-60}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tokenproxy-demo.XXXXXX")"
pids=()

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cleanup() {
    status=$?
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to $3 seconds for a line matching the extended regex $2 in file $1 (written by process $4).
wait_for_line() {
    local file="$1" pattern="$2" seconds="$3" pid="$4" line=""
    local deadline=$((SECONDS + seconds))
    while [ "$SECONDS" -lt "$deadline" ]; do
        line="$(grep -a -m1 -E "$pattern" "$file" 2>/dev/null || true)"
        if [ -n "$line" ]; then
            printf '%s\n' "$line"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Starts Tests/servers/$1.py with the remaining arguments; sets `port`.
start_server() {
    local name="$1"
    shift
    python3 "Tests/servers/$name.py" --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
    local line
    line="$(wait_for_line "$work/$name.out" '^READY [0-9]+' 30 "$!")" || {
        cat "$work/$name.err" >&2
        echo "demo: $name did not start" >&2
        exit 1
    }
    port="${line#READY }"
}

scripts/setup.sh

if [ -n "${TOKENPROXY_BIN:-}" ]; then
    bin="$TOKENPROXY_BIN"
else
    say "Building tokenproxy (swift build)"
    swift build --product tokenproxy 2>&1 | tail -n 1
    bin="$(swift build --show-bin-path)/tokenproxy"
fi

jwt_key="demo-signing-key-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
client_secret="demo-client-secret-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"

say "Starting a local OAuth2 authorization server: 20 s access tokens, rotating refresh tokens"
start_server oauth_server --client "demo-app:$client_secret" --user alice:wonderland --access-ttl 20 --jwt --jwt-key "$jwt_key"
idp_port="$port"
echo "    token endpoint http://127.0.0.1:$idp_port/oauth/token"

say "Starting the protected API: it answers 401 to any missing, forged or expired token"
start_server protected_api --jwt-key "$jwt_key"
api_port="$port"
echo "    without a token: $(curl -s -o /dev/null -w 'HTTP %{http_code}' "http://127.0.0.1:$api_port/orders")"

cat >"$work/tokenproxy.yaml" <<EOF
listen: 127.0.0.1:0
upstream: http://127.0.0.1:$api_port/
admin:
  listen: 127.0.0.1:0
credentials:
  type: oauth2_refresh
  token_url: http://127.0.0.1:$idp_port/oauth/token
  client_id: demo-app
  client_secret_env: DEMO_CLIENT_SECRET
  login: password
  refresh_margin: 5s
store:
  path: ./state/tokens.json
log:
  access_log: true
EOF
export DEMO_CLIENT_SECRET="$client_secret"
say "The configuration ($work/tokenproxy.yaml)"
sed 's/^/    /' "$work/tokenproxy.yaml"

say "tokenproxy login --username alice --password-stdin"
printf 'wonderland\n' | "$bin" login --config "$work/tokenproxy.yaml" --username alice --password-stdin
"$bin" status --config "$work/tokenproxy.yaml" | sed 's/^/    /'

say "tokenproxy serve"
"$bin" serve --config "$work/tokenproxy.yaml" 2>"$work/proxy.err" &
proxy_pid=$!
pids+=("$proxy_pid")
line="$(wait_for_line "$work/proxy.err" 'info listening on ' 30 "$proxy_pid")" || {
    cat "$work/proxy.err" >&2
    exit 1
}
proxy_addr="${line##* }"
admin_line="$(wait_for_line "$work/proxy.err" 'admin listening on ' 10 "$proxy_pid")"
admin_addr="${admin_line##* }"
echo "    $line"

say "Sending a request every 4 s for ${seconds} s; the access token lives 20 s, so refreshes happen in between"
shown=0
deadline=$((SECONDS + seconds))
while [ "$SECONDS" -lt "$deadline" ]; do
    # The proxy's log lines about tokens since the last round (the access log is left out).
    total="$(grep -a -c '' "$work/proxy.err" || true)"
    if [ "$total" -gt "$shown" ]; then
        tail -n +"$((shown + 1))" "$work/proxy.err" | head -n "$((total - shown))" | grep -a -iE 'token|refresh' | sed 's/^/    proxy: /' || true
        shown="$total"
    fi
    status="$(curl -s -o "$work/answer" -w '%{http_code}' "http://$proxy_addr/orders/42")"
    sub="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sub","?"))' "$work/answer" 2>/dev/null || echo '?')"
    printf '    %s  client: GET /orders/42 -> HTTP %s (the API saw the token of %s)\n' "$(date +%H:%M:%S)" "$status" "$sub"
    sleep 4
done

say "What the identity provider and the API counted"
curl -s "http://127.0.0.1:$idp_port/test/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
calls = s.get("calls", {})
print("    identity provider: password logins %s, refreshes %s" % (
    calls.get("password", {}).get("ok", 0), calls.get("refresh_token", {}).get("ok", 0)))'
curl -s "http://127.0.0.1:$api_port/test/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("    protected API: %s requests (one of them the token-less probe), %s accepted, expired tokens seen: %s" % (
    s.get("requests"), s.get("ok"), s.get("expired_tokens_seen")))'
curl -s "http://$admin_addr/metrics" | grep -E '^tokenproxy_(refreshes_total|token_expiry_seconds)' | sed 's/^/    metrics: /'

say "tokenproxy status"
"$bin" status --config "$work/tokenproxy.yaml" | sed 's/^/    /'

say "Stopping (SIGTERM drains and exits 0)"
kill -TERM "$proxy_pid"
wait "$proxy_pid" && echo "    tokenproxy exited 0"
