#!/usr/bin/env bash
# memgangd soaked for SOAK_MINUTES (default 30): two users submit jobs of
# hostile sizes, cancel and list, jobs fail to start, the daemon is killed
# (-9) and restarted, retention forgets (keep_finished_jobs = 50); then
# the load stops and every job ends. Prints the daemon's resident memory,
# descriptors, memgang's cgroups and journal bytes after a warm-up and at
# the end, each beside its bound (bench/daemon_soak.py), and what the load
# did; exits non-zero if a bound was passed.
#   sudo SOAK_MINUTES=30 bench/daemon_soak.sh [OUT_DIR]
#   BIN_DIR=target/debug: binaries already built there (default: build
#   target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "bench/daemon_soak.sh needs root (memgangd, test users)" >&2; exit 1; }
ensure_toolchain
ensure_tools
command -v useradd >/dev/null || { echo "needs useradd (passwd)" >&2; exit 1; }
minutes=${SOAK_MINUTES:-30}
bin_dir=${BIN_DIR:-target/release}
[ -n "${BIN_DIR:-}" ] || cargo build --release --workspace --bins --quiet
out=${1:-bench/results/daemon-soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
work=$(mktemp -d /tmp/memgang-bench-soak.XXXXXX)
chmod 755 "$work"
on_exit 'rm -rf "$work"'
# Two unprivileged users of the bench's own (the tests use memgang-t-*).
users=(memgang-soak-a memgang-soak-b)
for u in "${users[@]}"; do
  useradd --no-create-home --shell /usr/sbin/nologin "$u" 2>/dev/null || id "$u" >/dev/null
  on_exit "userdel -f $u 2>/dev/null || true"
done
cat > "$work/memgang.toml" <<CONF
state_dir = "$work/state"
socket = "$work/memgang.sock"
pool_memory = "256M"
swap_reserve = "0"
quantum = "2s"
keep_finished_jobs = 50
CONF
# The driver starts, kills and restarts the daemon itself (by pid); the
# daemon's log is shown when the run fails, not kept.
python3 bench/daemon_soak.py "$work" "$PWD/$bin_dir" "$minutes" "${users[@]}" \
  >"$work/table.md" || { cat "$work/table.md"; tail -50 "$work/memgangd.log" >&2; exit 1; }
tee "$out/table.md" <"$work/table.md"
{
  printf 'machine: %s, %s CPUs, %s GiB, Linux %s; binaries: %s (git %s)\n' "$(hostname)" "$(nproc)" \
    "$(awk '/MemTotal/ {printf "%.1f", $2 / 2^20}' /proc/meminfo)" "$(uname -r)" "$bin_dir" \
    "$(git rev-parse --short HEAD)"
  date -u +'date: %Y-%m-%d %H:%M UTC'
} | tee -a "$out/table.md"
echo "results in $out"
