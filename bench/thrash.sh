#!/usr/bin/env bash
# Cosched out of core at one memory fraction, with jobs of several sizes
# (issue 16): does the kernel's collapse follow the memory fraction, as the
# simulator's model has it, or the jobs' size? N jobs of TOTAL/N each in a
# POOL (default 1400M in 1G: a memory fraction of 0.73, as the 7-job run
# of bench/hybrid.sh that finished and the 2-job pair of
# bench/adaptive.sh that collapsed), seq sweeps, each about JOB_S seconds
# alone; batch, then cosched stopped after TIMEOUT_X times batch. Prints
# per N the makespans, the swap traffic and each job's end.
#
#   sudo bench/thrash.sh [OUT_DIR]
#   N="2 3 4 7" TOTAL_MIB=1400 POOL_MEM=1G JOB_S=10 TIMEOUT_X=4 to choose
#
# memgang-workload's seq sweep takes about 0.5 s per 700M iteration alone
# on this machine (bench/results/adaptive-access-20261127: 40 in 21 s), so
# a job of M MiB gets JOB_S / (0.5 * M / 700) iterations.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup thrash "${1:-}"
SIZES=${N:-2 3 4 7}
TOTAL_MIB=${TOTAL_MIB:-1400}
POOL_MEM=${POOL_MEM:-1G}
JOB_S=${JOB_S:-10}
TIMEOUT_X=${TIMEOUT_X:-4}

for n in $SIZES; do
  mib=$((TOTAL_MIB / n))
  iters=$(python3 -c "print(max(1, round($JOB_S / (0.5 * $mib / 700))))")
  exp="$out/n$n.toml"
  write_jobs "$exp" "n$n" "$POOL_MEM" "" "$n" "$mib" 1 --pattern seq --iterations "$iters" --compute 4
  step "n=$n, $n jobs of ${mib}M, $iters iterations / batch"
  "$bin" run "$exp" --policy batch --json "$out/n$n-batch.json" --logs "$out/logs/n$n-batch" | tail -n 1
  limit=$(stop_after "$out/n$n-batch.json" "$TIMEOUT_X")
  step "n=$n / cosched (stopped after ${limit}s)"
  timeout --signal=TERM --kill-after=60 "$limit" \
    "$bin" run "$exp" --policy cosched --baseline "$out/n$n-batch.json" \
    --json "$out/n$n-cosched.json" --logs "$out/logs/n$n-cosched" | tail -n 1 || true
done

step "cosched at one memory fraction, jobs of several sizes ($POOL_MEM pool, ${TOTAL_MIB}M in all; $(uname -r), $(nproc) CPUs)"
python3 - "$out" $SIZES <<'PY' | tee "$out/table.txt"
import json, os, sys
out, sizes = sys.argv[1], sys.argv[2:]
print(f"{'n':>2} {'MiB':>5} {'fraction':>8} {'batch_s':>8} {'cosched_s':>10} {'x_batch':>8} {'swap_GiB':>8}  job ends, s, in the order started ('-': not ended)")
for n in sizes:
    b = json.load(open(os.path.join(out, f"n{n}-batch.json")))
    c = json.load(open(os.path.join(out, f"n{n}-cosched.json")))
    mib = c["jobs"][0]["declared_memory_bytes"] / 2**20
    frac = c["pool_memory_bytes"] / sum(j["declared_memory_bytes"] for j in c["jobs"])
    mark = ">" if c["interrupted"] else ""
    gib = (c["swap_in_pages"] + c["swap_out_pages"]) * os.sysconf("SC_PAGE_SIZE") / 2**30
    ends = " ".join("-" if j["finish_s"] is None else f"{j['finish_s']:.1f}" for j in c["jobs"])
    took = mark + f"{c['makespan_s']:.1f}"
    x = mark + f"{c['makespan_s'] / b['makespan_s']:.2f}"
    print(f"{n:>2} {mib:>5.0f} {frac:>8.2f} {b['makespan_s']:>8.1f} {took:>10} {x:>8} {gib:>8.2f}  {ends}")
print("(fraction: the pool over the jobs' memory; x_batch: cosched over batch; '>': stopped, a bound)")
PY
echo "results: $out"
