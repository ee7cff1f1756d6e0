#!/usr/bin/env bash
# Demand faults measured on the fault path (bench/fault_rate.py): a lone
# process's swapped-out pages touched back one at a time, in a random
# order and in order, against the disk's random 4 KiB reads per second at
# depth 1 (`memgang testbed bandwidth --random-for`, random-reads.json),
# the rate the simulator's lru page-in charges a random toucher. Root:
# swap and a cgroup v1 memory group (memgang-faultrate), both removed at
# exit.
#
#   sudo bench/fault_rate.sh [OUT_DIR]     FAULT_MIB=512 FAULT_ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup fault-rate "${1:-}"
memcg=/sys/fs/cgroup/memory
[ -d "$memcg" ] || { echo "bench/fault_rate.sh: needs cgroup v1's memory hierarchy at $memcg" >&2; exit 1; }
cg=$memcg/memgang-faultrate
mkdir -p "$cg"
on_exit 'rmdir '"$cg"' 2>/dev/null || true'

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("disk: random 4 KiB reads %.0f/s at depth 1, %.0f/s at depth 8 (O_DIRECT)" % (r["random_read_iops"], r.get("queue_read_iops", 0)))' \
  "$out/random-reads.json" | tee -a "$out/table.txt"
# The Python process joins the group before it maps anything.
(echo "$BASHPID" > "$cg/cgroup.procs"
 exec env FAULT_RATE_CG="$cg" FAULT_RATE_DISK_IOPS="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["random_read_iops"])' "$out/random-reads.json")" \
   python3 bench/fault_rate.py "${FAULT_MIB:-512}" "${FAULT_ROUNDS:-3}") | tee -a "$out/table.txt"
echo "results: $out"
