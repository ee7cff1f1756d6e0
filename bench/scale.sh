#!/usr/bin/env bash
# Issue 47: how a switch's cost grows with a job's size. A pair of jobs of
# SIZE GiB each in a pool that holds one, for each SIZE, of two kinds:
#   workload  memgang-workload, --pattern seq (small pages, every page
#             every iteration), as many iterations as make a job run
#             JOB_S alone or QUANTA of its grown quantum, whichever is more;
#   lammps    bench/apps/lammps.sh with its box scaled to SIZE (66^3 cells
#             are 382 MiB a job: bench/lib.sh), as many steps as the same.
# Each pair runs in batch, then under gang so/ao/ai with the growing
# quantum (q = QUANTUM, switching at most SHARE of the time), against that
# batch run. Beside them, measured in the same run: the disk's sequential
# limit (memgang testbed bandwidth, at the start and the end), and the
# kernel alone paging the same bytes (bench/paging_rate.sh's method:
# crates/linux/examples/paging_rate.rs on a synthetic process of SIZE on
# small pages; for LAMMPS its stopped ranks, in turn). Prints
# bench/scale_table.py's one table: per kind and size, the switch against
# the kernel alone and the disk, memgang's own steps and CPU per GiB moved,
# its peak RSS per GiB recorded, each step's share, the overhead against
# batch and the largest |unaccounted| of a job (docs/scale.md).
#
# The bench makes its own swap file (twice the largest pair and 2 GiB, on
# the disk of /var/tmp) and removes it on every way out; it refuses to run
# beside swap it did not make. The 8 GiB pair needs 18 GiB of swap on
# /var/tmp's disk (the kernel-alone row's own swap file, a little smaller,
# is removed before the pairs'), and 9 GiB of memory: check `df -h /var/tmp`
# and `free -g` first. Run it under the shared lock on a shared machine:
#   sudo flock /work/wt/root.lock bench/scale.sh [OUT_DIR]
#        SIZES="0.25 1 4 8" (GiB a job)   LAMMPS_SIZES (default SIZES; "" for none)
#        QUANTUM=60s SHARE=2.5% JOB_S=180 QUANTA=2 COMPUTE=1
set -euo pipefail
cd "$(dirname "$0")/.."
# Before bench/lib.sh, which sets its own QUANTUM (10s) for the older benches.
Q=${QUANTUM:-60s}
source bench/lib.sh
SIZES=${SIZES-0.25 1 4 8}
LAMMPS_SIZES=${LAMMPS_SIZES-$SIZES}
SHARE=${SHARE:-2.5%}
JOB_S=${JOB_S:-180}
QUANTA=${QUANTA:-2}
COMPUTE=${COMPUTE:-1}
own_swap_setup scale
[ -z "$LAMMPS_SIZES" ] || ensure_lammps
cargo build --release --quiet -p memgang-linux --example paging_rate
bin=${MEMGANG_BIN:-target/release/memgang}
rate=target/release/examples/paging_rate
wl=target/release/memgang-workload
out=${1:-bench/results/scale-$(date -u +%Y%m%d)}
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)

mib_of() { python3 -c 'import sys; print(round(float(sys.argv[1]) * 1024))' "$1"; }
largest=$(for s in $SIZES $LAMMPS_SIZES; do mib_of "$s"; done | sort -n | tail -n 1)
swap_mib=$((2 * largest + 2048))
# Disk: the bench's swap or the kernel-alone row's (twice a size and
# 256 MiB, removed before the bench's is made): never both at once, and
# the bench's is the larger.
need_kib=$((swap_mib * 1024))
avail_kib=$(df --output=avail /var/tmp | tail -n 1)
[ "$avail_kib" -gt "$need_kib" ] || { echo "bench/scale.sh: /var/tmp has $((avail_kib / 1024)) MiB free, the swap files need $((need_kib / 1024)) MiB: smaller SIZES, or free the disk" >&2; exit 1; }
mem_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
[ "$mem_kib" -gt $(((largest * 5 / 4 + 1024) * 1024)) ] || { echo "bench/scale.sh: $((mem_kib / 1024)) MiB available, a pool of the largest size needs $((largest * 5 / 4 + 1024)) MiB" >&2; exit 1; }

