#!/usr/bin/env bash
# HTTPS for clients (issue 32 point 5), side by side with nginx: /small through
#   nginx        `listen … ssl` (the same EC P-256 certificate), proxy_pass to the upstream with a
#                fixed `Authorization: Bearer` header, pooled upstream connections (as the anchor's
#                conf/proxy.nginx.conf does);
#   tokenproxy   its TLS listener (`tls: {cert_file, key_file}`) with a static Bearer token, and its
#                forward proxy (`forward_proxy:` with the CA it makes, a `host` route bench.example):
#                `CONNECT bench.example:443`, then TLS to tokenproxy's own certificate for that host;
# all to one plain-HTTP nginx upstream. Everything server-side is pinned to CPU 0 (one core each, as
# ../shared/bench-anchors does), the clients to CPU 1.
#
#   bench/tls-cells.sh [throughput] [BIN]   the cells below, REPS rounds, targets alternating
#   bench/tls-cells.sh instructions [BIN]   instructions per request (callgrind), each cell at c16
#   BIN: a release tokenproxy (default .build-release/release/tokenproxy)
#
# Cells (CELLS="listener:keepalive:1 …"): KIND:MODE:CONNECTIONS
#   listener   wrk https://… to nginx's and to tokenproxy's TLS listener
#   tunnel     bench/tunnel_load (wrk cannot use a proxy): to nginx's TLS listener straight, and
#              through tokenproxy's CONNECT tunnel; the same program both ways
#   keepalive  one TLS connection per client connection, requests in a loop
#   resumed    `Connection: close`: a TCP connection and a TLS handshake for every request, resuming
#              the session before (TLS 1.3 PSK with a new ECDHE share, no certificate): what
#              `wrk -H 'Connection: close'` does (wrk keeps the session across SSL_clear), and
#              tunnel_load -n -r
#   full       the same with a full handshake every time (certificate, ECDSA signature): tunnel_load -n,
#              for the listener cells too (straight to the TLS listener); what a new process (curl, git,
#              an SDK's first call) costs
# The check before the run counts resumed sessions in a log of nginx's (\$ssl_session_reused) for
# each client mode, and asks each server to resume one with openssl s_client.
# Settings: DURATION=10 REPS=3 WARMUP=2, TARGETS="nginx tokenproxy", NOISE_LIMIT=15 QUIET_BUDGET=20
# (before each run, wait up to QUIET_BUDGET s while other processes use more than NOISE_LIMIT % of a CPU), STATE_DIR (default a new /tmp/tokenproxy-tls-cells.*).
# TLS: TLSv1.2 and TLSv1.3 on both; clients negotiate TLSv1.3. nginx: `ssl_session_cache
# shared:SSL:10m`, `ssl_session_timeout 5m`, `ssl_session_tickets on` (its default); tokenproxy:
# OpenSSL's defaults (an internal server cache, tickets on: two per TLS 1.3 handshake).
# Prints a markdown table: req/s and p99 of both, the median of the same-round ratios
# tokenproxy / nginx, the busy % of the server and client CPUs, and "other CPU" (CPU time used by
# anything but these servers and the client, % of one CPU: more than a few % means a disturbed run).
# Not part of CI: it asserts nothing about speed.
set -Eeuo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
MODE=throughput
if [[ ${1:-} == throughput || ${1:-} == instructions ]]; then MODE=$1; shift; fi
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
DURATION=${DURATION:-10}
REPS=${REPS:-3}
WARMUP=${WARMUP:-2}
CELLS=${CELLS:-listener:keepalive:1 listener:keepalive:64 listener:resumed:64 listener:full:64 tunnel:keepalive:1 tunnel:keepalive:64 tunnel:resumed:64 tunnel:full:64}
TARGETS=${TARGETS:-nginx tokenproxy}   # TARGETS=nginx: nginx's side alone (no ratios)
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
TUNNEL_HOST=bench.example
TOKEN_VALUE=test-token-123
[[ -x $BIN ]] || { echo "no tokenproxy binary at $BIN" >&2; exit 2; }
for tool in nginx wrk curl openssl gcc python3 taskset; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }; done
if [[ $MODE == instructions ]]; then
    for tool in valgrind callgrind_control callgrind_annotate; do command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install valgrind)" >&2; exit 2; }; done
