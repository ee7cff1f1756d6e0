#!/usr/bin/env bash
# Issue 6's speed benchmark: `memgang sim` on synthetic traces of 10k, 100k
# and 1M jobs on 1,024 nodes of 64G, under gang (60 s quantum, switch
# SWITCH, default ao/ai) and hybrid, and issue 16's overloaded row (below);
# prints events, wall time, events/s, jobs/s, simulated days per
# wall hour, peak memory (maximum resident set, from /usr/bin/time -v), and
# the CPU time (user + system) with events per CPU second: on a shared
# machine the wall time also counts the other processes' turns; and the
# job-node actions per event (a job started, suspended, made room for or
# resumed, once per node of it): the engine's work per event, which a
# switch of many wide jobs makes large; and the switches, with the node
# actions per switch (a gang row's nodes, a hybrid set's jobs' nodes).
# No root needed: the simulator touches no kernel feature.
#
#   bench/sim_speed.sh [OUT_DIR]
#   JOBS="10000 100000" (" ": the overloaded rows only) POLICIES="gang" GAP=30s MEM=2G SWITCH=lru TIMEOUT=900 to choose
#   OVER_JOBS=100000 (0: no overloaded row)  BIN=path/to/memgang (no build)
#
# The generator: Poisson arrivals (mean gap GAP), Pareto run times (mean
# 10 min, capped at 100x: about 565 s) and memory per rank (mean MEM,
# capped at the node's 64G), widths powers of two up to 64 nodes (mean
# 127/7 = 18.1), seed 1. The offered load is 18.1 x 565 s / (GAP x 1024
# nodes): about 0.33 of the cluster at GAP=30s, before paging.
#
# MEM=2G, not 8G: a gang switch lasts as long as its slowest node pages
# the outgoing job out and the incoming one in, so the Pareto tail (jobs
# near the 64G cap) sets it. At 8G per rank, once the trace first needs a
# second row (past about 190,000 jobs) the switches cost about as much as
# the 60 s quantum, the cluster computes less than the offered 0.33, and
# jobs pile up for good: that measures an overloaded cluster, not the
# simulator (docs/sim.md). At 2G gang still time-slices, and drains.
# SWITCH=lru pages resumed jobs back in by demand faults (docs/sim.md
# has its rows). A run that outlasts TIMEOUT seconds is stopped and its
# row says so.
#
# The overloaded row (cluster 256x8G): OVER_JOBS jobs from the same
# generator on 256 nodes of 8G, 1G per rank, a gap of 40 s: an offered
# load of 18.1 x 565 s / (40 s x 256) = 1.0 before paging, so with the
# switches' paging the cluster falls behind and thousands of jobs are
# alive at once (gang about 13,000, hybrid more: its set switches page
# more). It measures the engine when the policies' matrix and sets are
# large, not a cluster that drains.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
sim_bench_bin sim_speed
out=${1:-bench/results/sim_speed-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
JOBS=${JOBS:-10000 100000 1000000}
POLICIES=${POLICIES:-gang hybrid}
GAP=${GAP:-30s}
MEM=${MEM:-2G}
SWITCH=${SWITCH:-ao/ai}
TIMEOUT=${TIMEOUT:-900}
OVER_JOBS=${OVER_JOBS:-100000}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}')G; one simulation at a time, one core each" | tee "$out/machine.txt"
printf '%-8s %-8s %-7s %11s %8s %11s %9s %14s %8s %10s %6s %12s %12s %9s %15s\n' \
  jobs cluster policy events wall_s events/s jobs/s sim_days/hour peak_MiB peak_alive cpu_s events/cpu_s node_act/event switches node_act/switch | tee "$out/table.txt"
# One row: JOBS CLUSTER_LABEL POLICY then the generator's and cluster's flags.
row() {
  local n=$1 label=$2 p=$3
  shift 3
  local name=$p-$n-$label
  if timeout "$TIMEOUT" /usr/bin/time -v -o "$out/$name.time" "$bin" sim --generate "$n" \
    --policy "$p" --switch "$SWITCH" --quantum 60s --max-ranks 64 --seed 1 "$@" \
    --json "$out/$name.json" >"$out/$name.txt" 2>&1; then
    python3 - "$out/$name.json" "$out/$name.time" "$n" "$p" "$label" "$(cpu_seconds "$out/$name.time")" <<'PY' | tee -a "$out/table.txt"
import json, re, sys
r = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
# The CPU time (scripts/lib.sh cpu_seconds) is what the simulation itself
# took; the wall time on a shared machine counts the others' turns too.
cpu = float(sys.argv[6])
days_per_hour = r["makespan_s"] / 86400 / (r["wall_s"] / 3600)
print(f'{sys.argv[3]:<8} {sys.argv[5]:<8} {sys.argv[4]:<7} {r["events"]:>11} {r["wall_s"]:>8.2f} {r["events_per_s"]:>11.0f} '
      f'{r["jobs"] / r["wall_s"]:>9.0f} {days_per_hour:>14.0f} {rss / 1024:>8.0f} {r["peak_jobs_alive"]:>10} '
      f'{cpu:>6.2f} {r["events"] / max(cpu, 0.01):>12.0f} {r["node_actions"] / max(r["events"], 1):>12.1f} '
      f'{r["switches"]:>9} {r["node_actions"] / r["switches"] if r["switches"] else 0:>15.1f}')
PY
  else
    printf '%-8s %-8s %-7s %s\n' "$n" "$label" "$p" "not finished within ${TIMEOUT}s (or failed: see $out/$name.txt)" | tee -a "$out/table.txt"
  fi
}
for n in $JOBS; do
  for p in $POLICIES; do
    row "$n" 1024x64G "$p" --nodes 1024 --node-memory 64G --arrival-gap "$GAP" --mean-memory "$MEM"
  done
done
if [[ $OVER_JOBS != 0 ]]; then
  for p in $POLICIES; do
    row "$OVER_JOBS" 256x8G "$p" --nodes 256 --node-memory 8G --arrival-gap 40s --mean-memory 1G
  done
fi
echo "results: $out"
