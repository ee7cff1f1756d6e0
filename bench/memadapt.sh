#!/usr/bin/env bash
# Issue 4's benchmark: paper 002's Table 1 and Fig. 3 on this machine, with
# the C CG example (crates/memadapt/examples/c/cg.c) in a memgang pool.
#
#   sudo flock /tmp/memgang-kernel.lock bench/memadapt.sh [OUT_DIR]
#
# Sized down to run in about 15 minutes: an n^3 grid (N, default 70: a
# 105 MB matrix in P = 10 panels and 14 MB of vectors), a pool of 1.3 times
# one job's footprint. Every job has its own copy of the matrix file, on
# the disk (not tmpfs), dropped from the page cache before the runs, so
# that its cache is charged to the pool and competes there.
#
#   alone   each mode alone in the pool (no pressure), SOLO seconds
#   table1  every pair of {incore, ooc, mmap, mema}: the row's job starts,
#           the column's 9 s later (T1 and T1 - 9 seconds of solving,
#           each killed 30 s after that if an iteration never ends);
#           seconds per iteration of each once both run and have settled
#   fig3    mema and fixed panel counts against a competing memory load
#           (memgang-workload, writing its pages in a loop) of LOADS x
#           the footprint, the solver starting 3 s after the load
#   signal  mema and mema --rss-only (the paper's Figure 2 alone, without
#           the mincore check before re-measuring the other memory): a
#           competitor locks 0.9 x the footprint from 8 s to 20 s; s/it
#           and panels in at the end, RECOVER seconds of solving
# PARTS (default "alone table1 fig3 signal") chooses. bench/memadapt_table.py
# prints the tables from the logs; the signal runs' timelines are drawn by
# bench/memadapt_plot.py as signal-*.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup memadapt "${1:-}"
cargo build --release -p memadapt --quiet

N=${N:-70}
P=${P:-10}
SOLO=${SOLO:-15}
T1=${T1:-25}
FIG3=${FIG3:-15}
LOADS=${LOADS:-0 0.3 0.6 0.9}
FIXED=${FIXED:-10 5 2}
RECOVER=${RECOVER:-35}
read -r -a modes <<< "${MODES:-incore ooc mmap mema}"
root=$(pwd)
out=$(cd "$out" && pwd)
cg=$out/work/cg
# The solver, the job wrapper and the matrix files (not kept: see the end).
mkdir -p "$out/work"
cc -std=c99 -O2 -I crates/memadapt/include crates/memadapt/examples/c/cg.c \
  target/release/libmemadapt.a -lpthread -ldl -lm -o "$cg"
workload=$root/target/release/memgang-workload

# job.sh LIMIT CMD...: CMD with line-buffered output (the tables read
# every iteration's line, also of a job stopped at LIMIT seconds).
cat > "$out/work/job.sh" <<'EOF'
#!/bin/sh
limit=$1; shift
timeout -s KILL "$limit" stdbuf -oL "$@"
echo "job: exit $?"
exit 0
EOF
chmod +x "$out/work/job.sh"

step "data: $N^3 grid, $P panels"
"$cg" create "$out/work/a.panels" "$N" "$P" > /dev/null
cp "$out/work/a.panels" "$out/work/b.panels"
sync "$out/work/a.panels" "$out/work/b.panels"
# Out of the page cache (this file's pages only, not the machine's).
uncache() { dd if="$1" iflag=nocache count=0 status=none; }
matrix=$(stat -c %s "$out/work/a.panels")
vectors=$((5 * 8 * N * N * N))
footprint=$((matrix + vectors))
pool_mib=$((footprint * 13 / 10 >> 20))
echo "matrix $((matrix >> 20)) MiB + vectors $((vectors >> 20)) MiB = footprint $((footprint >> 20)) MiB; pool ${pool_mib} MiB" |
  tee "$out/sizes.txt"