fi
D=${STATE_DIR:-$(mktemp -d /tmp/tokenproxy-tls-cells.XXXXXX)}
mkdir -p "$D"/{logs,raw,tls,tmp,tp,fp}
D=$(cd "$D" && pwd)
log() { printf '%s\n' "$*" >&2; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ok() {  # URL [curl options…]: until it answers 2xx (20 s)
    local url=$1; shift
    for _ in $(seq 200); do curl -sf -o /dev/null "$@" "$url" && return 0; sleep 0.1; done
    log "tls-cells.sh: $url did not answer; logs in $D/logs"
    exit 1
}

# ---------------------------------------------------------------- certificate, client, binary
# A throwaway CA and an EC P-256 certificate for localhost and 127.0.0.1, which both listeners
# serve; the key is 0600 (tokenproxy refuses a key that group or others can read).
(
    cd "$D/tls" && umask 077
    cat >openssl.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = tls-cells throwaway CA
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
EOF
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key
    openssl req -new -x509 -config openssl.cnf -extensions ca_ext -key ca.key -sha256 -days 30 -out ca.pem
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key
    openssl req -new -config openssl.cnf -subj /CN=localhost -key server.key -out server.csr
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
        -sha256 -days 30 -extfile openssl.cnf -extensions server_ext -out server.pem
    rm -f ca.key server.csr
) >"$D/logs/openssl.log" 2>&1 || { log "tls-cells.sh: openssl failed: $D/logs/openssl.log"; exit 1; }
chmod 755 "$D" "$D/tls" && chmod 644 "$D/tls/ca.pem" "$D/tls/server.pem"
gcc -O2 -Wall -o "$D/tunnel_load" "$HERE/tunnel_load.c" -lssl -lcrypto -lpthread
# The copy that runs: a rebuild elsewhere cannot replace it mid-run.
cp "$BIN" "$D/tp-serve"
BIN=$D/tp-serve

# ---------------------------------------------------------------- servers
UP=$(free_port) NGX=$(free_port) NGX_LOG=$(free_port) TPS=$(free_port) TPF=$(free_port)
BODY='tls-cells /small response body: a fixed 100-byte payload, the same through every target............'
nginx_common="daemon off; worker_processes 1; error_log $D/logs/ERR.log warn;
events { worker_connections 8192; multi_accept on; }"
nginx_http="access_log off; server_tokens off; tcp_nodelay on; keepalive_timeout 300s; keepalive_requests 10000000;
    client_body_temp_path $D/tmp; proxy_temp_path $D/tmp; fastcgi_temp_path $D/tmp; uwsgi_temp_path $D/tmp; scgi_temp_path $D/tmp;"
cat >"$D/upstream.conf" <<NGINX
${nginx_common//ERR/upstream} pid $D/upstream.pid;
http { $nginx_http
  server { listen 127.0.0.1:$UP backlog=4096;
    location = /small { return 200 "$BODY\n"; }
    location = /auth { return 200 "\$http_authorization\n"; } } }
NGINX
# PROXY_SERVERS: nginx's TLS listener; a second one with an access log of \$ssl_session_reused serves
# only the check that the clients make full handshakes.
nginx_tls="ssl_certificate $D/tls/server.pem; ssl_certificate_key $D/tls/server.key; ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m; ssl_session_timeout 5m; ssl_session_tickets on;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\";
      proxy_set_header Authorization \"Bearer $TOKEN_VALUE\";
      proxy_buffering off; proxy_buffer_size 64k; proxy_buffers 8 64k; }"
proxy_conf() {  # MASTER(on|off) FILE
    cat >"$2" <<NGINX
${nginx_common//ERR/proxy} master_process $1; pid $D/proxy-$1.pid;
http { $nginx_http
  log_format reused "\$ssl_protocol \$ssl_session_reused";
  upstream origin { server 127.0.0.1:$UP; keepalive 256; keepalive_requests 10000000; keepalive_timeout 300s; }
  server { listen 127.0.0.1:$NGX ssl backlog=4096; $nginx_tls }
  server { listen 127.0.0.1:$NGX_LOG ssl; access_log $D/logs/reused.log reused; $nginx_tls } }
NGINX
}
proxy_conf on "$D/proxy.conf"
proxy_conf off "$D/proxy-cg.conf"
tp_config() {  # FILE: the TLS listener
    cat >"$1" <<EOF
listen: 127.0.0.1:$TPS
tls:
  cert_file: $D/tls/server.pem
  key_file: $D/tls/server.key
upstream: http://127.0.0.1:$UP
workers: 1
credentials:
  type: static
  token_env: BENCH_TOKEN
store:
  path: $D/tp/tokens.json
log:
  level: warn
EOF
}
fp_config() {  # FILE: the forward proxy; it makes its CA in the folder of store.path
    cat >"$1" <<EOF
listen: 127.0.0.1:$TPF
workers: 1
store:
  path: $D/fp/tokens.json
forward_proxy:
  other_hosts: refuse
routes:
  - name: bench
    match:
      host: $TUNNEL_HOST
    upstream: http://127.0.0.1:$UP
    credentials:
      type: static
      token_env: BENCH_TOKEN
log:
  level: warn
EOF
}
tp_config "$D/tp.yaml"
fp_config "$D/fp.yaml"
export BENCH_TOKEN=$TOKEN_VALUE
# Servers start as `"${ON_SERVER[@]}" cmd … &` (taskset execs, so $! is the server itself).
ON_SERVER=(taskset -c "$SERVER_CPU")
on_client() { taskset -c "$CLIENT_CPU" "$@"; }
"${ON_SERVER[@]}" nginx -p "$D/" -c "$D/upstream.conf" -e "$D/logs/upstream.log" & pids+=($!)
UP_PID=$!
wait_ok "http://127.0.0.1:$UP/small"
has_tokenproxy() { [[ " $TARGETS " == *" tokenproxy "* ]]; }
TPS_PID= TPF_PID=
if has_tokenproxy; then
"$BIN" check --config "$D/tp.yaml" >"$D/logs/tp-check.log" 2>&1 || { log "tls-cells.sh: tokenproxy check failed: $D/logs/tp-check.log"; exit 1; }
"$BIN" check --config "$D/fp.yaml" >"$D/logs/fp-check.log" 2>&1 || { log "tls-cells.sh: tokenproxy check failed: $D/logs/fp-check.log"; exit 1; }
"$BIN" ca --config "$D/fp.yaml" >"$D/fp-ca.pem" 2>"$D/logs/fp-ca.log" || { log "tls-cells.sh: tokenproxy ca failed: $D/logs/fp-ca.log"; exit 1; }
fi
VERSIONS="$(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -1 | awk '{print "wrk", $2}'); $(openssl version | awk '{print "OpenSSL", $2}'); tokenproxy $("$BIN" --version 2>&1 | head -1 | awk '{print $2}')"

# tunnel_load's arguments for TARGET (nginx|tokenproxy)
tunnel_args() {
    if [[ $1 == nginx ]]; then echo "-a $D/tls/ca.pem -s localhost 127.0.0.1:$NGX"
    else echo "-a $D/fp-ca.pem -C $TUNNEL_HOST:443 127.0.0.1:$TPF"; fi
}
listener_url() { if [[ $1 == nginx ]]; then echo "https://127.0.0.1:$NGX/small"; else echo "https://127.0.0.1:$TPS/small"; fi; }

start_servers() {  # the nginx proxy and both tokenproxy instances, normally (not under callgrind)
    "${ON_SERVER[@]}" nginx -p "$D/" -c "$D/proxy.conf" -e "$D/logs/proxy.log" & pids+=($!)
    NGX_PID=$!
    wait_ok "https://127.0.0.1:$NGX/small" --cacert "$D/tls/ca.pem"
    has_tokenproxy || return 0
    "${ON_SERVER[@]}" "$BIN" serve --config "$D/tp.yaml" 2>"$D/logs/tp.log" & pids+=($!)
    TPS_PID=$!
    "${ON_SERVER[@]}" "$BIN" serve --config "$D/fp.yaml" 2>"$D/logs/fp.log" & pids+=($!)
    TPF_PID=$!
    wait_ok "https://127.0.0.1:$TPS/small" --cacert "$D/tls/ca.pem"
    wait_ok "https://$TUNNEL_HOST/small" --cacert "$D/fp-ca.pem" -x "http://127.0.0.1:$TPF"
}

# ---------------------------------------------------------------- checks
check_all() {
    local failed=0 what got
    local checked=(nginx)
    if has_tokenproxy; then checked+=(listener tunnel); fi
    for what in "${checked[@]}"; do
        local args=()
        case $what in
        nginx) args=(--cacert "$D/tls/ca.pem" "https://127.0.0.1:$NGX") ;;
        listener) args=(--cacert "$D/tls/ca.pem" "https://127.0.0.1:$TPS") ;;
        tunnel) args=(--cacert "$D/fp-ca.pem" -x "http://127.0.0.1:$TPF" "https://$TUNNEL_HOST") ;;
        esac
        local base=${args[-1]}
        unset 'args[-1]'
        got="$(curl -sS --max-time 5 "${args[@]}" "$base/auth") | $(curl -sS --max-time 5 -o /dev/null -w '%{http_code} %{size_download}' "${args[@]}" "$base/small")"
        local tls
        tls=$(curl -sv --max-time 5 -o /dev/null "${args[@]}" "$base/small" 2>&1 | sed -n 's/^\* SSL connection using //p' | head -1)
        if [[ $got == "Bearer $TOKEN_VALUE | 200 100" ]]; then
            log "  $what: upstream saw the Bearer token, /small 200 (100 bytes); client TLS: $tls"
        else
            log "  $what: FAIL: '$got' (want 'Bearer $TOKEN_VALUE | 200 100')"
            failed=1
        fi
    done
    # What each client mode does: resumed sessions seen by nginx (a log of \$ssl_session_reused).
    local mode label
    for mode in wrk-close resumed full; do
        : >"$D/logs/reused.log"
        case $mode in
        wrk-close) label="wrk -H 'Connection: close'"; on_client wrk -t1 -c4 -d1s -H 'Connection: close' "https://127.0.0.1:$NGX_LOG/small" >/dev/null ;;
        resumed) label="tunnel_load -n -r"; on_client "$D/tunnel_load" -n -r -c4 -d1 -a "$D/tls/ca.pem" -s localhost "127.0.0.1:$NGX_LOG" >/dev/null ;;
        full) label="tunnel_load -n"; on_client "$D/tunnel_load" -n -c4 -d1 -a "$D/tls/ca.pem" -s localhost "127.0.0.1:$NGX_LOG" >/dev/null ;;
        esac
        sleep 0.5
        log "  $label: $(awk '{n++} $2 == "r" {r++} END {printf "%d of %d handshakes resumed (%s)", r, n, $1}' "$D/logs/reused.log")"
        case $mode in
        full) if grep -q ' r$' "$D/logs/reused.log"; then log "  FAIL: a full-handshake client resumed"; failed=1; fi ;;
        *) if ! grep -q ' r$' "$D/logs/reused.log"; then log "  FAIL: no session was resumed"; failed=1; fi ;;
        esac
    done
    # Whether each server resumes a session (openssl s_client, TLS 1.3 ticket).
    local server
    for server in nginx listener tunnel; do
        local s_args=()
        case $server in
        nginx) s_args=(-connect "127.0.0.1:$NGX" -servername localhost -CAfile "$D/tls/ca.pem") ;;
        listener) has_tokenproxy || continue; s_args=(-connect "127.0.0.1:$TPS" -servername localhost -CAfile "$D/tls/ca.pem") ;;
        tunnel) has_tokenproxy || continue; s_args=(-proxy "127.0.0.1:$TPF" -connect "$TUNNEL_HOST:443" -servername "$TUNNEL_HOST" -CAfile "$D/fp-ca.pem") ;;
        esac
        rm -f "$D/session.pem"
        # The input stays open a moment: a server may send its tickets only with its first answer.
        local request='GET /small HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' again
        { printf "$request"; sleep 1; } | timeout 10 openssl s_client "${s_args[@]}" -sess_out "$D/session.pem" >/dev/null 2>&1 || true
        again=$({ printf "$request"; sleep 1; } | timeout 10 openssl s_client "${s_args[@]}" -sess_in "$D/session.pem" 2>/dev/null | grep -E '^(Reused|New),' | head -1 || true)
        log "  $server resumes a session (openssl s_client -sess_in): ${again:-no answer}"
    done
    return "$failed"
}

