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
daemon_bench_setup daemon_soak memgang-soak "${1:-}"
minutes=${SOAK_MINUTES:-30}
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
daemon_bench_machine | tee -a "$out/table.md"
echo "results in $out"
