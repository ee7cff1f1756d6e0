#!/usr/bin/env bash
# The share of a resumed job's faults that evict its own pages against the
# size of the pool (memgang_linux::faults::own_share, from
# crates/linux/examples/own_share.rs): two jobs touching their memory at
# random take turns, a memory cgroup each under the pool, as memgang's
# gang lru runs them; `memgang calibrate` measures it at one pool size
# (1024/700 of a job) into its device file as `own_evict_share`, which the
# simulator's random lru page-in takes. Root: swap, and the groups
# (memgang-faults-*), removed after each measurement.
#
#   sudo bench/own_share.sh [OUT_DIR]     OWN_MIB=256 OWN_ROUNDS=2 OWN_POOLS="" (MiB each;
#                                         default: the pools of the 700 and 600 MiB pairs)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup own-share "${1:-}"
cargo build --release --quiet -p memgang-linux --example own_share

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
# shellcheck disable=SC2086
target/release/examples/own_share "${OWN_MIB:-256}" "${OWN_ROUNDS:-2}" ${OWN_POOLS:-} | tee -a "$out/table.txt"
echo "results: $out"