# ---------------------------------------------------------------- one measured run
CLK_TCK=$(getconf CLK_TCK)
tree_ticks() {  # PIDS…: utime+stime of these processes and their children
    local total=0 p kid t
    for p in "$@"; do
        for kid in "$p" $(pgrep -P "$p" 2>/dev/null || true); do
            t=$(awk '{s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13]}' "/proc/$kid/stat" 2>/dev/null || echo 0)
            total=$((total + t))
        done
    done
    echo "$total"
}
children_ticks() { awk -v hz="$CLK_TCK" 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f\n", t * hz }' "$1"; }
host_ticks() { awk '/^cpu / {print $2 + $3 + $4}' /proc/stat; }
cpu_busy() {  # BEFORE AFTER cpuN: busy % of that CPU
    awk -v c="$3" 'FNR == NR { if ($1 == c) { for (i = 2; i <= 9; i++) t0 += $i; i0 = $5 + $6 } next }
        $1 == c { for (i = 2; i <= 9; i++) t1 += $i; i1 = $5 + $6 }
        END { d = t1 - t0; printf "%.0f", (d > 0 ? 100 * (d - (i1 - i0)) / d : 0) }' "$1" "$2"
}
client_command() {  # KIND MODE CONNS TARGET SECONDS: sets CMD, the client's command line
    local kind=$1 mode=$2 conns=$3 target=$4 seconds=$5 args
    if [[ $kind == listener && $mode != full ]]; then
        CMD=(wrk -t1 -c"$conns" -d"${seconds}s" --timeout 5s --latency)
        if [[ $mode == resumed ]]; then CMD+=(-H 'Connection: close'); fi
        CMD+=("$(listener_url "$target")")
        return
    fi
    CMD=("$D/tunnel_load" -c "$conns" -d "$seconds")
    case $mode in
    keepalive) ;;
    resumed) CMD+=(-n -r) ;;
    full) CMD+=(-n) ;;
    *) log "tls-cells.sh: unknown mode $mode"; exit 2 ;;
    esac
    if [[ $kind == tunnel ]]; then read -ra args <<<"$(tunnel_args "$target")"
    else args=(-a "$D/tls/ca.pem" -s localhost "127.0.0.1:$([[ $target == nginx ]] && echo "$NGX" || echo "$TPS")"); fi
    CMD+=("${args[@]}")
}
ROWS=$D/results.tsv
printf 'round\tcell\ttarget\trps\tp50_ms\tp99_ms\terrors\tsrv_busy\tcli_busy\tother_cpu\n' >"$ROWS"
# Shared machines: before each run, wait (at most QUIET_BUDGET s) while other processes use more than
# NOISE_LIMIT % of one CPU; the run's own "other CPU" column says what it met.
NOISE_LIMIT=${NOISE_LIMIT:-15} QUIET_BUDGET=${QUIET_BUDGET:-20}
other_now() {  # % of one CPU used over 0.5 s by anything but our servers (idle now)
    local o0 o1 h0 h1
    o0=$(tree_ticks "$UP_PID" "$NGX_PID" $TPS_PID $TPF_PID) h0=$(host_ticks)
    sleep 0.5
    o1=$(tree_ticks "$UP_PID" "$NGX_PID" $TPS_PID $TPF_PID) h1=$(host_ticks)
    echo $((((h1 - h0) - (o1 - o0)) * 200 / CLK_TCK))
}
wait_quiet() {
    local deadline=$((SECONDS + QUIET_BUDGET))
    while (($(other_now) > NOISE_LIMIT && SECONDS < deadline)); do :; done
}
measure() {  # ROUND CELL TARGET
    local round=$1 cell=$2 target=$3 kind mode conns raw cmd
    IFS=: read -r kind mode conns <<<"$cell"
    raw="$D/raw/r$round-${cell//:/-}-$target.txt"
    client_command "$kind" "$mode" "$conns" "$target" "$DURATION"
    wait_quiet
    grep '^cpu' /proc/stat >"$D/cpu.before"
    local ours0 ours1 h0 h1 t0 t1
    ours0=$(tree_ticks "$UP_PID" "$NGX_PID" $TPS_PID $TPF_PID)
    times >"$D/times.before"
    h0=$(host_ticks) t0=$(date +%s%N)
    on_client "${CMD[@]}" >"$raw" 2>&1 || echo "client exited with status $?" >>"$raw"
    h1=$(host_ticks) t1=$(date +%s%N)
    times >"$D/times.after"
    ours1=$(tree_ticks "$UP_PID" "$NGX_PID" $TPS_PID $TPF_PID)
    grep '^cpu' /proc/stat >"$D/cpu.after"
    local kids=$(($(children_ticks "$D/times.after") - $(children_ticks "$D/times.before")))
    local other=$(((h1 - h0) - (ours1 - ours0) - kids))
    ((other > 0)) || other=0
    other=$((other * 100 * 1000000000 / CLK_TCK / (t1 - t0)))
    python3 - "$raw" "$round" "$cell" "$target" "$(cpu_busy "$D/cpu.before" "$D/cpu.after" "cpu$SERVER_CPU")" \
        "$(cpu_busy "$D/cpu.before" "$D/cpu.after" "cpu$CLIENT_CPU")" "$other" >>"$ROWS" <<'PY'
import re, sys
raw, rest = sys.argv[1], sys.argv[2:]
text = open(raw).read()
def ms(value):  # wrk's "123.45us", "1.2ms", "1.01s"
    m = re.match(r"([\d.]+)(us|ms|s)$", value)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
m = re.search(r"^RESULT (.*)$", text, re.M)
if m:  # tunnel_load
    f = dict(kv.split("=") for kv in m.group(1).split())
    rps, p50, p99 = float(f["rps"]), float(f["p50_us"]) / 1e3, float(f["p99_us"]) / 1e3
    errors = int(f["errors"]) + int(f["non200"])
else:  # wrk
    r = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    rps = float(r.group(1)) if r else 0.0
    p = {q: ms(v) for q, v in re.findall(r"^\s+(50|99)%\s+(\S+)", text, re.M)}
    p50, p99 = p.get("50", 0.0), p.get("99", 0.0)
    s = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    n = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = (sum(map(int, s.groups())) if s else 0) + (int(n.group(1)) if n else 0)
    if not r:
        errors += 1
round_, cell, target, srv, cli, other = rest
print(f"{round_}\t{cell}\t{target}\t{rps:.1f}\t{p50:.3f}\t{p99:.3f}\t{errors}\t{srv}\t{cli}\t{other}")
PY
    tail -n 1 "$ROWS" | awk -F'\t' '{printf "  round %s %-22s %-10s %9.0f req/s  p99 %7.2f ms  errors %s  CPU srv/cli %s/%s%%  other %s%%\n", $1, $2, $3, $4, $6, $7, $8, $9, $10}' >&2
}

