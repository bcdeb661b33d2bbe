#!/usr/bin/env bash
# Builds Docker/Dockerfile with Debian's podman and runs the image: UID 10001, read-only root
# filesystem, a writable store volume, the health check, one request through it to a local
# upstream with the token, SIGTERM draining to exit 0. Prints the image's size and the idle RSS.
#
# No registry is reachable here, so the two base images are made locally and cached in podman's
# store (reused while present; `podman rmi` them to rebuild):
#   localhost/debian:12             debootstrap --variant=minbase bookworm, imported
#   localhost/debian:bookworm-slim  the same without docs, man pages and locales
#   localhost/swift:6.3-bookworm    debian:12 + the packages of the official image + this machine's toolchain
# The two Debian images carry the official images' apt settings (/etc/apt/apt.conf.d/docker-*).
# Run as root (CI) or through sudo.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'image: %s\n' "$*" >&2; }

full_image=localhost/debian:12
slim_image=localhost/debian:bookworm-slim
swift_image=localhost/swift:6.3-bookworm
image=localhost/tokenproxy:ci
# The Debian archive this machine's apt uses (its first `URIs:` or `deb` line for bookworm), so the
# root filesystem comes from where the machine's own packages do; DEBIAN_MIRROR overrides.
apt_mirror() {
    local uri
    uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\)/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1)
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    printf '%s' "$uri"
}
mirror="${DEBIAN_MIRROR:-$(apt_mirror)}"

# The packages swift:6.3-bookworm carries on top of debian:12: the apt-get install list of
# swiftlang/swift-docker's 6.3/debian/12/Dockerfile (curl and gpg are purged there after the download).
swift_image_packages=(binutils libicu-dev libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev
    libpython3-dev libxml2-dev pkg-config uuid-dev tzdata git gcc libstdc++-12-dev)

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@" || sudo "$@"; fi
}
# Podman as these machines need it: runc, no systemd cgroups, events in a file.
# It logs that it cannot make systemd timers for health checks (no systemd here; `podman
# healthcheck run` below runs the check itself): only that line is dropped.
pm() {
    as_root podman --runtime runc --cgroup-manager cgroupfs --events-backend file "$@" \
        2> >(grep -v 'systemd connection' >&2)
}

# --- tools -------------------------------------------------------------------------------------
need=0
for tool in podman debootstrap runc; do command -v "$tool" >/dev/null 2>&1 || need=1; done
command -v python3 >/dev/null 2>&1 || need=1
if [ "$need" -eq 1 ]; then
    log "installing podman, debootstrap, runc"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null
    as_root apt-get install -y -qq podman debootstrap runc python3 >/dev/null
fi

toolchain="$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")"
[ -x "$toolchain/usr/bin/swift" ] || { log "no Swift toolchain found (swift is $(command -v swift))"; exit 1; }

work="$(mktemp -d)"
container=""
upstream_pid=""
cleanup() {
    [ -n "$container" ] && pm rm -f -t 0 "$container" >/dev/null 2>&1
    [ -n "$upstream_pid" ] && kill "$upstream_pid" 2>/dev/null
    pm volume rm -f tokenproxy-ci-store >/dev/null 2>&1
    as_root rm -rf "$work"
}
trap cleanup EXIT

# --- base images -------------------------------------------------------------------------------
# One debootstrap makes both: swift:6.3-bookworm is built FROM debian:12 (a full minbase), and
# debian:bookworm-slim is the same release with docs, man pages and locales dropped and kept out.
# The label names this recipe's version: an image cached by an older recipe is made again.
base_recipe=2
base_cached() { [ "$(pm image inspect --format '{{index .Labels "tokenproxy.base-recipe"}}' "$1" 2>/dev/null)" = "$base_recipe" ]; }
if base_cached "$full_image" && base_cached "$slim_image"; then
    log "$full_image, $slim_image: cached"
else
    log "$full_image, $slim_image: debootstrap --variant=minbase bookworm"
    as_root debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >/dev/null
    # As the official images do: no package lists or downloaded packages in the image, and apt
    # configured to keep it so. Without docker-clean every `apt-get install` in a Dockerfile leaves
    # its .deb files in /var/cache/apt/archives (92 MB in the runtime stage: 292 MB against about 200 MB).
    as_root sh -c "rm -rf '$work/rootfs'/var/lib/apt/lists/* '$work/rootfs'/var/cache/apt/*.bin '$work/rootfs'/var/cache/apt/archives/*.deb"
    as_root tee "$work/rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'APT'
