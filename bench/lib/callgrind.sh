# shellcheck shell=bash
# Sourced by the instruction benches (bench/*instructions*.sh): the harness of
# ../shared/bench-anchors/instructions-vs-nginx.sh in one place. The proxy under test runs as one
# worker under callgrind pinned to CPU 0 beside an nginx upstream; wrk keep-alive on CPU 1 warms it
# for 2 s, then 8 s are counted. Counts are repeatable whatever else the machine does.
#   source "$HERE/lib/callgrind.sh"; trap stop_bench_processes EXIT

# The processes a bench started, stopped when it exits.
bench_pids=()
stop_bench_processes() {
    local pid
    for pid in "${bench_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}

# upstream_config DIR PORT [LOCATIONS]: writes DIR/up.conf, an nginx answering /small with the
# anchor's 36 bytes (and LOCATIONS, more location blocks) on 127.0.0.1:PORT.
upstream_config() {
    local dir=$1 port=$2 locations=${3:-}
    mkdir -p "$dir/logs"
    cat >"$dir/up.conf" <<CONF
worker_processes 1; daemon off; pid $dir/up.pid; error_log $dir/logs/e.log;
events {}
http { access_log off;
server { listen 127.0.0.1:$port; keepalive_requests 1000000;
 location /small { return 200 "hello world, this is a small answer\n"; } $locations } }
CONF
}

# start_upstream DIR PORT [LOCATIONS]: that nginx, started on CPU 0.
start_upstream() {
    upstream_config "$@"
    taskset -c 0 nginx -p "$1" -c "$1/up.conf" &
    bench_pids+=($!)
}

# proxy_config FILE PORT UPSTREAM_PORT STORE_DIR [EXTRA]: a one-worker static-Bearer proxy
# (token from $BENCH_TOKEN) on 127.0.0.1:PORT, EXTRA its only difference from the others.
proxy_config() {
    printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\nworkers: 1\ncredentials: {type: static, token_env: BENCH_TOKEN}\nstore: {path: %s/tokens.json}\n%s\n' \
        "$2" "$3" "$4" "${5:-}" >"$1"
}

# count_instructions OUT URL COMMAND...: runs COMMAND under callgrind (profile in OUT, valgrind's
# messages in OUT with .vg for .out), waits until URL answers, warms it, counts the instructions of
# the timed wrk run and sets counted_requests, counted_instructions and instructions_per_request.
# Knobs: CG_CONNECTIONS (wrk -c, default 16); CG_HEADER (a header every request sends);
# CG_CHECK (a function given URL once the proxy answers; its failure stops the bench);
# CG_SETTLE_BEFORE / CG_SETTLE_AFTER (seconds to wait before counting starts and before it stops,
# for work done after the responses, such as an exporter's).
count_instructions() {
    local out=$1 url=$2
    shift 2
    local connections=${CG_CONNECTIONS:-16} header=()
    [[ -z ${CG_HEADER:-} ]] || header=(-H "$CG_HEADER")
    taskset -c 0 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$@" 2>"${out%.out}.vg" &
    local pid=$!
    bench_pids+=("$pid")
    for _ in $(seq 100); do curl -sf -o /dev/null "${header[@]}" "$url" && break; sleep 0.3; done
    if [[ -n ${CG_CHECK:-} ]] && ! "$CG_CHECK" "$url"; then
        kill "$pid"
        exit 1
    fi
    taskset -c 1 wrk -t1 -c"$connections" -d2s "${header[@]}" "$url" >/dev/null # warm: connections made, caches filled
    sleep "${CG_SETTLE_BEFORE:-0}"
    callgrind_control -i on "$pid" >/dev/null 2>&1
    counted_requests=$(taskset -c 1 wrk -t1 -c"$connections" -d8s "${header[@]}" "$url" | awk '/requests in/ {print $1}')
    sleep "${CG_SETTLE_AFTER:-0}"
    callgrind_control -i off "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    counted_instructions=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    instructions_per_request=$((counted_instructions / counted_requests))
}

# stripped_copy BIN DEST: valgrind cannot read the DWARF 5 the Swift toolchain writes, so the
# benches profile a copy without it.
stripped_copy() {
    cp "$1" "$2" && strip --strip-debug "$2"
}