report() {
    python3 - "$ROWS" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
cells = []
for r in rows:
    if r[1] not in cells:
        cells.append(r[1])
def fmt_ms(v):
    return f"{v * 1000:.0f} µs" if v < 1 else f"{v:.2f} ms"
print("| cell | nginx req/s | tokenproxy req/s | tokenproxy / nginx (median of rounds) | min–max | nginx p99 | tokenproxy p99 | CPU srv/cli nginx, tokenproxy | other CPU max | errors |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for cell in cells:
    by = {t: [r for r in rows if r[1] == cell and r[2] == t] for t in ("nginx", "tokenproxy")}
    if not by["tokenproxy"]:  # TARGETS=nginx
        by["tokenproxy"] = [[r[0], cell, "tokenproxy", "nan", "nan", "nan", "0", "0", "0", "0"] for r in by["nginx"]]
    med = {t: statistics.median(float(r[3]) for r in by[t]) for t in by}
    p99 = {t: statistics.median(float(r[5]) for r in by[t]) for t in by}
    busy = {t: f"{statistics.median(int(r[7]) for r in by[t]):.0f}/{statistics.median(int(r[8]) for r in by[t]):.0f}" for t in by}
    ratios = []
    for rn in sorted({r[0] for r in by["nginx"]}):
        a = [float(r[3]) for r in by["nginx"] if r[0] == rn]
        b = [float(r[3]) for r in by["tokenproxy"] if r[0] == rn]
        if a and b and a[0] > 0:
            ratios.append(b[0] / a[0])
    other = max(int(r[9]) for r in by["nginx"] + by["tokenproxy"])
    errors = sum(int(r[6]) for r in by["nginx"] + by["tokenproxy"])
    kind, mode, conns = cell.split(":")
    name = f"{kind} {dict(keepalive='keep-alive', resumed='new connection, resumed', full='new connection, full handshake')[mode]} c{conns}"
    print(f"| {name} | {med['nginx']:,.0f} | {med['tokenproxy']:,.0f} | **{statistics.median(ratios):.2f}** | "
          f"{min(ratios):.2f}–{max(ratios):.2f} | {fmt_ms(p99['nginx'])} | {fmt_ms(p99['tokenproxy'])} | "
          f"{busy['nginx']}, {busy['tokenproxy']} % | {other} % | {errors} |")
PY
}

# ---------------------------------------------------------------- instructions (callgrind)
# Like bench/instructions.sh: the server under callgrind pinned to CPU 0 (nginx with its master
# process off, so that callgrind sees the worker; tokenproxy a copy without DWARF 5, which valgrind
# cannot read), the client on CPU 1 at c16: 2 s warm-up, then 8 s counted.
count_instructions() {  # CELL TARGET → instructions per request on stdout
    local kind mode conns cell=$1 target=$2 out pid requests total
    IFS=: read -r kind mode conns <<<"$cell"
    out="$D/callgrind-${cell//:/-}-$target.out"
    if [[ $target == nginx ]]; then
        BENCH_TOKEN=$TOKEN_VALUE "${ON_SERVER[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
            nginx -p "$D/" -c "$D/proxy-cg.conf" -e "$D/logs/proxy-cg.log" 2>"$D/logs/cg-$target.log" &
    elif [[ $kind == listener ]]; then
        BENCH_TOKEN=$TOKEN_VALUE "${ON_SERVER[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
            "$D/tp-cg" serve --config "$D/tp.yaml" 2>"$D/logs/cg-$target.log" &
    else
        BENCH_TOKEN=$TOKEN_VALUE "${ON_SERVER[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
            "$D/tp-cg" serve --config "$D/fp.yaml" 2>"$D/logs/cg-$target.log" &
    fi
    pid=$!
    pids+=("$pid")
    if [[ $target == nginx ]]; then wait_ok "https://127.0.0.1:$NGX/small" --cacert "$D/tls/ca.pem"
    elif [[ $kind == listener ]]; then wait_ok "https://127.0.0.1:$TPS/small" --cacert "$D/tls/ca.pem"
    else wait_ok "https://$TUNNEL_HOST/small" --cacert "$D/fp-ca.pem" -x "http://127.0.0.1:$TPF"; fi
    client_command "$kind" "$mode" 16 "$target" 2
    on_client "${CMD[@]}" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null 2>&1
    client_command "$kind" "$mode" 16 "$target" 8
    local text
    text=$(on_client "${CMD[@]}" 2>&1)
    callgrind_control -i off "$pid" >/dev/null 2>&1
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1} /^RESULT/ {for (i = 2; i <= NF; i++) if ($i ~ /^requests=/) {sub("requests=", "", $i); print $i}}' <<<"$text")
    total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    log "  $cell $target: $requests requests, $total instructions ($out)"
    echo $((total / requests))
}

