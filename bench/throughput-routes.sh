#!/usr/bin/env bash
# Throughput with 40 routes (issue 20 point 8): 20 host routes and 20 path routes, every request
# hitting the last path route (/p19/small, prefix stripped, so the upstream sees /small), tokenproxy
# against nginx configured with the same 20 server names and 20 locations (the configuration of
# bench/instructions-routes.sh). The conventions of bench/run.sh and the anchor benchmark:
# one worker each, pinned to CPU 0 beside the upstream nginx (the anchor's /small answer, 100 bytes);
# wrk -t1 -c64 --latency on CPU 1; a 2 s warm-up each, then ROUNDS rounds of DURATION s, the two
# proxies alternating which goes first. Prints req/s and p99 of both per round, the medians and the
# median of the same-round ratios (tokenproxy / nginx). Not part of CI: it asserts nothing.
#
#   bench/throughput-routes.sh [PATH-TO-release-tokenproxy]
#       default binary: .build-release/release/tokenproxy (swift build -c release --scratch-path .build-release)
# Settings (environment): DURATION=10 ROUNDS=3 CONNS=64 SERVER_CPUS=0 CLIENT_CPUS=1
#   STATE_DIR=/tmp/bench-anchors (this script's files go to $STATE_DIR/routes-throughput)
#   PORT_BASE=18680 (upstream +0, nginx +1, tokenproxy +2; all must be free)
set -Eeuo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { log "bench/throughput-routes.sh: error: $*"; exit 2; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null) || die "not inside the tokenproxy git checkout"
BIN=${1:-$ROOT/.build-release/release/tokenproxy}
[[ -x $BIN ]] || die "no tokenproxy binary at $BIN (build: swift build -c release --scratch-path .build-release)"
DURATION=${DURATION:-10} ROUNDS=${ROUNDS:-3} CONNS=${CONNS:-64}
SERVER_CPUS=${SERVER_CPUS:-0} CLIENT_CPUS=${CLIENT_CPUS:-1}
STATE_DIR=${STATE_DIR:-${TMPDIR:-/tmp}/bench-anchors}
PORT_BASE=${PORT_BASE:-18680}
UP_PORT=$PORT_BASE NG_PORT=$((PORT_BASE + 1)) TP_PORT=$((PORT_BASE + 2))
for t in nginx wrk curl taskset ss python3; do command -v "$t" >/dev/null || die "missing tool: $t"; done
for p in $UP_PORT $NG_PORT $TP_PORT; do
    [[ -z $(ss -Htln "sport = :$p") ]] || die "port $p is in use (set PORT_BASE)"
done

d=$STATE_DIR/routes-throughput
rm -rf "$d" && mkdir -p "$d/logs" "$d/tmp" "$d/store" "$d/raw"
cp "$BIN" "$d/tpr-serve"   # a copy: a rebuild or a `pkill tokenproxy` elsewhere cannot touch it

# The anchor's upstream (conf/upstream.nginx.conf): the same /small answer and keep-alive settings.
cat >"$d/up.conf" <<CONF
daemon off; master_process on; worker_processes 1; pid up.pid; error_log logs/up.error.log warn;
events { worker_connections 8192; multi_accept on; }
http { access_log off; server_tokens off; client_body_temp_path tmp/up-body; proxy_temp_path tmp/up-proxy;
  fastcgi_temp_path tmp/up-fcgi; uwsgi_temp_path tmp/up-uwsgi; scgi_temp_path tmp/up-scgi;
  tcp_nodelay on; keepalive_timeout 300s; keepalive_requests 10000000; default_type text/plain;
  server { listen 127.0.0.1:$UP_PORT backlog=4096;
    location = /small { return 200 "bench-anchors /small response body: a fixed 100-byte payload, identical through every target.......\n"; }
    location / { return 404 "not found\n"; } } }
CONF

# nginx as the anchor's proxy (conf/proxy.nginx.conf's location settings), with 20 server names
# and 20 locations; tokenproxy with the same 40 routes.
proxy_settings='proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Authorization "Bearer test-token-123"; proxy_buffering off; proxy_buffer_size 64k; proxy_buffers 8 64k;'
servers="" locations="" routes=""
for i in $(seq 0 19); do
    servers+="  server { listen 127.0.0.1:$NG_PORT; server_name h$i.example.test; location / { proxy_pass http://origin; $proxy_settings } }
"
    locations+="    location /p$i/ { proxy_pass http://origin/; $proxy_settings }
"
    routes+="  - {name: h$i, match: {host: h$i.example.test}, upstream: \"http://127.0.0.1:$UP_PORT\", credentials: {type: static, token_env: BENCH_TOKEN}}
"
done
for i in $(seq 0 19); do
    routes+="  - {name: p$i, match: {path_prefix: /p$i/}, upstream: \"http://127.0.0.1:$UP_PORT\", credentials: {type: static, token_env: BENCH_TOKEN}}
