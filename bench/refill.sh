#!/usr/bin/env bash
# How a job touching its memory at random faults itself back in on this
# kernel's LRU after another job ran in its place (gang lru, slowed down to
# watch; crates/linux/examples/refill.rs): two processes of REFILL_MIB
# (700) MiB in one memory cgroup of REFILL_POOL (1024) MiB take turns;
# per resume the pages it lacked, what a strict LRU gives a random order,
# and its faults per tenth of a pass. Three setups:
# 1. one group for both, turns of 2 passes, touching as fast as it can;
# 2. a group each under the pool (as memgang runs jobs), the same turns;
# 3. a group each, turns of REFILL_QUANTUM_S (10) s and REFILL_COMPUTE_US
#    (3.6) us of CPU per page touched, as memgang-workload's random pairs
#    (0.645 s per pass over 700 MiB) under gang lru at 10 s quanta.
# Root: swap and the cgroups (memgang-bench-refill-*), removed at exit.
#
#   sudo bench/refill.sh [OUT_DIR]     REFILL_TURNS=8
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup refill "${1:-}"
cargo build --release --quiet -p memgang-linux --example refill
refill=target/release/examples/refill
mib=${REFILL_MIB:-700} pool=${REFILL_POOL:-1024} turns=${REFILL_TURNS:-8}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
step "1. one group, turns of 2 passes"
echo "## one group, turns of 2 passes" >> "$out/table.txt"
SEPARATE=0 "$refill" "$mib" "$pool" 2 "$turns" | tee -a "$out/table.txt"
step "2. a group each, turns of 2 passes"
echo "## a group each, turns of 2 passes" >> "$out/table.txt"
SEPARATE=1 "$refill" "$mib" "$pool" 2 "$turns" | tee -a "$out/table.txt"
q=${REFILL_QUANTUM_S:-10} c=${REFILL_COMPUTE_US:-3.6}
step "3. a group each, turns of $q s, $c us per page"
echo "## a group each, turns of $q s, $c us of CPU per page touched" >> "$out/table.txt"
SEPARATE=1 QUANTUM_S=$q COMPUTE_US=$c "$refill" "$mib" "$pool" 1000 $((turns + 2)) | tee -a "$out/table.txt"
echo "results: $out"
