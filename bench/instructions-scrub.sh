#!/usr/bin/env bash
# Instructions per request of a sandbox route (issue 42: a placeholder and `scrub: true`, "on") against
# the same static Bearer route without them ("off") and with `scrub: true` alone ("scrub", to tell
# the two costs apart), counted by callgrind in the harness of
# ../shared/bench-anchors/instructions-vs-nginx.sh: one worker pinned to CPU 0 beside an nginx
# upstream, wrk keep-alive on CPU 1, 2 s warm-up, 8 s counted. Every client sends the placeholder as
# `Authorization: Bearer …`: the "on" route checks and replaces it, the others replace the
# client's Authorization (`client_authorization: replace`, the default), so all get the same bytes.
# /small is the anchor's 36-byte answer (wrk -c16); /big is 1 MiB of the pattern of
# bench/scrub-cells.sh (wrk -c4). Counts are repeatable whatever else the machine does.
# The harness is bench/lib/callgrind.sh.
#   bench/instructions-scrub.sh PATH-TO-release-tokenproxy
set -u
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib/callgrind.sh"
trap stop_bench_processes EXIT
bin=$1
d=$(mktemp -d /tmp/tokenproxy-instructions-scrub.XXXXXX); mkdir -p "$d/www"
chmod 755 "$d" "$d/www"  # nginx's workers read /big as another user when started as root
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 -c 'import sys; p = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"; sys.stdout.buffer.write(p * (1048576 // len(p)))' >"$d/www/big"
up_port=$(free_port)
placeholder=tp-bench-placeholder-0123456789abcdef
for cell in off scrub on; do
  {
    echo "upstream: http://127.0.0.1:$up_port"
    echo "workers: 1"
    printf 'credentials:\n  type: static\n  token_env: BENCH_TOKEN\n'
    case $cell in
      on) printf 'placeholder:\n  value_env: BENCH_PLACEHOLDER\nscrub: true\n' ;;
      scrub) echo "scrub: true" ;;
      off) echo "scrub: false" ;;
    esac
    printf 'store:\n  path: %s/%s/tokens.json\nlog:\n  level: warn\n' "$d" "$cell"
  } >"$d/$cell.yaml"
done
stripped_copy "$bin" "$d/tp"
start_upstream "$d" "$up_port" "location /big { root $d/www; }"
export BENCH_TOKEN=test-token-123 BENCH_PLACEHOLDER=$placeholder
CG_HEADER="Authorization: Bearer $placeholder"
big_is_the_file() {  # url
  [[ $1 != */big ]] || cmp -s <(curl -s -H "$CG_HEADER" "$1") "$d/www/big" ||
    { echo "$1 is not the file" >&2; return 1; }
}
CG_CHECK=big_is_the_file
declare -A per
for path in small big; do
  CG_CONNECTIONS=$([[ $path == small ]] && echo 16 || echo 4)
  for cell in off scrub on; do
    port=$(free_port)
    { echo "listen: 127.0.0.1:$port"; cat "$d/$cell.yaml"; } >"$d/$cell-$path.yaml"
    count_instructions "$d/$cell-$path.out" "http://127.0.0.1:$port/$path" "$d/tp" serve --config "$d/$cell-$path.yaml"
    per[$cell,$path]=$instructions_per_request
  done
done
echo "profiles: $d/{off,scrub,on}-{small,big}.out" >&2
for path in small big; do
  echo "instructions per /$path request: off ${per[off,$path]}, scrub ${per[scrub,$path]}, on (placeholder and scrub)" \
    "${per[on,$path]}; on - off $((per[on,$path] - per[off,$path])), scrub - off $((per[scrub,$path] - per[off,$path]))"
done
