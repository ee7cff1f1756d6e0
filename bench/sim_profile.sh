#!/usr/bin/env bash
# Where the simulator's CPU goes on sim_speed.sh's overloaded rows (100k
# jobs on 256 nodes of 8G, 1G per rank, a gap of 40 s; gang and hybrid,
# switch ao/ai): the core (the policy and scheduler, the code the runtime
# runs too; everything under `Scheduler`'s entry points) against the
# engine (the simulator's own: carrying actions out with the paging model,
# recomputing speeds, the event queues). Issue 16 asks for a million
# events per CPU second: at most 1 us per event for both together. The
# table prints each one's microseconds per event, the events per CPU
# second the core alone would allow if the engine took no time, and the
# engine's nanoseconds per job-node action (the unit of its work, see
# docs/sim.md). No root; needs perf (linux-perf) allowed to sample this
# user's processes (root, or kernel.perf_event_paranoid <= 2).
#
#   bench/sim_profile.sh [OUT_DIR]      POLICIES="gang hybrid" JOBS=100000
#
# A release build with frame pointers (in target/frame-pointers) so that
# perf's call graphs give each function's time with its callees'; its
# CPU time, from GNU time, is a run without perf. The shares are perf's
# samples at 999 Hz.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
command -v perf >/dev/null || { echo "bench/sim_profile.sh needs perf (apt-get install linux-perf)" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "bench/sim_profile.sh needs /usr/bin/time (GNU time: apt-get install time)" >&2; exit 1; }
out=${1:-bench/results/sim_profile-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
jobs=${JOBS:-100000}
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=target/frame-pointers \
  cargo build --release -p memgang --quiet
fp_bin=target/frame-pointers/release/memgang
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}')G, $(uname -r)" | tee "$out/machine.txt"
for p in ${POLICIES:-gang hybrid}; do
  args=(sim --generate "$jobs" --policy "$p" --switch ao/ai --quantum 60s --max-ranks 64 --seed 1
    --nodes 256 --node-memory 8G --arrival-gap 40s --mean-memory 1G)
  /usr/bin/time -v -o "$out/$p.time" "$fp_bin" "${args[@]}" --json "$out/$p.json" >/dev/null
  perf record -q -F 999 -g -o "$out/$p.perf" "$fp_bin" "${args[@]}" >/dev/null 2>"$out/$p.perf.log"
  perf report -i "$out/$p.perf" --children --sort sym -g none --stdio --percent-limit 0 \
    >"$out/$p.report.txt" 2>/dev/null
  rm -f "$out/$p.perf"
  cpu_seconds "$out/$p.time" >"$out/$p.cpu"
done
python3 - "$out" "${POLICIES:-gang hybrid}" <<'PY' | tee "$out/table.txt"
import json, re, sys
out, policies = sys.argv[1], sys.argv[2].split()
# The engine's ways into the core; none calls another.
CORE = ["memgang_core::scheduler::Scheduler::" + f
        for f in ("deliver", "submit", "retire", "next_wakeup", "all_finished")]
RUN = "memgang_sim::engine::Simulator::run"
def inclusive(path):
    shares = {}
    for line in open(path):
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(.*\S)", line)
        if m:
            shares.setdefault(m.group(3), float(m.group(1)))
    return shares
print(f"{'policy':<7} {'events':>8} {'cpu_s':>6} {'core%':>6} {'engine%':>8} {'core_us/ev':>10} "
      f"{'engine_us/ev':>12} {'ev/cpu_s':>9} {'core-only ev/cpu_s':>18} {'node_act/ev':>11} {'engine_ns/node_act':>18}")
for p in policies:
    r = json.load(open(f"{out}/{p}.json"))
    cpu = float(open(f"{out}/{p}.cpu").read())
    s = inclusive(f"{out}/{p}.report.txt")
    core = sum(s.get(k, 0.0) for k in CORE) / 100
    # The simulation is `run`; what of it is not the core is the engine.
    engine = s[RUN] / 100 - core
    ev, acts = r["events"], r["node_actions"]
    print(f"{p:<7} {ev:>8} {cpu:>6.2f} {100 * core:>6.1f} {100 * engine:>8.1f} "
          f"{core * cpu / ev * 1e6:>10.2f} {engine * cpu / ev * 1e6:>12.2f} {ev / cpu:>9.0f} "
          f"{ev / (core * cpu):>18.0f} {acts / ev:>11.1f} {engine * cpu / acts * 1e9:>18.1f}")
print("(core: the policy and scheduler, which the runtime runs too; engine: the simulator's own; "
      "% of perf's samples, with callees; us/ev: CPU microseconds per event; core-only: the events "
      "per CPU second if the engine took no time; node_act: a job started, suspended, made room "
      "for or resumed, once per node of it)")
PY
echo "results: $out"
