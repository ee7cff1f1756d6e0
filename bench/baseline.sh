#!/usr/bin/env bash
# Baseline benchmark (issue 2): two jobs of 70% of a 1 GiB pool each, as
# seq, random and 2-rank variants, under batch, cosched and gang (quantum
# 10 s, paging left to the kernel: what Slurm's gang scheduling does; once
# with the cgroup freezer, once with SIGSTOP/SIGCONT as Slurm). Prints makespan, switching overhead and fairness per
# policy, all from one run on this machine. Later mechanisms must beat the
# gang rows.
#
#   sudo bench/baseline.sh [OUT_DIR]
#
# Needs root. Creates an 8G swap file if the machine has no swap, and
# removes it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

[ "$(id -u)" -eq 0 ] || { echo "bench/baseline.sh needs root (cgroups, swap)" >&2; exit 1; }
ensure_toolchain
ensure_tools
cargo build --release --workspace --bins --quiet
bin=target/release/memgang
out=${1:-bench/results/baseline-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

if [ -z "$(swapon --noheadings --show=NAME)" ]; then
  trap '"$bin" testbed down >/dev/null' EXIT
  "$bin" testbed up --swap 8G | tee "$out/testbed.txt"
fi

POOL=1G
MIB=700          # 70% of the pool per job: one fits, two do not
QUANTUM=10s
# Iterations and compute per page chosen so that each job alone runs about
# 30 s: a few 10 s quanta each, as in the paper's runs of several quanta.
declare -A ARGS=(
  [seq]="--pattern seq --iterations ${SEQ_ITERS:-40} --compute ${SEQ_COMPUTE:-4}"
  [random]="--pattern random --iterations ${RANDOM_ITERS:-30} --compute ${RANDOM_COMPUTE:-4}"
  [2rank]="--pattern stencil --iterations ${RANK_ITERS:-80} --compute ${RANK_COMPUTE:-4} --ranks 2"
)

for variant in seq random 2rank; do
  ranks=1; [ "$variant" = 2rank ] && ranks=2
  exp="$out/$variant.toml"
  {
    echo "name = \"$variant\""
    echo "pool_memory = \"$POOL\""
    echo "quantum = \"$QUANTUM\""
    seed=0
    for j in a b; do
      seed=$((seed + 1))
      cmd=$(printf '"%s", ' memgang-workload --mib $MIB ${ARGS[$variant]} --seed $seed)
      echo "[[job]]"
      echo "name = \"$j\""
      echo "command = [${cmd%, }]"
      echo "ranks = $ranks"
      echo "memory = \"${MIB}M\""
    done
  } > "$exp"
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
