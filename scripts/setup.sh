#!/usr/bin/env bash
# Installs what building and testing tokenproxy needs on a Debian 12 machine that already has
# Swift and Python 3: libcurl's, OpenSSL's and hiredis's headers, redis-server, tinyproxy, nginx, fcgiwrap, git and node (real servers
# and clients for the end-to-end tests), pkg-config, the curl binary, valgrind, and the Python packages the test servers
# import. Idempotent, and silent when everything is present.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/Tests/servers/requirements.txt"

log() { printf 'setup: %s\n' "$*" >&2; }

# Runs a command as root: directly when we are root, through sudo when it is available.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@" || sudo "$@"
    else
        log "need root for: $*  (not root and no sudo)"
        return 1
    fi
}

# --- Debian packages ---------------------------------------------------------------------------
apt_packages=(libcurl4-openssl-dev libssl-dev libhiredis-dev redis-server redis-sentinel pkg-config curl openssl tinyproxy nginx-light fcgiwrap git valgrind)
need_apt=0
command -v openssl >/dev/null 2>&1 || need_apt=1
# tinyproxy lives in /usr/bin (Debian 12) or /usr/sbin (older releases); the tests start their own.
[ -x /usr/bin/tinyproxy ] || [ -x /usr/sbin/tinyproxy ] || need_apt=1
# OpenSSL's headers for the TLS module (libcurl4-openssl-dev does not depend on libssl-dev).
[ -f /usr/include/openssl/ssl.h ] || need_apt=1
# The Redis store's client library (a header and libhiredis.so) and the server the tests start.
[ -f /usr/include/hiredis/hiredis.h ] || need_apt=1
command -v redis-server >/dev/null 2>&1 || need_apt=1
command -v redis-sentinel >/dev/null 2>&1 || need_apt=1
# nginx as a real upstream that resolves dot-segments the way servers do (the route tests start their own).
[ -x /usr/sbin/nginx ] || need_apt=1
# git over HTTPS through the proxy (inject.basic_username): nginx runs git http-backend through fcgiwrap.
[ -x /usr/sbin/fcgiwrap ] || need_apt=1
[ -x /usr/lib/git-core/git-http-backend ] || need_apt=1
command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libcurl || need_apt=1
command -v curl >/dev/null 2>&1 || need_apt=1
# callgrind for scripts/request-walk.sh (the files a request crosses) and the instruction counts of bench/.
command -v valgrind >/dev/null 2>&1 || need_apt=1
command -v python3 >/dev/null 2>&1 || { apt_packages+=(python3 python3-pip); need_apt=1; }
# Node (Debian's nodejs): its https client behind the forward proxy (Tests/servers/node_https_client.js)
# and an agent SDK's fetch holding a placeholder (Tests/servers/node_agent_sdk.mjs); npm for a proxy
# agent (Debian's npm brings node-https-proxy-agent; NodeSource's nodejs bundles one with its npm).
command -v node >/dev/null 2>&1 || { apt_packages+=(nodejs npm); need_apt=1; }

if [ "$need_apt" -eq 1 ]; then
    log "installing ${apt_packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq >/dev/null
    as_root apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# --- Python packages for Tests/servers -------------------------------------------------------
# Each requirement line may name its import in a trailing comment (`# import: moto`); otherwise
# the import name is the package name with extras and versions stripped and '-' turned into '_'.
python_imports=()
if [ -f "$requirements" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
        spec="${line%%#*}"
        spec="$(printf '%s' "$spec" | tr -d '[:space:]')"
        [ -z "$spec" ] && continue
        case "$line" in
            *"# import:"*) module="$(printf '%s' "${line##*# import:}" | tr -d '[:space:]')" ;;
            *) module="$(printf '%s' "$spec" | sed -E 's/[][<>=!~;].*//; s/-/_/g' | tr '[:upper:]' '[:lower:]')" ;;
        esac
        python_imports+=("$module")
    done < "$requirements"
fi

missing=()
for module in ${python_imports[@]+"${python_imports[@]}"}; do
    python3 -c "import $module" >/dev/null 2>&1 || missing+=("$module")
done

if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Python requirements (missing: ${missing[*]})"
    pip_cmd=(python3 -m pip install -q --disable-pip-version-check -r "$requirements")
    if [ "$(id -u)" -ne 0 ]; then
        pip_cmd+=(--user)
    fi
    if ! out="$("${pip_cmd[@]}" 2>&1)"; then
        # Debian's own python3 refuses system-wide installs (PEP 668) unless told otherwise.
        if printf '%s' "$out" | grep -q externally-managed-environment; then
            "${pip_cmd[@]}" --break-system-packages
        else
            printf '%s\n' "$out" >&2
            exit 1
        fi
    fi
fi
