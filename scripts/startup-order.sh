#!/usr/bin/env bash
# Regenerates scripts/startup-order.txt: every function of the binary that `tokenproxy serve` runs
# from start to idle (a static token, and an OAuth2 session loaded from its store), as callgrind
# sees them. Release builds hand the list to lld (--symbol-ordering-file), which places those
# functions next to each other: the kernel maps code in 64 KiB blocks around each page it faults in,
# so start-up code spread over the whole 20 MB of text kept about 3.5 MiB more resident.
# A stale list costs only that memory, never correctness; rerun this after large changes.
#
#   scripts/startup-order.sh        # needs valgrind; builds into .build-order
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/scripts/startup-order.txt"
command -v valgrind >/dev/null || { echo "startup-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT

release=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs --scratch-path .build-order)
(cd "$ROOT" && swift build "${release[@]}" --product tokenproxy >&2)
cp "$(cd "$ROOT" && swift build "${release[@]}" --show-bin-path)/tokenproxy" "$WORK/tokenproxy"
strip -g "$WORK/tokenproxy"  # valgrind 3.19 cannot read the toolchain's DWARF 5; symbols stay

mkdir -m 0700 "$WORK/state"
python3 - "$WORK/state/tokens.json" <<'EOF'
import base64, json, sys, time
part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
exp = int(time.time()) + 86400
token = part({"alg": "none"}) + "." + part({"sub": "order", "exp": exp}) + ".c2ln"
json.dump({"version": 1, "kind": "oauth2_refresh", "access_token": token, "refresh_token": "r",
           "expires_at": exp, "issued_at": time.time(), "subject": "order"}, open(sys.argv[1], "w"))
EOF
chmod 0600 "$WORK/state/tokens.json"
common=$'listen: 127.0.0.1:0\nupstream: http://127.0.0.1:9\nlog:\n  level: info\n'
printf '%scredentials:\n  type: static\n  token_env: ORDER_TOKEN\n' "$common" >"$WORK/static.yaml"
printf '%scredentials:\n  type: oauth2_refresh\n  token_url: http://127.0.0.1:9/token\n  client_id: c\n  client_secret_env: ORDER_TOKEN\nstore:\n  path: ./state/tokens.json\n' \
    "$common" >"$WORK/session.yaml"

for config in static session; do
    ORDER_TOKEN=x valgrind --tool=callgrind --demangle=no --callgrind-out-file="$WORK/$config.cg" \
        "$WORK/tokenproxy" serve --config "$WORK/$config.yaml" 2>"$WORK/$config.log" &
    pid=$!
    for _ in $(seq 120); do grep -q "listening on" "$WORK/$config.log" && break; sleep 0.5; done
    grep -q "listening on" "$WORK/$config.log" || { cat "$WORK/$config.log" >&2; kill "$pid"; exit 1; }
    sleep 2  # a few idle ticks of the loops and the token thread
    kill -INT "$pid"
    wait "$pid" || true
done

# Function names (callgrind's fn=/cfn= lines) that belong to the tokenproxy object (ob=/cob=).
python3 - "$WORK/tokenproxy" "$WORK"/*.cg >"$OUT" <<'EOF'
import re, sys
binary, names = sys.argv[1], set()
for path in sys.argv[2:]:
    objects, functions, current, callee = {}, {}, None, None
    for line in open(path, errors="replace"):
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, key, name = m.groups()
            if name: objects[key] = name
            if kind == "ob": current = objects.get(key)
            else: callee = objects.get(key)
            continue
        m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            kind, key, name = m.groups()
            if name: functions[key] = name
            owner = current if kind == "fn" else (callee or current)
            if kind == "cfn": callee = None
            if owner == binary and key in functions: names.add(functions[key])
print("\n".join(sorted(names)))
EOF
echo "startup-order.sh: $(wc -l <"$OUT") functions in $OUT" >&2
