#!/usr/bin/env bash
# Demand faults measured on the fault path (memgang_linux::faults, from
# crates/linux/examples/fault_rate.rs): a lone process's swapped-out pages
# touched back one at a time, in a random order and in order, against the
# disk's random 4 KiB reads per second at depth 1 (`memgang testbed
# bandwidth --random-for`, random-reads.json), the rate the simulator's
# lru page-in charges a random toucher. `memgang calibrate` takes the same
# measurement into its device file. Root: swap, and a memory cgroup per
# pass (memgang-faults-*), removed after it.
#
#   sudo bench/fault_rate.sh [OUT_DIR]     FAULT_MIB=512 FAULT_ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup fault-rate "${1:-}"
cargo build --release --quiet -p memgang-linux --example fault_rate

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
disk_iops=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("disk: random 4 KiB reads %.0f/s at depth 1, %.0f/s at depth 8 (O_DIRECT)" % (r["random_read_iops"], r.get("queue_read_iops", 0)), file=sys.stderr)
print(r["random_read_iops"])' "$out/random-reads.json" 2> >(tee -a "$out/table.txt" >&2))
FAULT_RATE_DISK_IOPS=$disk_iops target/release/examples/fault_rate "${FAULT_MIB:-512}" "${FAULT_ROUNDS:-3}" | tee -a "$out/table.txt"
echo "results: $out"
