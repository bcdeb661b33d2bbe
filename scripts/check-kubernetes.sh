#!/usr/bin/env bash
# Checks the Kubernetes manifests in deploy/kubernetes/: every document against the Kubernetes
# schemas (kubernetes-validate, strict: an unknown or misspelt field fails), then a checkov scan
# whose every finding must be fixed or skipped with a reason in the manifest itself
# (`checkov.io/skip…: CKV_K8S_xx=reason` annotations). Installs both tools, pinned, into a venv
# under .build/ (ignored by git); a second run reuses it. Exits non-zero on any finding.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

validate_version=1.37.0
checkov_version=3.3.30
# The newest Kubernetes schema kubernetes-validate 1.37.0 ships is 1.37; native sidecars
# (initContainers with restartPolicy: Always) need 1.29 or later.
kubernetes_version="${KUBERNETES_VERSION:-1.37.0}"
venv="$root/.build/kubernetes-tools"
manifests=(deploy/kubernetes/*.yaml)

log() { printf 'check-kubernetes: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else
        log "need root for: $*"
        return 1
    fi
}

# --- tools -------------------------------------------------------------------------------------
# The stamp names the pinned versions: a change of pin rebuilds the venv.
stamp="$venv/.pins"
pins=("kubernetes-validate==$validate_version" "checkov==$checkov_version")
want="${pins[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # Debian's python3 needs python3-venv for `-m venv` (ensurepip).
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        log "installing python3-venv"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -qq >/dev/null
        as_root apt-get install -y -qq python3-venv >/dev/null
    fi
    log "installing $want into ${venv#"$root"/}"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"
    printf '%s' "$want" > "$stamp"
fi

# --- schemas -----------------------------------------------------------------------------------
echo "==> kubernetes-validate $validate_version, Kubernetes $kubernetes_version schemas, strict"
# --strict: a field the schema does not know is an error, not a warning.
"$venv/bin/kubernetes-validate" --strict -k "$kubernetes_version" "${manifests[@]}"

# --- checkov -----------------------------------------------------------------------------------
echo "==> checkov $checkov_version --framework kubernetes"
# --quiet --compact: only the failed checks, without the code around them (the skipped ones are
# listed below). Exits 1 on any failed check.
files=()
for manifest in "${manifests[@]}"; do files+=(-f "$manifest"); done
"$venv/bin/checkov" --quiet --compact --framework kubernetes --skip-download "${files[@]}"
# The findings skipped, each with the reason written beside it in its manifest.
echo "==> checks skipped in the manifests, with their reasons:"
grep -n 'checkov.io/skip' "${manifests[@]}" | sed -E 's/ +checkov.io\/skip[0-9]+: / /'
echo "==> deploy/kubernetes: ${#manifests[@]} files valid, no open checkov finding"