# Downloaded packages and apt's binary caches are deleted after every dpkg run and update.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
    as_root tee "$work/rootfs/etc/apt/apt.conf.d/docker-no-languages" >/dev/null <<<'Acquire::Languages "none";'
    as_root tee "$work/rootfs/etc/apt/apt.conf.d/docker-gzip-indexes" >/dev/null <<<'Acquire::GzipIndexes "true";'
    as_root tee "$work/rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests" >/dev/null <<<'Apt::AutoRemove::SuggestsImportant "false";'
    as_root tar -C "$work/rootfs" -c . |
        pm import -q --change 'CMD ["bash"]' --change "LABEL tokenproxy.base-recipe=$base_recipe" - "$full_image" >/dev/null
    as_root tee "$work/rootfs/etc/dpkg/dpkg.cfg.d/slim" >/dev/null <<'EOF'
# The slim image: packages installed later leave these out too.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
EOF
    as_root find "$work/rootfs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
    as_root rm -rf "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/info" "$work/rootfs/usr/share/groff" \
        "$work/rootfs/usr/share/lintian" "$work/rootfs/usr/share/locale"
    as_root tar -C "$work/rootfs" -c . |
        pm import -q --change 'CMD ["bash"]' --change "LABEL tokenproxy.base-recipe=$base_recipe" - "$slim_image" >/dev/null
    as_root rm -rf "$work/rootfs"
fi

if pm image exists "$swift_image"; then
    log "$swift_image: cached"
else
    log "$swift_image: ${swift_image_packages[*]} + $toolchain"
    cat >"$work/Containerfile.swift" <<EOF
FROM $full_image
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ${swift_image_packages[*]} >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
# The official image unpacks the toolchain's usr/ into /usr.
RUN cp -a /toolchain/usr/. /usr/ && chmod -R o+r /usr/lib/swift && swift --version
EOF
    pm build --pull=never --network host -v "$toolchain:/toolchain:ro" -f "$work/Containerfile.swift" \
        -t "$swift_image" "$work" >/dev/null
fi

# --- the image, from Docker/Dockerfile as written ----------------------------------------------
# SwiftPM resolves through this machine's offline package copy: git's url.insteadOf lines (only
# those) as /etc/gitconfig, and the folders they point to mounted read-only at their own paths.
git config --system --get-regexp insteadof | while read -r key value; do
    printf '[url "%s"]\n\tinsteadOf = %s\n' "${key#url.}" "$value" | sed 's/\.insteadof"\]/"]/'
done >"$work/gitconfig"
mounts=(-v "$work/gitconfig:/etc/gitconfig:ro")
while read -r dir; do
    dir="${dir%/}"
    [ -d "$dir" ] && mounts+=(-v "$dir:$dir:ro")
done < <(git config --system --get-regexp insteadof | sed 's/^url\.\(.*\)\.insteadof .*/\1/' | sort -u)
log "building Docker/Dockerfile (offline packages: $(sed -n 's/^\[url "\(.*\)"\]/\1/p' "$work/gitconfig" | sort -u | tr '\n' ' '))"
# Every run builds the Dockerfile from scratch (a cached layer would hide a package gone missing),
# keeping no intermediate images (the build stage alone is 5 GB).
pm rmi -f "$image" >/dev/null 2>&1 || true
start=$SECONDS
pm build --pull=never --no-cache --layers=false --network host --format docker "${mounts[@]}" \
    --build-arg SWIFT_IMAGE="$swift_image" --build-arg RUNTIME_IMAGE="$slim_image" \
    --ignorefile "$root/Docker/Dockerfile.dockerignore" \
    -f "$root/Docker/Dockerfile" -t "$image" "$root" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; log "FAIL: the build"; exit 1; }
log "built in $((SECONDS - start)) s"
pm image inspect --format '{{json .Config.Healthcheck}}' "$image" | grep -q tokenproxy-healthcheck \
    || { log "FAIL: the image has no HEALTHCHECK"; exit 1; }