# ---------------------------------------------------------------- run
log "tls-cells.sh: state in $D; servers on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; $VERSIONS"
if [[ $MODE == instructions ]]; then
    cp "$BIN" "$D/tp-cg" && strip --strip-debug "$D/tp-cg"
    printf '| cell (c16) | nginx | tokenproxy | ratio |\n|---|--:|--:|--:|\n' >"$D/instructions.md"
    for cell in ${ICELLS:-listener:keepalive listener:resumed listener:full tunnel:keepalive tunnel:resumed tunnel:full}; do
        ng=$(count_instructions "$cell:16" nginx)
        tp=$(count_instructions "$cell:16" tokenproxy)
        awk -v c="$cell" -v a="$ng" -v b="$tp" 'BEGIN {printf "| %s | %d | %d | %.2f |\n", c, a, b, b / a}' >>"$D/instructions.md"
    done
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    cat "$D/instructions.md"
    echo "(profiles in $D: callgrind_annotate $D/callgrind-listener-full-16-tokenproxy.out)"
    exit 0
fi
start_servers
log "tls-cells.sh: checks"
check_all || { log "tls-cells.sh: a check failed; not measuring"; exit 1; }
log "tls-cells.sh: warm-up ($WARMUP s per target and kind)"
for target in $TARGETS; do
    on_client wrk -t1 -c64 -d"${WARMUP}s" "$(listener_url "$target")" >/dev/null 2>&1 || true
    read -ra cmd <<<"$(tunnel_args "$target")"
    on_client "$D/tunnel_load" -c 64 -d "$WARMUP" "${cmd[@]}" >/dev/null 2>&1 || true
done
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%FT%TZ)
for ((round = 1; round <= REPS; round++)); do
    for cell in $CELLS; do
        # The order alternates round by round, so that neither target always runs first.
        read -ra order <<<"$TARGETS"
        if ((round % 2 == 0)); then order=($(printf '%s\n' "${order[@]}" | tac)); fi
        for target in "${order[@]}"; do measure "$round" "$cell" "$target"; done
    done
done
echo "run started $START, $REPS rounds x $DURATION s per cell and target, alternating; load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$VERSIONS"
echo
report
echo
echo "(rows in $ROWS, raw client output in $D/raw)"
