#!/usr/bin/env bash
# Builds the Debian package and a tarball of the same files into dist/ (git-ignored):
#
#   dist/tokenproxy_VERSION_ARCH.deb
#   dist/tokenproxy-VERSION-linux-ARCH.tar.gz and its .sha256 (`sha256sum -c` in dist/ checks it)
#
# The files: the release binary (built as README.md's "Requirements" says) as /usr/bin/tokenproxy,
# config/tokenproxy.service as /lib/systemd/system/tokenproxy.service (ExecStart pointed at
# /usr/bin), config/tokenproxy.sysusers as /usr/lib/sysusers.d/tokenproxy.conf, and
# config/packaged.yaml as /etc/tokenproxy/config.yaml (a conffile). The version is what the binary's
# `--version` prints; Depends: the packages of the shared libraries the binary links (objdump -p,
# ldd, dpkg -S). Then lintian checks the .deb (installed with apt when missing): any finding that
# packaging/deb/lintian-overrides does not explain fails the build.
#
# Run as root or with sudo (apt for lintian only). SKIP_BUILD=1 packages the binary already built.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dist="$root/dist"
log() { printf 'package: %s\n' "$*" >&2; }
# The identity the repository's commits carry.
maintainer='tokenproxy maintainers <maintainers@users.noreply.a-seed-c4e4f82f.example>'

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@" || sudo "$@"; fi
}

# objdump and strip (binutils: the Swift toolchain's own dependency, so normally present).
if ! command -v objdump >/dev/null 2>&1 || ! command -v strip >/dev/null 2>&1; then
    log "installing binutils"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null
    as_root apt-get install -y -qq --no-install-recommends binutils >/dev/null
fi

# --- the binary ------------------------------------------------------------------------------
build=(swift build -c release --static-swift-stdlib
    -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs
    -Xlinker --symbol-ordering-file=scripts/startup-order.txt -Xlinker --no-warn-symbol-ordering)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building the release binary"
    start=$SECONDS
    "${build[@]}" --product tokenproxy
    log "release build: $((SECONDS - start)) s"
fi
binary="$("${build[@]}" --show-bin-path)/tokenproxy"
[ -x "$binary" ] || { log "no binary at $binary"; exit 1; }

# "tokenproxy 0.1.0" on the first line (Sources/tokenproxy/main.swift, Version.tokenproxy).
version="$("$binary" --version | sed -n '1s/^tokenproxy \([0-9][0-9A-Za-z.+~-]*\)$/\1/p')"
[ -n "$version" ] || { log "cannot read the version from: $("$binary" --version | head -1)"; exit 1; }
arch="$(dpkg --print-architecture)"
log "version $version, architecture $arch"

# --- the file tree ---------------------------------------------------------------------------
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tree="$work/tree"
install -d "$tree/usr/bin" "$tree/lib/systemd/system" "$tree/usr/lib/sysusers.d" "$tree/etc/tokenproxy" \
    "$tree/usr/share/doc/tokenproxy" "$tree/usr/share/lintian/overrides" "$tree/usr/share/man/man1"
# Stripped as debhelper strips (the symbols are a third of the file and nothing at run time reads them).
install -m 0755 "$binary" "$tree/usr/bin/tokenproxy"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$tree/usr/bin/tokenproxy"
# The shipped unit names /usr/local/bin (a hand install); a package's binary lives in /usr/bin.
grep -q '/usr/local/bin/tokenproxy' config/tokenproxy.service || { log "the unit no longer names /usr/local/bin/tokenproxy"; exit 1; }
# Documentation=: the man page exists only in the package.
sed -e 's#/usr/local/bin/tokenproxy#/usr/bin/tokenproxy#g' -e '/^Description=/a Documentation=man:tokenproxy(1)' \
    config/tokenproxy.service >"$tree/lib/systemd/system/tokenproxy.service"