{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

# 1. The kernel alone, SIZE on small pages (the example makes and removes
#    its own swap file), before the bench's swap exists.
"$bin" testbed bandwidth --dir /var/tmp --json > "$out/bandwidth-start.json"
DISK_BPS=$(python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))
print("%s,%s" % (b["read_bytes_per_s"], b["write_bytes_per_s"]))' "$out/bandwidth-start.json")
export DISK_BPS
# A signal that ends the example before its own clean-up leaves its swap
# file: removed here too.
rate_pid=none
on_exit 'for f in /var/tmp/memgang-test-"$rate_pid"-*.swap; do [ -e "$f" ] && { swapoff "$f"; rm -f "$f"; }; done'
for s in $SIZES; do
  step "the kernel alone: $s GiB on small pages"
  "$rate" "$(mib_of "$s")" 1 small > "$out/kernel-workload-$s.txt" &
  rate_pid=$!
  wait "$rate_pid"
done

# 2. The bench's swap, removed on every way out (a cgroup or a job left by
#    a failed run is memgang's to clean: testbed down does).
own_swap scale "$swap_mib" > "$out/testbed.txt"
cat "$out/testbed.txt"

# How long memgang-workload takes per GiB and iteration (seq, COMPUTE):
# the difference between 1 and 4 iterations of 256 MiB, alone.
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); python3 -c "print($t1 - $t0)"; }
t1=$(secs "$wl" --mib 256 --pattern seq --compute "$COMPUTE" --iterations 1 --quiet)
t4=$(secs "$wl" --mib 256 --pattern seq --compute "$COMPUTE" --iterations 4 --quiet)
per_gib_iter=$(python3 -c "print(max(0.05, ($t4 - $t1) / 3 / 0.25))")
echo "memgang-workload: $per_gib_iter s per GiB and iteration (seq, compute $COMPUTE)" | tee -a "$out/machine.txt"

# A job's time alone: JOB_S, or QUANTA of the quantum its switches grow to
# (a switch's bytes at the disk's rates over SHARE, at most 10 quanta).
job_s() {
  python3 - "$1" "$out/bandwidth-start.json" "$Q" "$SHARE" "$JOB_S" "$QUANTA" <<'PY'
import json, sys
gib, bw, q, share, job_s, quanta = sys.argv[1:]
b = json.load(open(bw))
q = float(q.rstrip("s"))
switch = float(gib) * 2**30 * (1 / b["write_bytes_per_s"] + 1 / b["read_bytes_per_s"])
grown = min(10 * q, max(q, switch / (float(share.rstrip("%")) / 100)))
print(round(max(float(job_s), float(quanta) * grown)))
PY
}

# write_pair FILE NAME POOL_MIB MIB COMMAND_A COMMAND_B: two jobs a and b
# (each COMMAND the items of a TOML list) declared at MIB, in a pool of
# POOL_MIB.
write_pair() {
  local file=$1 name=$2 pool=$3 mib=$4
  {
    echo "name = \"$name\""
    echo "pool_memory = \"${pool}M\""
    echo "quantum = \"$Q\""
    printf '[[job]]\nname = "a"\ncommand = [%s]\nmemory = "%sM"\n' "$5" "$mib"
    printf '[[job]]\nname = "b"\ncommand = [%s]\nmemory = "%sM"\n' "$6" "$mib"
  } > "$file"
}

# run_pair KIND SIZE FILE: its batch run, then gang so/ao/ai with the
# growing quantum against it.
# Their output goes to a file, not a pipe: a signal that ends the bench
# must not leave memgang writing into a closed one.
run_pair() {
  local kind=$1 s=$2 exp=$3
  step "$kind $s GiB: batch"
  "$bin" run "$exp" --policy batch --json "$out/$kind-$s-batch.json" --logs "$out/logs/$kind-$s-batch" \
    > "$out/logs/$kind-$s-batch.out" 2>&1
  tail -n 1 "$out/logs/$kind-$s-batch.out"
  step "$kind $s GiB: gang so/ao/ai, q = $Q growing while switching is over $SHARE"
  "$bin" run "$exp" --policy gang --quantum "$Q" --switch so/ao/ai --max-switch-share "$SHARE" \
    --baseline "$out/$kind-$s-batch.json" --json "$out/$kind-$s-gang.json" --logs "$out/logs/$kind-$s-gang" \
    > "$out/logs/$kind-$s-gang.out" 2>&1
  tail -n 1 "$out/logs/$kind-$s-gang.out"
}

