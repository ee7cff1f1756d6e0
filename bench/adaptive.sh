#!/usr/bin/env bash
# Issue 3's benchmark: paper 000's adaptive paging mechanisms (Fig. 7, 9)
# on this kernel. Two jobs of 70% of a 1 GiB pool (seq, random and the
# 2-rank job), gang quanta 10 s and 30 s, each mechanism combination plus
# lru and batch, all in one run. The swap disk's bandwidth is measured at
# the start and at the end of the same run: the physical limit of a switch
# is its bytes out / write bandwidth + bytes in / read bandwidth.
#
#   sudo bench/adaptive.sh [OUT_DIR]
#   VARIANTS="seq random 2rank" QUANTA="10s 30s" SWITCHES="lru ai ..." to choose
#   POLICIES="cosched"   other policies than gang, once per variant and
#       scale, each stopped after TIMEOUT_X (4) times its batch makespan,
#       at least 60 s (cosched out of core can thrash for hours)
#   PAIR_MIB=600   jobs of that many MiB instead of 700
# Jobs run 3 quanta alone at any quantum (iterations scaled by q / 10 s).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup adaptive "${1:-}"

"$bin" testbed bandwidth --json > "$out/bandwidth-start.json"
for variant in ${VARIANTS:-seq random 2rank}; do
  for q in ${QUANTA:-10s 30s}; do
    # Jobs scaled to the quantum (x1 at 10 s, x3 at 30 s): alone each runs
    # about three quanta, so every quantum sees switches; each scale has
    # its own batch reference.
    scale=$(( ${q%s} / 10 )); [ "$scale" -ge 1 ] || scale=1
    name=$variant-x$scale
    exp="$out/$name.toml"
    if [ ! -f "$out/$name-batch.json" ]; then
      write_experiment "$variant" "$exp" "$scale" "$name"
      step "$name / batch"
      "$bin" run "$exp" --policy batch --json "$out/$name-batch.json" --logs "$out/logs/$name-batch" | tail -n 1
      for p in ${POLICIES:-}; do
        limit=$(stop_after "$out/$name-batch.json" "${TIMEOUT_X:-4}")
        step "$name / $p (stopped after ${limit}s)"
        timeout --signal=TERM --kill-after=60 "$limit" \
          "$bin" run "$exp" --policy "$p" --baseline "$out/$name-batch.json" \
          --json "$out/$name-$p.json" --logs "$out/logs/$name-$p" | tail -n 1 || true
      done
    fi
    for sw in ${SWITCHES:-lru ai so so/ao so/ao/bg so/ao/ai so/ao/ai/bg}; do
      run=$name-q$q-${sw//\//-}
      step "$name / gang q=$q $sw"
      "$bin" run "$exp" --policy gang --quantum "$q" --switch "$sw" \
        --baseline "$out/$name-batch.json" \
        --json "$out/$run.json" --logs "$out/logs/$run" | tail -n 1
    done
  done
done
"$bin" testbed bandwidth --json > "$out/bandwidth-end.json"

step "adaptive paging: $POOL pool, 2 jobs x ${MIB}M ($(uname -r), $(nproc) CPUs)"
python3 bench/adaptive_table.py "$out" | tee "$out/table.txt"
# Paper 000 Fig. 6: the paging activity of lru against all mechanisms.
for variant in ${VARIANTS:-seq random 2rank}; do
  traces=("$out/$variant-x1-q10s-lru.json" "$out/$variant-x1-q10s-so-ao-ai-bg.json")
  if [ -f "${traces[0]}" ] && [ -f "${traces[1]}" ]; then
    "$bin" plot trace "${traces[@]}" -o "$out/trace-$variant.svg"
  fi
done