"
done
cat >"$d/ng.conf" <<CONF
daemon off; master_process on; worker_processes 1; pid ng.pid; error_log logs/ng.error.log warn;
events { worker_connections 8192; multi_accept on; }
http { access_log off; server_tokens off; client_body_temp_path tmp/ng-body; proxy_temp_path tmp/ng-proxy;
  fastcgi_temp_path tmp/ng-fcgi; uwsgi_temp_path tmp/ng-uwsgi; scgi_temp_path tmp/ng-scgi;
  tcp_nodelay on; keepalive_timeout 300s; keepalive_requests 10000000;
  upstream origin { server 127.0.0.1:$UP_PORT; keepalive 256; keepalive_requests 10000000; keepalive_timeout 300s; }
$servers
  server { listen 127.0.0.1:$NG_PORT default_server backlog=4096;
$locations  } }
CONF
cat >"$d/tp.yaml" <<CONF
listen: 127.0.0.1:$TP_PORT
workers: 1
store:
  path: $d/store/tokens.json
limits:
  upstream_keepalive_timeout: 300s
log:
  level: info
routes:
$routes
CONF

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
taskset -c "$SERVER_CPUS" nginx -p "$d/" -c "$d/up.conf" -e logs/up.error.log >"$d/logs/up.out" 2>&1 & pids+=($!)
taskset -c "$SERVER_CPUS" nginx -p "$d/" -c "$d/ng.conf" -e logs/ng.error.log >"$d/logs/ng.out" 2>&1 & pids+=($!)
BENCH_TOKEN=test-token-123 taskset -c "$SERVER_CPUS" "$d/tpr-serve" serve --config "$d/tp.yaml" >"$d/logs/tp.out" 2>"$d/logs/tp.log" & pids+=($!)
url() { echo "http://127.0.0.1:$1/p19/small"; }
for port in $NG_PORT $TP_PORT; do
    ok=
    for _ in $(seq 100); do
        if [[ $(curl -s --max-time 2 "$(url "$port")") == "bench-anchors /small"* ]]; then ok=1; break; fi
        sleep 0.2
    done
    [[ -n $ok ]] || die "nothing answers /p19/small on port $port (logs in $d/logs)"
done
# Both add the token upstream: the last path route answers, not a 404.
[[ $(curl -s -o /dev/null -w '%{http_code}' "$(url $TP_PORT)") == 200 ]] || die "tokenproxy does not serve /p19/small"

run() {  # NAME PORT SECONDS RAWFILE: one wrk run; prints "rps p99_ms"
    taskset -c "$CLIENT_CPUS" wrk -t1 -c"$CONNS" -d"$3s" --timeout 5s --latency "$(url "$2")" >"$4" 2>&1 || true
    python3 - "$4" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
p99 = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: .*", text)
ms = float(p99.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)] if p99 else float("nan")
print(f"{float(rps.group(1)) if rps else float('nan'):.0f} {ms:.3f} {'errors' if errors else 'ok'}")
PY
}

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "bench/throughput-routes.sh: warm-up (2 s each)"
run nginx $NG_PORT 2 "$d/raw/warm-nginx.txt" >/dev/null
run tokenproxy $TP_PORT 2 "$d/raw/warm-tokenproxy.txt" >/dev/null
results=$d/results.tsv
printf 'round\ttarget\trps\tp99_ms\terrors\n' >"$results"
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order=(tokenproxy nginx); else order=(nginx tokenproxy); fi
    for name in "${order[@]}"; do
        port=$TP_PORT; [[ $name == nginx ]] && port=$NG_PORT
        read -r rps p99 errs < <(run "$name" "$port" "$DURATION" "$d/raw/r$r-$name.txt")
        printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$rps" "$p99" "$errs" >>"$results"
        log "  round $r $name: $rps req/s, p99 $p99 ms ($errs)"
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$started" "$load_before" "$load_after" "$DURATION" "$ROUNDS" "$CONNS" "$SERVER_CPUS" "$CLIENT_CPUS" <<'PY'
import statistics, sys
path, started, before, after, duration, rounds, conns, scpu, ccpu = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(path)][1:]
by = {}
for r, name, rps, p99, errs in rows:
    by.setdefault(name, {})[int(r)] = (float(rps), float(p99), errs)
med = lambda xs: statistics.median(xs)
ratios = [by["tokenproxy"][r][0] / by["nginx"][r][0] for r in sorted(by["nginx"])]
print(f"40 routes (20 host, 20 path), GET /p19/small, wrk -t1 -c{conns}, {rounds} rounds x {duration} s, "
      f"alternating order; servers on CPU {scpu}, wrk on CPU {ccpu}; started {started}; load average before {before}, after {after}")
for r in sorted(by["nginx"]):
    t, n = by["tokenproxy"][r], by["nginx"][r]
    print(f"  round {r}: tokenproxy {t[0]:.0f} req/s p99 {t[1]:.2f} ms ({t[2]}), nginx {n[0]:.0f} req/s p99 {n[1]:.2f} ms ({n[2]}), ratio {t[0] / n[0]:.2f}")
for name in ("tokenproxy", "nginx"):
    v = by[name].values()
    print(f"{name}: {med([x[0] for x in v]):.0f} req/s (median; min {min(x[0] for x in v):.0f}, max {max(x[0] for x in v):.0f}), "
          f"p99 {med([x[1] for x in v]):.2f} ms (median)")
print(f"tokenproxy / nginx: {med(ratios):.2f} (median of the same-round ratios {', '.join(f'{x:.2f}' for x in ratios)})")
PY
log "bench/throughput-routes.sh: raw wrk output in $d/raw, results in $results"