# --- run it ------------------------------------------------------------------------------------
port_upstream=18471
port_proxy=18472
port_admin=18473
token="ci-token-$RANDOM$RANDOM"
# An upstream on the host network that answers every GET with the Authorization header it got.
cat >"$work/upstream.py" <<'EOF'
import http.server, sys
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("authorization=%s\n" % self.headers.get("Authorization", "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
EOF
python3 "$work/upstream.py" "$port_upstream" &
upstream_pid=$!

# No store.path: the default (./state beside the configuration) must land on the store volume.
cat >"$work/config.yaml" <<EOF
listen: 127.0.0.1:$port_proxy
upstream: http://127.0.0.1:$port_upstream
credentials:
  type: static
  token_env: API_TOKEN
admin:
  listen: 127.0.0.1:$port_admin
EOF
chmod 0644 "$work/config.yaml"
chmod 0755 "$work"

pm volume rm -f tokenproxy-ci-store >/dev/null 2>&1 || true
container=tokenproxy-ci
pm rm -f -t 0 "$container" >/dev/null 2>&1 || true
pm run -d --name "$container" --network host --read-only \
    --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 \
    -v "$work/config.yaml:/etc/tokenproxy/config.yaml:ro" \
    -v tokenproxy-ci-store:/var/lib/tokenproxy \
    -e API_TOKEN="$token" -e TOKENPROXY_HEALTH_ADDRESS="127.0.0.1:$port_admin" \
    "$image" >/dev/null

fail() {
    log "FAIL: $*"
    pm logs "$container" 2>&1 | tail -20 >&2
    exit 1
}

healthy=0
for _ in $(seq 1 50); do
    if pm healthcheck run "$container" >/dev/null 2>&1; then healthy=1; break; fi
    sleep 0.2
done
[ "$healthy" -eq 1 ] || fail "podman healthcheck run never passed"
log "health check: passed"

# Every library the binary links resolves in the image, and none of libxml2 and ICU (STS's XML is read
# without Foundation's XML module: 39 MB of the image and about 0.9 MiB of idle RSS; bench/RESULTS.md).
libraries="$(pm exec "$container" ldd /usr/local/bin/tokenproxy)" || fail "ldd failed"
! grep -q 'not found' <<<"$libraries" || fail "libraries missing in the image: $(grep 'not found' <<<"$libraries" | tr -s ' \t\n' ' ')"
! grep -Eq 'libxml2|libicu' <<<"$libraries" || fail "the binary loads $(grep -Eo 'lib(xml2|icu[a-z]*)[^ ]*' <<<"$libraries" | sort -u | tr '\n' ' ')again"
log "libraries: $(grep -c '=>' <<<"$libraries") resolved, no libxml2 or ICU"

user="$(pm exec "$container" id -u)"
[ "$user" = 10001 ] || fail "runs as UID $user, not 10001"
log "user: UID $user"
pm exec "$container" sh -c 'touch /usr/local/bin/x 2>/dev/null' && fail "the root filesystem is writable"
[ "$(pm inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$container")" = true ] || fail "not --read-only"
log "root filesystem: read-only"

answer="$(python3 - "$port_proxy" <<'EOF'
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/anything" % sys.argv[1], timeout=10).read().decode().strip())
EOF
)" || fail "no answer through the proxy"
[ "$answer" = "authorization=Bearer $token" ] || fail "the upstream saw '$answer', not the token"
log "request through the proxy: the upstream got the token"
# No store.path in the config: the default ./state beside it must be the writable store volume.
pm exec "$container" sh -c 'touch /etc/tokenproxy/state/probe && rm /etc/tokenproxy/state/probe' \
    || fail "the default store folder /etc/tokenproxy/state is not writable by UID 10001"
log "store: the default /etc/tokenproxy/state is the writable volume"

sleep 2
pid=1  # the ENTRYPOINT is tokenproxy itself: PID 1 in the container
rss="$(pm exec "$container" sh -c "grep VmRSS /proc/$pid/status" | awk '{printf "%.1f MiB", $2 / 1024}')"
size="$(pm image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1000000}')"

start=$SECONDS
pm stop -t 30 "$container" >/dev/null
status="$(pm inspect --format '{{.State.ExitCode}}' "$container")"
[ "$status" = 0 ] || fail "SIGTERM: exit status $status, not 0"
log "SIGTERM: drained and exited 0 in $((SECONDS - start)) s"
log "image size: $size"
log "idle RSS: $rss (pid $pid in the container)"
log "ok"