chmod 0644 "$tree/lib/systemd/system/tokenproxy.service"
install -m 0644 config/tokenproxy.sysusers "$tree/usr/lib/sysusers.d/tokenproxy.conf"
# 0640: the unit's comment asks for root:tokenproxy; postinst sets the group once the user exists.
install -m 0640 config/packaged.yaml "$tree/etc/tokenproxy/config.yaml"
install -m 0644 packaging/deb/copyright "$tree/usr/share/doc/tokenproxy/copyright"
gzip -9n <packaging/deb/tokenproxy.1 >"$tree/usr/share/man/man1/tokenproxy.1.gz"
chmod 0644 "$tree/usr/share/man/man1/tokenproxy.1.gz"
install -m 0644 packaging/deb/lintian-overrides "$tree/usr/share/lintian/overrides/tokenproxy"
# A native package's changelog: one entry for this version, dated by the last commit (reproducible).
date="$(git log -1 --format=%cD 2>/dev/null || date -R)"
{
    printf 'tokenproxy (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Built from commit %s.\n\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    printf ' -- %s  %s\n' "$maintainer" "$date"
} | gzip -9n >"$tree/usr/share/doc/tokenproxy/changelog.gz"
chmod 0644 "$tree/usr/share/doc/tokenproxy/changelog.gz"

# --- Depends ---------------------------------------------------------------------------------
# Each NEEDED library, found where the loader finds it (ldd), mapped to the package owning it.
depends=()
for lib in $(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }'); do
    # "libc.so.6 => /lib/…/libc.so.6 (…)"; the loader itself is listed by its path: "/lib64/ld-linux….so.2 (…)".
    path="$(ldd "$binary" | awk -v lib="$lib" '$1 == lib && $3 ~ /^\// { print $3; exit }
        substr($1, length($1) - length(lib)) == "/" lib { print $1; exit }')"
    [ -n "$path" ] || { log "$lib: not found by ldd"; exit 1; }
    # dpkg -S knows the path as the package installed it: /lib/… or /usr/lib/… (merged /usr).
    owner="$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null ||
        dpkg -S "${path#/usr}" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null || true)"
    package="$(printf '%s\n' "$owner" | head -1 | cut -d: -f1)"
    [ -n "$package" ] || { log "$lib ($path): no Debian package owns it"; exit 1; }
    log "needs $lib: $package"
    depends+=("$package")
done
# ca-certificates: libcurl verifies identity providers and upstreams against it (Recommends only,
# for libcurl4). systemd-sysusers for postinst: systemd, or the standalone package in a container.
depends+=(ca-certificates "systemd | systemd-standalone-sysusers")
depends_line="$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')"

# --- the .deb --------------------------------------------------------------------------------
pkg="$work/pkg"
cp -a "$tree" "$pkg"
install -d -m 0755 "$pkg/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
cat >"$pkg/DEBIAN/control" <<EOF
Package: tokenproxy
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends_line
Section: net
Priority: optional
Description: authenticating HTTP/1.1 reverse proxy
 tokenproxy holds an API's credentials (OAuth 2 and OIDC logins, AWS SigV4,
 Cognito, GitHub Apps, API keys) and adds them to the requests of a local
 client, refreshing tokens before they expire. It runs as a systemd service
 under its own user; the service is not enabled on installation.
EOF
printf '/etc/tokenproxy/config.yaml\n' >"$pkg/DEBIAN/conffiles"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$pkg/DEBIAN/"
( cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs md5sum ) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

rm -rf "$dist"
install -d "$dist"
deb="$dist/tokenproxy_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
log "built $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p' >&2

# --- the tarball -----------------------------------------------------------------------------
tarball="tokenproxy-${version}-linux-${arch}.tar.gz"
tar -C "$tree" --owner=0 --group=0 --numeric-owner --sort=name --mtime="@$(git log -1 --format=%ct 2>/dev/null || date +%s)" \
    -cf - . | gzip -9n >"$dist/$tarball"
( cd "$dist" && sha256sum "$tarball" >"$tarball.sha256" && sha256sum -c --quiet "$tarball.sha256" )
log "built $dist/$tarball and $tarball.sha256"

# --- lintian ---------------------------------------------------------------------------------
if ! command -v lintian >/dev/null 2>&1; then
    log "installing lintian"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null
    as_root apt-get install -y -qq --no-install-recommends lintian >/dev/null
fi
log "lintian $deb"
# Overridden tags (packaging/deb/lintian-overrides, each with its reason) are not shown; any other
# finding of level info or above fails.
if ! out="$(lintian --fail-on error,warning,info --display-info "$deb" 2>&1)"; then
    printf '%s\n' "$out" >&2
    log "lintian found the above"
    exit 1
fi
[ -z "$out" ] || printf '%s\n' "$out" >&2
log "lintian: no findings"
