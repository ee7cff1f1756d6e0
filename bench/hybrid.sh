#!/usr/bin/env bash
# Issue 5's benchmark: paper 001 Fig. 7/9 on this node. n = 1..9
# simultaneous jobs of about 20% of the pool each (about four fit), a
# compute-heavy variant and a 2-rank variant; the makespan of batch,
# cosched, gang (so/ao/ai, the best switch in docs/switching.md) and hybrid
# with each overlap policy, all in one run; and paper 001 Fig. 8's major
# faults per minute per job for cosched at n = 7 and 9; then the table and
# a makespan-vs-n plot (OUT_DIR/makespan.svg).
#
#   sudo bench/hybrid.sh [--quick] [OUT_DIR]
#   N="1 2 3" VARIANTS="compute 2rank" POLICIES="..." Q=10s TIMEOUT=900
#   JOB_ITERS=40 (iterations per job: 40 runs about 8 s alone) to choose
#   TIMEOUT_X=3: stop a run after 3 times its batch makespan instead (at
#   least 60 s): a cosched collapse is shown as ">T" without costing hours
#
# --quick: a 512M pool, jobs of 100M that run ~3 s alone, n = 1 3 5 7, the
# compute variant only, Fig. 8 at n = 5 and 7: a few minutes, for a first
# look, not for the docs' targets.
#
# A run that outlasts TIMEOUT seconds is stopped with SIGTERM (memgang ends
# it cleanly and marks it interrupted): cosched out of core can take many
# times the batch makespan (paper 001: twenty times at n = 9).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
source bench/lib.sh
bench_setup hybrid "${1:-}"

if [ -n "$quick" ]; then
  POOL=512M MIB=100 JOB_ITERS=${JOB_ITERS:-20} N=${N:-1 3 5 7} VARIANTS=${VARIANTS:-compute}
  FIG8=${FIG8:-5 7} TIMEOUT=${TIMEOUT:-120} QUANTUM=${Q:-3s}
else
  POOL=1G MIB=200 JOB_ITERS=${JOB_ITERS:-40} N=${N:-1 2 3 4 5 6 7 8 9} VARIANTS=${VARIANTS:-compute 2rank}
  FIG8=${FIG8:-7 9} TIMEOUT=${TIMEOUT:-1800} QUANTUM=${Q:-10s}
fi
POLICIES=${POLICIES:-batch cosched gang hybrid-sequential hybrid-overlapped hybrid-prefetch}
declare -A WORK=(
  [compute]="--pattern seq --iterations $JOB_ITERS --compute 4"
  [2rank]="--pattern stencil --iterations $JOB_ITERS --compute 4 --ranks 2"
)

# write_n VARIANT N FILE: N jobs j1..jN of the variant, declared at their size.
write_n() {
  local variant=$1 n=$2 ranks=1
  [ "$variant" = 2rank ] && ranks=2
  # shellcheck disable=SC2086 # WORK holds the variant's several arguments
  write_jobs "$3" "$variant-n$n" "$POOL" "$QUANTUM" "$n" "$MIB" "$ranks" ${WORK[$variant]}
}

for variant in $VARIANTS; do
  for n in $N; do
    exp="$out/$variant-n$n.toml"
    write_n "$variant" "$n" "$exp"
    for p in $POLICIES; do
      name=$variant-n$n-$p
      args=(--policy "${p%%-*}")
      case $p in
        gang) args+=(--switch so/ao/ai) ;;
        hybrid-*) args+=(--overlap "${p#hybrid-}") ;;
      esac
      [ "$p" != batch ] && [ -f "$out/$variant-n$n-batch.json" ] &&
        args+=(--baseline "$out/$variant-n$n-batch.json")
      limit=$TIMEOUT
      if [ -n "${TIMEOUT_X:-}" ] && [ "$p" != batch ] && [ -f "$out/$variant-n$n-batch.json" ]; then
        limit=$(stop_after "$out/$variant-n$n-batch.json" "$TIMEOUT_X")
      fi
      step "$variant n=$n $p (stopped after ${limit}s)"
      timeout --signal=TERM --kill-after=60 "$limit" \
        "$bin" run "$exp" "${args[@]}" --json "$out/$name.json" --logs "$out/logs/$name" |
        tail -n 2 || true
    done
  done
done

step "hybrid scheduling: $POOL pool, jobs of ${MIB}M, quantum $QUANTUM ($(uname -r), $(nproc) CPUs${quick:+, quick run})"
FIG8="$FIG8" python3 bench/hybrid_table.py "$out" | tee "$out/table.txt"
# Plotting needs neither root nor the lock: this tree's memgang draws it.
target/release/memgang plot makespan "$out"/*-n*-*.json -o "$out/makespan.svg"
