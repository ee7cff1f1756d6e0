#!/usr/bin/env bash
# Baseline benchmark (issue 2): two jobs of 70% of a 1 GiB pool each, as
# seq, random and 2-rank variants, under batch, cosched and gang (quantum
# 10 s, paging left to the kernel: what Slurm's gang scheduling does; once
# with the cgroup freezer, once with SIGSTOP/SIGCONT as Slurm).
# Prints makespan, switching overhead and fairness per policy, all from one
# run on this machine. Later mechanisms must beat the gang rows.
#
#   sudo bench/baseline.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup baseline "${1:-}"

for variant in seq random 2rank; do
  exp="$out/$variant.toml"
  write_experiment "$variant" "$exp"
  # gang twice: with the cgroup freezer (memgang's default) and with
  # SIGSTOP/SIGCONT (what Slurm does); paging is left to the kernel in both.
  for run in batch cosched gang gang-signals; do
    step "$variant / $run"
    flags=(--policy "${run%-signals}" --baseline "$out/$variant-batch.json")
    [ "$run" = batch ] && flags=(--policy batch)
    [ "$run" = gang-signals ] && flags+=(--signals)
    "$bin" run "$exp" "${flags[@]}" \
      --json "$out/$variant-$run.json" --logs "$out/logs/$variant-$run" | tail -n 1
  done
done

step "baseline: $POOL pool, 2 jobs x ${MIB}M, quantum $QUANTUM ($(uname -r), $(nproc) CPUs)"
"$bin" report "$out"/{seq,random,2rank}-{batch,cosched,gang,gang-signals}.json | tee "$out/table.txt"
