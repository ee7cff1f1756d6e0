#!/usr/bin/env bash
# memgangd against hostile users, as numbers (crates/cli/tests/hostile.rs
# asserts bounds on the same): a flood of 2 x 600 idle connections (the
# daemon's threads and CPU over 2 s, root's submit during it, a client
# sending a byte every 2 s) and a job writing 200 MB into each of its files
# (the daemon's peak memory). One run; the daemon gets systemd's default
# descriptor limit (1,024). Prints a table and the machine.
#   sudo bench/daemon_hostile.sh [OUT_DIR]
#   BIN_DIR=target/debug: binaries already built there (default: build
#   target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
daemon_bench_setup daemon_hostile memgang-bench "${1:-}"
command -v perl >/dev/null || { echo "needs perl" >&2; exit 1; }
cat > "$work/memgang.toml" <<CONF
state_dir = "$work/state"
socket = "$work/memgang.sock"
pool_memory = "256M"
swap_reserve = "0"
CONF
(ulimit -n 1024 && exec "$bin_dir/memgangd" --config "$work/memgang.toml") 2> "$work/memgangd.log" &
pid=$!
# Stopped by pid, never by name; its jobs have ended by then.
on_exit "kill -TERM $pid 2>/dev/null && wait $pid 2>/dev/null || true"
for _ in $(seq 100); do [ -S "$work/memgang.sock" ] && break; sleep 0.1; done
[ -S "$work/memgang.sock" ] || { cat "$work/memgangd.log" >&2; exit 1; }
# The table only: the daemon's log is shown when the run fails, not kept.
python3 bench/daemon_hostile.py "$work/memgang.sock" "$PWD/$bin_dir/memgang" "$pid" "${users[@]}" \
  >"$work/table.md" || { cat "$work/memgangd.log" >&2; exit 1; }
tee "$out/table.md" <"$work/table.md"
daemon_bench_machine | tee -a "$out/table.md"
echo "results in $out"