pool_of() { echo $(($1 + ($1 * 6 / 100 > 64 ? $1 * 6 / 100 : 64))); }

for s in $SIZES; do
  mib=$(mib_of "$s")
  iters=$(python3 -c "import math; print(max(2, math.ceil($(job_s "$s") / ($per_gib_iter * $s))))")
  cmd() { printf '"memgang-workload", "--mib", "%s", "--pattern", "seq", "--compute", "%s", "--iterations", "%s", "--seed", "%s"' "$mib" "$COMPUTE" "$iters" "$1"; }
  write_pair "$out/workload-$s.toml" "workload-$s" "$(pool_of "$mib")" "$mib" "$(cmd 1)" "$(cmd 2)"
  run_pair workload "$s" "$out/workload-$s.toml"
done

# LAMMPS: the box whose job is SIZE, the steps for its time, and the kernel
# alone on a job of it stopped after its set-up (its ranks in turn). Its
# seconds per step and atom: the difference between 10 and 50 steps of a
# 40^3 box (4 atoms a cell), alone.
if [ -n "$LAMMPS_SIZES" ]; then
  l1=$(secs bash bench/apps/lammps.sh 40 10)
  l5=$(secs bash bench/apps/lammps.sh 40 50)
  per_atom_step=$(python3 -c "print(max(1e-8, ($l5 - $l1) / 40 / (4 * 40 ** 3)))")
  echo "LAMMPS: $per_atom_step s per atom and step (2 ranks)" | tee -a "$out/machine.txt"
fi
memcg=/sys/fs/cgroup/memory
group=memgang-bench-scale-lammps-$$
stop_lammps() {
  local p
  for p in $(cat "$memcg/$group/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do [ -z "$(cat "$memcg/$group/cgroup.procs" 2>/dev/null)" ] && break; sleep 0.1; done
  rmdir "$memcg/$group" 2>/dev/null || true
}
on_exit stop_lammps
for s in $LAMMPS_SIZES; do
  mib=$(mib_of "$s")
  side=$(python3 -c "print(round(66 * ($mib / 382) ** (1 / 3)))")
  steps=$(python3 -c "import math; print(max(20, math.ceil($(job_s "$s") / ($per_atom_step * 4 * $side ** 3))))")
  if [ -d "$memcg" ]; then
    step "the kernel alone: LAMMPS $side^3 cells ($s GiB), its ranks stopped after their set-up"
    mkdir "$memcg/$group"
    tmp=$(mktemp -d /tmp/memgang-bench-scale.XXXXXX)
    on_exit 'rm -rf "$tmp"'
    TMPDIR=$tmp bash -c "echo \$\$ > $memcg/$group/cgroup.procs; exec bash bench/apps/lammps.sh $side 100000" \
      > "$out/logs/lammps-$s-alone.log" 2>&1 &
    disown
    # Set up once its memory stops growing (checked every 5 s, at most 30
    # minutes).
    last=0
    for _ in $(seq 360); do
      sleep 5
      [ -n "$(cat "$memcg/$group/cgroup.procs")" ] || { echo "LAMMPS ended before its set-up: $out/logs/lammps-$s-alone.log" >&2; exit 1; }
      now=$(awk '/^total_rss / {print $2}' "$memcg/$group/memory.stat")
      [ "$now" -gt $((64 << 20)) ] && [ "$now" -le $((last + last / 50)) ] && break
      last=$now
    done
    ranks=$(for p in $(cat "$memcg/$group/cgroup.procs"); do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = lmp ] && echo "$p"; done | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -STOP $ranks
    sleep 0.5
    # shellcheck disable=SC2086
    "$rate" pids "$group" $ranks 2>>"$out/logs/lammps-$s-alone.log" > "$out/kernel-lammps-$s.txt"
    stop_lammps
    rm -rf "$tmp"
  fi
  cmd=$(printf '"%s/bench/apps/lammps.sh", "%s", "%s"' "$PWD" "$side" "$steps")
  write_pair "$out/lammps-$s.toml" "lammps-$s" "$(pool_of "$mib")" "$mib" "$cmd" "$cmd"
  run_pair lammps "$s" "$out/lammps-$s.toml"
done

"$bin" testbed bandwidth --json > "$out/bandwidth-end.json"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
python3 bench/scale_table.py "$out" | tee "$out/table.txt"
echo "results in $out"
