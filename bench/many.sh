#!/usr/bin/env bash
# Issue 47: many jobs on one node. For each N in COUNTS, N memgang-workload
# jobs of mixed sizes (MIX, GiB, taken in turn: 0.25, 0.5, 1, 2, 0.25, ...;
# seq and random patterns in turn), each running about JOB_S alone, all
# arriving at once, in a pool that holds about a third of them (at least
# the largest job and its margin): batch, then auto and hybrid at
# q = QUANTUM against that batch run. Then `memgang sim` on the same jobs
# (bench/sim_validate.py: the batch run's times, the run's disk rates and
# its own random read rates). Prints bench/many_table.py's tables:
# overhead, fairness and the simulator's prediction per N and policy, and
# each set switch's bytes and time (docs/scale.md).
#
# The swap file is the bench's own (what does not fit the pool and 2 GiB),
# removed on every way out; it refuses to run beside swap it did not make.
#   sudo flock /work/wt/root.lock bench/many.sh [OUT_DIR]
#        COUNTS="4 8 16" MIX="0.25 0.5 1 2" QUANTUM=60s JOB_S=120 POLICIES="auto hybrid"
set -euo pipefail
cd "$(dirname "$0")/.."
# Before bench/lib.sh, which sets its own QUANTUM (10s) for the older benches.
Q=${QUANTUM:-60s}
source bench/lib.sh
COUNTS=${COUNTS:-4 8 16}
MIX=${MIX:-0.25 0.5 1 2}
JOB_S=${JOB_S:-120}
POLICIES=${POLICIES:-auto hybrid}
own_swap_setup many
bin=${MEMGANG_BIN:-target/release/memgang}
wl=target/release/memgang-workload
out=${1:-bench/results/many-$(date -u +%Y%m%d)}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)

# The jobs of a set of N: MiB each, MIX in turn.
sizes_mib() {
  python3 - "$1" "$MIX" <<'PY'
import sys
n, mix = int(sys.argv[1]), [float(x) for x in sys.argv[2].split()]
print(" ".join(str(round(mix[i % len(mix)] * 1024)) for i in range(n)))
PY
}
# A third of their memory, at least the largest and its margin (memgang's
# ROOM_MARGIN is 32 MiB; 6% or 64 MiB more, as bench/scale.sh).
pool_mib() {
  python3 - "$@" <<'PY'
import sys
m = [int(x) for x in sys.argv[1:]]
big = max(m) + max(64, max(m) * 6 // 100)
print(max(big, sum(m) // 3))
PY
}
need=0
for n in $COUNTS; do
  # shellcheck disable=SC2046
  set -- $(sizes_mib "$n")
  total=$(( $(IFS=+; echo "$*") ))
  pool=$(pool_mib "$@")
  [ $((total - pool)) -gt "$need" ] && need=$((total - pool))
done
swap_mib=$((need + 2048))
avail_kib=$(df --output=avail /var/tmp | tail -n 1)
[ "$avail_kib" -gt $((swap_mib * 1024 + 1048576)) ] || { echo "bench/many.sh: /var/tmp has $((avail_kib / 1024)) MiB free, the swap file needs $swap_mib MiB" >&2; exit 1; }

{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"
own_swap many "$swap_mib" > "$out/testbed.txt"
cat "$out/testbed.txt"
"$bin" testbed bandwidth --json > "$out/bandwidth-start.json"
# The day's random read rates and readahead, for the simulator's lru paging.
"$bin" testbed bandwidth --json --random-for 2s --faults 128M > "$out/random-reads.json" 2>/dev/null ||
  rm -f "$out/random-reads.json"

# memgang-workload's seconds per GiB and iteration (seq, compute 1; random
# costs about as much a page here), from 1 and 4 iterations of 256 MiB.
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); python3 -c "print($t1 - $t0)"; }
t1=$(secs "$wl" --mib 256 --pattern seq --compute 1 --iterations 1 --quiet)
t4=$(secs "$wl" --mib 256 --pattern seq --compute 1 --iterations 4 --quiet)
per_gib_iter=$(python3 -c "print(max(0.05, ($t4 - $t1) / 3 / 0.25))")
echo "memgang-workload: $per_gib_iter s per GiB and iteration (seq, compute 1)" | tee -a "$out/machine.txt"

for n in $COUNTS; do
  # shellcheck disable=SC2046
  set -- $(sizes_mib "$n")
  pool=$(pool_mib "$@")
  exp=$out/many-n$n.toml
  {
    echo "name = \"many-n$n\""
    echo "pool_memory = \"${pool}M\""
    echo "quantum = \"$Q\""
    i=0
    for mib in "$@"; do
      i=$((i + 1))
      pattern=seq
      [ $((i % 2)) -eq 0 ] && pattern=random
      iters=$(python3 -c "import math; print(max(2, math.ceil($JOB_S / ($per_gib_iter * $mib / 1024))))")
      echo "[[job]]"
      echo "name = \"j$i\""
      echo "command = [\"memgang-workload\", \"--mib\", \"$mib\", \"--pattern\", \"$pattern\", \"--compute\", \"1\", \"--iterations\", \"$iters\", \"--seed\", \"$i\"]"
      echo "memory = \"${mib}M\""
    done
  } > "$exp"
  # Output to a file, not a pipe: a signal that ends the bench must not
  # leave memgang writing into a closed one.
  step "$n jobs ($*) MiB, pool ${pool}M: batch"
  "$bin" run "$exp" --policy batch --json "$out/many-n$n-batch.json" --logs "$out/logs/many-n$n-batch" \
    > "$out/logs/many-n$n-batch.out" 2>&1
  tail -n 1 "$out/logs/many-n$n-batch.out"
  for p in $POLICIES; do
    step "$n jobs: $p, q = $Q"
    "$bin" run "$exp" --policy "$p" --quantum "$Q" --baseline "$out/many-n$n-batch.json" \
      --json "$out/many-n$n-$p.json" --logs "$out/logs/many-n$n-$p" > "$out/logs/many-n$n-$p.out" 2>&1
    tail -n 1 "$out/logs/many-n$n-$p.out"
  done
done
"$bin" testbed bandwidth --json > "$out/bandwidth-end.json"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
# The simulator on the same jobs (no root needed; this tree's memgang).
python3 bench/sim_validate.py "$bin" "$out" > "$out/sim.txt"
python3 bench/many_table.py "$out" | tee "$out/table.txt"
echo "results in $out"
