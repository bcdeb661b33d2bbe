#!/usr/bin/env bash
# CI check of the Debian package, as root on a Debian 12 machine: builds it (scripts/package.sh),
# installs it with apt, checks what was installed, reinstalls it (postinst run again), purges it,
# and checks that the machine is as it was before. Exits non-zero on the first failed check.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
start=$SECONDS
log() { printf 'check-package: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
ok() { log "ok: $*"; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (it installs and purges the package)"
export DEBIAN_FRONTEND=noninteractive

scripts/package.sh
deb="$(ls dist/tokenproxy_*.deb)"
version="$(dpkg-deb -f "$deb" Version)"
[ -n "$version" ] || fail "no Version in $deb"

# The tarball: its checksum holds, and it has the .deb's files, no more, no fewer.
tarball="$(ls dist/tokenproxy-*.tar.gz)"
( cd dist && sha256sum -c --quiet "$(basename "$tarball").sha256" ) || fail "$tarball.sha256 does not match"
deb_files="$(dpkg-deb -c "$deb" | awk '{ print $6 }' | LC_ALL=C sort)"
tar_files="$(tar -tzf "$tarball" | LC_ALL=C sort)"
[ -n "$deb_files" ] || fail "$deb lists no files"
[ "$deb_files" = "$tar_files" ] ||
    fail "$tarball and $deb differ: $(diff <(printf '%s\n' "$deb_files") <(printf '%s\n' "$tar_files"))"
ok "$tarball: sha256 matches, same $(printf '%s\n' "$tar_files" | wc -l) entries as the .deb"

# A package left by an earlier, interrupted run would hide what this one installs.
if dpkg -s tokenproxy >/dev/null 2>&1; then
    log "purging an earlier tokenproxy package"
    apt-get purge -y -qq tokenproxy >/dev/null
fi

# The dependencies first, so that the snapshot below holds them and the comparison after the purge
# sees only what the package itself added.
apt-get satisfy -y -qq --no-install-recommends "$(dpkg-deb -f "$deb" Depends)" >/dev/null ||
    { apt-get update -qq >/dev/null && apt-get satisfy -y -qq --no-install-recommends "$(dpkg-deb -f "$deb" Depends)" >/dev/null; }

# What the package may touch: the file names under these folders, and the account databases.
# Left out: dpkg's and apt's own records, caches and logs, which an install changes by design, and
# the account databases' backups (passwd-, shadow- …) that useradd and systemd-sysusers rewrite.
snapshot() {
    find /etc /usr /lib /opt /srv /var -xdev \
        \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache -o -path /var/log -o -path /var/tmp \
        -o -path /etc/ld.so.cache -o -name '*-' \) -prune -o -print 2>/dev/null | LC_ALL=C sort
    cat /etc/passwd /etc/group
    # Names only: a failure prints the difference, and hashes have no place in a CI log.
    cut -d: -f1 /etc/shadow /etc/gshadow 2>/dev/null | sed 's/^/shadow: /'
}
before="$(mktemp)"
after="$(mktemp)"
trap 'rm -f "$before" "$after"' EXIT
snapshot >"$before"

log "installing $deb"
apt-get install -y -qq --no-install-recommends "./$deb" >/dev/null
[ "$(dpkg-query -W -f='${Status} ${Version}' tokenproxy)" = "install ok installed $version" ] ||
    fail "dpkg: $(dpkg-query -W -f='${Status} ${Version}' tokenproxy 2>&1)"
ok "apt-get installed tokenproxy $version"
dpkg --verify tokenproxy || fail "dpkg --verify: installed files differ from the package's"
ok "dpkg --verify: every file as packaged"

checks() {
    # The binary, from its installed path, knows the package's version.
    [ "$(/usr/bin/tokenproxy --version | head -1)" = "tokenproxy $version" ] ||
        fail "/usr/bin/tokenproxy --version: $(/usr/bin/tokenproxy --version 2>&1 | head -1)"
    ok "/usr/bin/tokenproxy --version: tokenproxy $version"

    # The unit: verify exits 0 even on a directive it cannot parse, so any line about the unit fails.
    unit=/lib/systemd/system/tokenproxy.service
    [ -f "$unit" ] || fail "no $unit"
    # verify runs `man` for Documentation=man:tokenproxy(1); a machine without man-db checks the file.
    man_check=(--man=yes)
    command -v man >/dev/null 2>&1 || man_check=(--man=no)
    [ -f /usr/share/man/man1/tokenproxy.1.gz ] || fail "no man page /usr/share/man/man1/tokenproxy.1.gz"
    out="$(systemd-analyze verify "${man_check[@]}" "$unit" 2>&1)" || fail "systemd-analyze verify $unit: $out"
    if printf '%s\n' "$out" | grep -q tokenproxy; then fail "systemd-analyze verify $unit: $out"; fi
    grep -qx 'ExecStart=/usr/bin/tokenproxy serve --config /etc/tokenproxy/config.yaml' "$unit" ||
        fail "$unit: ExecStart is not the installed binary"
    ok "systemd-analyze verify ${man_check[*]} $unit: no finding; ExecStart runs /usr/bin/tokenproxy"

    # postinst: the system user and group from sysusers.d, and the store's folder.
    entry="$(getent passwd tokenproxy)" || fail "no tokenproxy user"
    uid="$(printf '%s' "$entry" | cut -d: -f3)"
    [ "$uid" -lt 1000 ] || fail "tokenproxy is not a system user (UID $uid)"
    [ "$(printf '%s' "$entry" | cut -d: -f6,7)" = /var/lib/tokenproxy:/usr/sbin/nologin ] || fail "tokenproxy user: $entry"
    getent group tokenproxy >/dev/null || fail "no tokenproxy group"
    [ "$(stat -c '%a %U:%G' /var/lib/tokenproxy)" = "700 tokenproxy:tokenproxy" ] ||
        fail "/var/lib/tokenproxy: $(stat -c '%a %U:%G' /var/lib/tokenproxy)"
    ok "system user tokenproxy (UID $uid, nologin); /var/lib/tokenproxy 700 tokenproxy:tokenproxy"

    # The default configuration: a conffile, readable by the service's group only.
    dpkg-query -W -f='${Conffiles}\n' tokenproxy | grep -q '^ /etc/tokenproxy/config.yaml ' ||
        fail "/etc/tokenproxy/config.yaml is not a conffile"
    [ "$(stat -c '%a %U:%G' /etc/tokenproxy/config.yaml)" = "640 root:tokenproxy" ] ||
        fail "/etc/tokenproxy/config.yaml: $(stat -c '%a %U:%G' /etc/tokenproxy/config.yaml)"
    ok "/etc/tokenproxy/config.yaml: conffile, 640 root:tokenproxy"

    # `check` as the service would run it: as its user, with API_TOKEN as /etc/tokenproxy/env gives it.
    out="$(runuser -u tokenproxy -- env API_TOKEN=check-package-dummy /usr/bin/tokenproxy check \
        --config /etc/tokenproxy/config.yaml 2>&1)" || fail "tokenproxy check on the default configuration: $out"
    printf '%s\n' "$out" | grep -q 'configuration ok' || fail "tokenproxy check: $out"
    if printf '%s\n' "$out" | grep -qi warning; then fail "tokenproxy check warns: $out"; fi
    # … and without it, check refuses: the variable is what makes it pass.
    if runuser -u tokenproxy -- env -u API_TOKEN /usr/bin/tokenproxy check --config /etc/tokenproxy/config.yaml >/dev/null 2>&1; then
        fail "tokenproxy check passes without API_TOKEN"
    fi
    ok "tokenproxy check (as tokenproxy, API_TOKEN set): configuration ok; without API_TOKEN: refused"

    # Installed, not enabled, not started.
    if ls /etc/systemd/system/*.wants/tokenproxy.service >/dev/null 2>&1; then fail "the package enabled the service"; fi
    # (No pgrep: procps is not on every machine. Root reads every process's exe link.)
    for exe in /proc/[0-9]*/exe; do
        if [ "$(readlink "$exe" 2>/dev/null)" = /usr/bin/tokenproxy ]; then fail "the package started the service"; fi
    done
    ok "the service is neither enabled nor started"
}
checks

# A second configure (as on an upgrade): postinst must not fail on what it made the first time.
log "reinstalling (postinst once more)"
apt-get install -y -qq --reinstall "./$deb" >/dev/null
checks

log "purging"
# An admin who enabled the service: the purge must take the link away with the unit.
systemctl enable tokenproxy.service >/dev/null 2>&1 || fail "systemctl enable tokenproxy.service"
ls /etc/systemd/system/multi-user.target.wants/tokenproxy.service >/dev/null || fail "systemctl enable made no link"
# remove first: the program goes, the configuration and the store stay (for a reinstall).
apt-get remove -y -qq tokenproxy >/dev/null
[ "$(dpkg-query -W -f='${Status}' tokenproxy)" = "deinstall ok config-files" ] ||
    fail "after remove: $(dpkg-query -W -f='${Status}' tokenproxy)"
if [ -e /usr/bin/tokenproxy ] || [ -e /lib/systemd/system/tokenproxy.service ]; then fail "remove left the program or the unit"; fi
if [ ! -f /etc/tokenproxy/config.yaml ] || [ ! -d /var/lib/tokenproxy ]; then fail "remove took the configuration or the store"; fi
ok "removed: program and unit gone, configuration and store kept"
apt-get purge -y -qq tokenproxy >/dev/null
if dpkg -s tokenproxy >/dev/null 2>&1; then fail "tokenproxy is still known to dpkg: $(dpkg-query -W -f='${Status}' tokenproxy)"; fi
snapshot >"$after"
if ! diff -u "$before" "$after" >&2; then fail "the purge left the machine different from before the install (above)"; fi
ok "purged: files, folders, enablement link, user and group all as before the install"
log "done in $((SECONDS - start)) s"
