#!/usr/bin/env bash
# Idle memory of tokenproxy inside an image built by scripts/image.sh (bench/RESULTS.md, "Idle memory
# in the image"): runs IMAGE with the static-token configuration of scripts/image.sh, waits until
# the admin listener answers, lets it sit for 3 s, and prints VmRSS, /proc/1/smaps_rollup (anonymous
# against file-backed) and the resident KiB of every mapping, summed by file, largest first. Then the
# start-up time: 20 runs of `tokenproxy check` inside the container. Extra arguments are given to
# `podman run` (e.g. `-e MALLOC_ARENA_MAX=1`) to measure one change at a time.
#
#   bench/idle-memory.sh [IMAGE] [podman run options...]     (root; IMAGE default localhost/tokenproxy:ci)
set -euo pipefail

image="${1:-localhost/tokenproxy:ci}"
shift || true
pm() {
    podman --runtime runc --cgroup-manager cgroupfs --events-backend file "$@" 2> >(grep -v 'systemd connection' >&2)
}
work="$(mktemp -d)"
container="tokenproxy-idle-$$"
cleanup() {
    pm rm -f -t 0 "$container" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/config.yaml" <<'EOF'
listen: 127.0.0.1:18482
upstream: http://127.0.0.1:18481
credentials:
  type: static
  token_env: API_TOKEN
admin:
  listen: 127.0.0.1:18483
EOF
chmod 0755 "$work"
chmod 0644 "$work/config.yaml"

pm run -d --name "$container" --network host --read-only --tmpfs /var/lib/tokenproxy:mode=1777 \
    --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 \
    -v "$work/config.yaml:/etc/tokenproxy/config.yaml:ro" \
    -e API_TOKEN=idle-token -e TOKENPROXY_HEALTH_ADDRESS=127.0.0.1:18483 "$@" "$image" >/dev/null
for _ in $(seq 1 50); do
    pm exec "$container" tokenproxy-healthcheck >/dev/null 2>&1 && break
    sleep 0.2
done
sleep 3

echo "image: $image  ($(pm image inspect --format '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1 / 1e6}'))  options: ${*:-none}"
echo "binary: $(pm exec "$container" stat -c %s /usr/local/bin/tokenproxy | awk '{printf "%.1f MB", $1 / 1e6}')"
pm exec "$container" grep -E '^(VmRSS|RssAnon|RssFile|Threads)' /proc/1/status
pm exec "$container" cat /proc/1/smaps_rollup | grep -E '^(Rss|Pss|Anonymous|Shared_Clean|Private_Clean|Private_Dirty)'
echo "resident KiB by mapping (file, or [anon]/[heap]/[stack]):"
pm exec "$container" cat /proc/1/smaps | awk '
    /^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "") ? "[anon]" : $6; next }
    /^Rss:/ { rss[name] += $2 }
    /^Anonymous:/ { anon[name] += $2 }
    END { for (n in rss) if (rss[n] > 0) printf "%8d %8d  %s\n", rss[n], anon[n], n }' | sort -rn |
    awk 'BEGIN { print "     Rss     Anon  mapping" } { print }'
echo "the binary's own mappings (permissions, offset, resident KiB):"
pm exec "$container" cat /proc/1/smaps | awk '
    /^[0-9a-f]+-[0-9a-f]+ / { mine = ($6 ~ /tokenproxy$/); where = $2 " " $3; next }
    mine && /^Size:/ { size = $2 }
    mine && /^Rss:/ { printf "    %s  size %7d  Rss %7d\n", where, size, $2 }'
echo "start-up: 20 × tokenproxy check (wall time, seconds):"
pm exec "$container" bash -c '{ time (for i in $(seq 20); do tokenproxy check >/dev/null 2>&1; done); } 2>&1' | grep real
