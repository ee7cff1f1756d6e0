#!/usr/bin/env bash
# Issue 16: `memgang sim` on real archive traces (bench/traces: NASA's
# iPSC/860 log, 18,066 jobs on 128 nodes; the LHC Computing Grid's,
# 187,520 one-processor jobs), scaled to memory-oversubscribed clusters,
# under batch, cosched, gang (ao/ai and lru) and hybrid. Prints, per row,
# what the policies did (makespan, utilization, mean response, mean bounded
# slowdown, switches and their share of node time, jobs alive at most) and
# what the simulator cost (CPU seconds, events per CPU second, job-node
# actions per event and per switch: a job started, suspended, made room
# for or resumed, once per node of it), and `overc`: the share of node time
# in which a node's running jobs wanted more memory than it has (the time
# the result rests on the model's thrashing). No root: the simulator touches no kernel feature.
#
#   bench/sim_archive.sh [OUT_DIR]
#   LOADS="1 2" POLICIES="batch cosched gang-aoai gang-lru hybrid" TRACES="nasa lcg" TIMEOUT=600 BIN=path/to/memgang
#   MEM_DIST=pareto   each job's memory per processor drawn (Pareto, mean
#                     MEM_PER_PROC, shape 1.5, at most 1G, seed 1) instead
#                     of MEM_PER_PROC for all: jobs of many sizes, some of
#                     which fit on a node together
#
# Scaling. The logs record no memory, so every job gets MEM_PER_PROC
# (700M) per processor on nodes of 1G (the papers' node size): two jobs
# never fit on one node together, so gang and hybrid page at every switch
# and cosched thrashes. One processor per node (NASA's header says so;
# LCG's jobs are serial). NASA keeps its 128 nodes; LCG, which ran on
# 24,515 processors of 170 sites, gets 2,048 nodes, where its average
# demand (1,581 busy processors over its 11 days) is an offered load of
# 0.77. LOADS divides the submit times (`--load-factor`): 2 offers twice
# the log's load (NASA 0.93, LCG 1.54: overloaded). Quantum 60 s, the
# default device (a SATA SSD: 400 MB/s write, 500 MB/s read, 20,000
# random 4 KiB reads/s).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
sim_bench_bin sim_archive
out=${1:-bench/results/sim_archive-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
LOADS=${LOADS:-1 2}
POLICIES=${POLICIES:-batch cosched gang-aoai gang-lru hybrid}
TRACES=${TRACES:-nasa lcg}
TIMEOUT=${TIMEOUT:-600}
MEM_PER_PROC=${MEM_PER_PROC:-700M}
MEM_DIST=${MEM_DIST:-fixed}

echo "memory per processor: $MEM_PER_PROC ($MEM_DIST)" | tee "$out/memory.txt"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}')G; one simulation at a time, one core each" | tee "$out/machine.txt"
sha256sum bench/traces/*.swf.gz | tee "$out/traces.sha256"

# The trace's file and nodes: sets `file` and `nodes`.
trace_of() {
  case $1 in
    nasa) file=bench/traces/NASA-iPSC-1993-3.1-cln.swf.gz nodes=128 ;;
    lcg) file=bench/traces/LCG.swf.gz nodes=2048 ;;
    *) echo "unknown trace $1 (nasa, lcg)" >&2; exit 2 ;;
  esac
}

# Offered load: the jobs' processor-seconds (run time, field 4, times
# processors, field 5 else 8, at most the nodes) over the nodes' seconds
# between the first and the last submission, the latter divided by the
# load factor; jobs the simulator passes over (no run time or processors)
# left out.
for trace in $TRACES; do
  trace_of "$trace"
  python3 - "$file" "$nodes" "$trace" $LOADS <<'PY' | tee -a "$out/load.txt"
import gzip, sys
work, first, last = 0.0, None, None
for line in gzip.open(sys.argv[1], "rt"):
    f = line.split()
    if not f or line.startswith(";"):
        continue
    submit, run, procs = float(f[1]), float(f[3]), float(f[4]) if float(f[4]) > 0 else float(f[7])
    if run < 0 or procs <= 0:
        continue
    work += run * min(procs, float(sys.argv[2]))
    first = submit if first is None else min(first, submit)
    last = submit if last is None else max(last, submit)
for load in sys.argv[4:]:
    offered = work / (float(sys.argv[2]) * (last - first) / float(load))
    print(f"{sys.argv[3]} on {sys.argv[2]} nodes, load factor {load}: offered load {offered:.2f}")
PY
done

printf '%-5s %-5s %4s %-9s %7s %6s %11s %5s %10s %9s %8s %6s %6s %8s %7s %12s %10s %10s %6s\n' \
  trace nodes load policy jobs unfin makespan_s util mean_resp bsld switches sw_ovh alive events cpu_s events/cpu_s act/event act/switch overc | tee "$out/table.txt"

row() {
  local trace=$1 load=$2 policy=$3
  local file nodes flags
  trace_of "$trace"
  flags=(--nodes "$nodes")
  case $policy in
    batch | cosched | hybrid | auto) flags+=(--policy "$policy") ;;
    gang-aoai) flags+=(--policy gang --switch ao/ai) ;;
    gang-lru) flags+=(--policy gang --switch lru) ;;
    *) echo "unknown policy $policy (batch, cosched, gang-aoai, gang-lru, hybrid, auto)" >&2; exit 2 ;;
  esac
  local name=$trace-x$load-$policy
  # Only when the load changes, so that a build older than --load-factor
  # (BIN=...) can run the logs' own load for a before/after.
  [[ $load == 1 ]] || flags+=(--load-factor "$load")
  [[ $MEM_DIST == fixed ]] || flags+=(--default-memory-dist "$MEM_DIST" --seed 1)
  if timeout "$TIMEOUT" /usr/bin/time -v -o "$out/$name.time" "$bin" sim --swf "$file" "${flags[@]}" \
    --cpus-per-node 1 --node-memory 1G --default-memory "$MEM_PER_PROC" \
    --quantum 60s --json "$out/$name.json" >"$out/$name.txt" 2>&1; then
    python3 - "$out/$name.json" "$(cpu_seconds "$out/$name.time")" "$trace" "$load" "$policy" <<'PY' | tee -a "$out/table.txt"
import json, sys
r = json.load(open(sys.argv[1]))
cpu = float(sys.argv[2])
print(f'{sys.argv[3]:<5} {r["nodes"]:<5} {sys.argv[4]:>4} {sys.argv[5]:<9} {r["jobs"]:>7} {r["unfinished"]:>6} '
      f'{r["makespan_s"]:>11.0f} {r["utilization"]:>5.3f} {r["mean_response_s"]:>10.0f} {r["mean_bounded_slowdown"]:>9.1f} '
      f'{r["switches"]:>8} {100 * r["switching_overhead"]:>5.1f}% {r["peak_jobs_alive"]:>6} {r["events"]:>8} '
      f'{cpu:>7.2f} {r["events"] / max(cpu, 0.01):>12.0f} {r["node_actions"] / max(r["events"], 1):>10.1f} '
      f'{r["node_actions"] / r["switches"] if r["switches"] else 0:>10.0f} '
      # Share of node time overcommitted ('-': a build from before it was counted).
      + (f'{100 * r["overcommitted_node_s"] / (r["nodes"] * r["makespan_s"]):>5.1f}%'
         if "overcommitted_node_s" in r and r["makespan_s"] > 0 else f'{"-":>6}'))
PY
  else
    printf '%-5s %-5s %4s %-9s %s\n' "$trace" - "$load" "$policy" "not finished within ${TIMEOUT}s (or failed: see $out/$name.txt)" | tee -a "$out/table.txt"
  fi
}
for trace in $TRACES; do
  for load in $LOADS; do
    for p in $POLICIES; do
      row "$trace" "$load" "$p"
    done
  done
done
echo "(makespan, mean response in s; bsld: mean bounded slowdown, 10 s bound; sw_ovh: switching's share of node time; alive: jobs alive at most; act/event, act/switch: job-node actions per event, per switch; overc: share of node time overcommitted)" | tee -a "$out/table.txt"
echo "results: $out"
