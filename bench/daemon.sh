#!/usr/bin/env bash
# memgangd under a stream of short jobs: 1,000 submissions over the socket
# (submit latency p50/p99, submissions per second), the same jobs run to
# their end (jobs per second through admission, start and reaping), and
# `memgang submit` from the shell (latency including the client's start).
#   sudo bench/daemon.sh [OUT_DIR]        JOBS=1000 CLI_JOBS=100
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "bench/daemon.sh needs root (memgangd runs as root)" >&2; exit 1; }
ensure_toolchain
ensure_tools
cargo build --release --workspace --bins --quiet
out=${1:-bench/results/daemon-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
work=$(mktemp -d /tmp/memgang-bench-daemon.XXXXXX)
chmod 755 "$work"
pid=
finish() {
  # Stopped by pid, never by name; the state directory goes with it.
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap finish EXIT
cat > "$work/memgang.toml" <<CONF
state_dir = "$work/state"
socket = "$work/memgang.sock"
pool_memory = "1G"
swap_reserve = "0"
CONF
target/release/memgangd --config "$work/memgang.toml" 2> "$out/memgangd.log" &
pid=$!
for _ in $(seq 100); do [ -S "$work/memgang.sock" ] && break; sleep 0.1; done
[ -S "$work/memgang.sock" ] || { cat "$out/memgangd.log" >&2; exit 1; }
python3 bench/daemon_bench.py "$work/memgang.sock" "$PWD/target/release/memgang" \
  "${JOBS:-1000}" "${CLI_JOBS:-100}" "$out/daemon.json" | tee "$out/table.md"
nproc | xargs printf 'machine: %s CPUs, ' >> "$out/table.md"
uname -r >> "$out/table.md"
echo "results in $out"
