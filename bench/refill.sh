#!/usr/bin/env bash
# How a job touching its memory at random faults itself back in on this
# kernel's LRU after another job ran in its place (gang lru, slowed down to
# watch; crates/linux/examples/refill.rs): two processes of REFILL_MIB
# (700) MiB in one memory cgroup of REFILL_POOL (1024) MiB take turns of
# REFILL_PASSES (2) random passes over their memory, REFILL_TURNS (8)
# turns; per resume the pages it lacked, what a strict LRU gives a random
# order, and its faults per tenth of a pass. Root: swap and the cgroup
# (memgang-bench-refill-*), removed at exit.
#
#   sudo bench/refill.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup refill "${1:-}"
cargo build --release --quiet -p memgang-linux --example refill
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
target/release/examples/refill "${REFILL_MIB:-700}" "${REFILL_POOL:-1024}" "${REFILL_PASSES:-2}" "${REFILL_TURNS:-8}" | tee -a "$out/table.txt"
echo "results: $out"