# experiment NAME ARRIVAL2 CMD1 -- CMD2: one or two jobs a (at 0) and b
# (at ARRIVAL2) with cosched (both run at once, the kernel shares the pool).
experiment() {
  local name=$1 arrival=$2 j=a arr=0s arg cmd=""
  shift 2
  {
    echo "name = \"$name\""
    echo "pool_memory = \"${pool_mib}M\""
    for arg in "$@" --; do
      if [ "$arg" = -- ]; then
        echo "[[job]]"
        echo "name = \"$j\""
        echo "command = [${cmd%, }]"
        echo "arrival = \"$arr\""
        j=b arr=$arrival cmd=""
      else
        cmd+="\"$arg\", "
      fi
    done
  } > "$out/$name.toml"
  for f in "$out"/work/*.panels; do uncache "$f"; done
  step "$name"
  "$bin" run "$out/$name.toml" --policy cosched --baseline none \
    --json "$out/$name.json" --logs "$out/logs/$name" | tail -n 1
}

solve() { # solve FILE MODE SECONDS [ARGS...]: the command of one solver job
  local file=$1 mode=$2 s=$3
  shift 3
  echo "$out/work/job.sh" $((s + 30)) "$cg" "$mode" "$out/work/$file.panels" --seconds "$s" "$@"
}

parts=" ${PARTS:-alone table1 fig3 signal} "
[[ $parts == *" alone "* ]] &&
for m in "${modes[@]}"; do
  # shellcheck disable=SC2046
  experiment "alone-$m" 0s $(solve a "$m" "$SOLO")
done
[[ $parts == *" table1 "* ]] &&
for ((i = 0; i < ${#modes[@]}; i++)); do
  for ((k = i; k < ${#modes[@]}; k++)); do
    first=${modes[i]} second=${modes[k]}
    # shellcheck disable=SC2046
    experiment "pair-$first-$second" 9s $(solve a "$first" "$T1") -- $(solve b "$second" $((T1 - 9)))
  done
done
[[ $parts == *" fig3 "* ]] &&
for load in $LOADS; do
  mib=$(awk -v f="$footprint" -v l="$load" 'BEGIN { printf "%d", f * l / 1048576 }')
  hog="$out/work/job.sh $((FIG3 + 10)) $workload --mib $mib --pattern seq --iterations 1000000000 --quiet"
  for cfg in mema $FIXED; do
    args=() name=mema
    [ "$cfg" = mema ] || args=(--fixed "$cfg") name=fixed$cfg
    if [ "$mib" -eq 0 ]; then
      # shellcheck disable=SC2046
      experiment "fig3-$load-$name" 0s $(solve a mema "$FIG3" "${args[@]}")
    else
      # shellcheck disable=SC2046,SC2086
      experiment "fig3-$load-$name" 3s $hog -- $(solve b mema "$FIG3" "${args[@]}")
    fi
  done
done

lock_mib=$((footprint * 9 / 10 >> 20))
[[ $parts == *" signal "* ]] &&
for variant in ${SIGNALS:-mema rss-only}; do
  args=(--timeline "$out/signal-$variant.csv")
  [ "$variant" = mema ] || args+=(--rss-only)
  # shellcheck disable=SC2046
  experiment "signal-$variant" 8s $(solve a mema "$RECOVER" "${args[@]}") -- \
    "$out/work/job.sh" 12 "$workload" --mib "$lock_mib" --pattern seq --iterations 1000000000 --lock --quiet
done

rm -rf "$out/work"
for csv in "$out"/signal-*.csv; do
  [ -f "$csv" ] || continue
  v=$(basename "$csv" .csv)
  python3 bench/memadapt_plot.py "$csv" "$out/$v.svg" \
    "memadapt CG ($v), a competitor locking 0.9 x the footprint in the grey span" --shade 8 20
done
python3 bench/memadapt_table.py "$out" | tee "$out/tables.txt"
