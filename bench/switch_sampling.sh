#!/usr/bin/env bash
# What the time account's samples cost a switch (issue 36). At each freeze
# the switch lists the job's processes once (its page-out uses the same
# list), reads each one's taskstats and the cgroup's huge pages; at each thaw it
# reads their taskstats again: work inside the switch, recorded as each
# switch's `steps.sampling_s`. Here two jobs of P processes each
# (memgang-workload --ranks P) take turns under gang, for each P of PROCS
# and each switch of SWITCHES (under lru a switch is little more than the
# freeze and the thaw: the samples' largest share). Per row, over the
# switches that froze a job: the sampling time per switch (median, max),
# the switch's time (median), and the samples' share of all switch time
# and of the makespan. One run per row.
#
#   sudo bench/switch_sampling.sh [OUT_DIR]   PROCS="1 2 8" SWITCHES="lru so/ao/ai"
#       SAMPLING_MIB=400 SAMPLING_POOL=512M SAMPLING_QUANTUM=2s SAMPLING_ITERS=40
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup switch-sampling "${1:-}"
# Two jobs of 400 MiB in a 512M pool must page at each switch; 40
# iterations at compute 2 run each alone for about 10 s, i.e. several 2 s
# quanta each: a few switches per run.
mib=${SAMPLING_MIB:-400}
pool=${SAMPLING_POOL:-512M}
quantum=${SAMPLING_QUANTUM:-2s}
iters=${SAMPLING_ITERS:-40}
for p in ${PROCS:-1 2 8}; do
  exp=$out/p$p.toml
  write_jobs "$exp" "sampling-p$p" "$pool" "$quantum" 2 "$mib" "$p" \
    --pattern seq --compute 2 --iterations "$iters" --ranks "$p"
  for sw in ${SWITCHES:-lru so/ao/ai}; do
    step "$p processes per job, gang $sw"
    "$bin" run "$exp" --policy gang --switch "$sw" --baseline none \
      --json "$out/p$p-${sw//\//_}.json" --logs "$out/logs/p$p-${sw//\//_}" | tail -n 1
  done
done
python3 - "$out" "$mib" <<'PY' | tee "$out/table.txt"
import glob, json, os, re, statistics, sys
d = sys.argv[1]
print("| processes per job | switch | switches | sampling ms (median) | sampling ms (max) | switch ms (median) | share of switch time | share of makespan |")
print("|---|---|---|---|---|---|---|---|")
rows = []
for f in glob.glob(os.path.join(d, "p*.json")):
    p = int(re.fullmatch(r"p(\d+)-.*\.json", os.path.basename(f)).group(1))
    r = json.load(open(f))
    rows.append((p, r["switch"], r))
for p, sw, r in sorted(rows, key=lambda x: (x[0], x[1])):
    # The switches that froze a job: those the account samples at.
    s = [x for x in r["switches"] if x["suspended"]]
    if not s:
        print(f"| {p} | {sw} | 0 | - | - | - | - | - |")
        continue
    samp = [(x.get("steps") or {}).get("sampling_s", 0.0) for x in s]
    took = [x["took_s"] for x in s]
    print(f"| {p} | {sw} | {len(s)} | {statistics.median(samp)*1e3:.2f} | {max(samp)*1e3:.2f} "
          f"| {statistics.median(took)*1e3:.1f} | {sum(samp)/sum(took)*100:.2f}% "
          f"| {r.get('switch_sampling_s', 0.0)/r['makespan_s']*100:.3f}% |")
with open("/proc/cpuinfo") as c:
    model = next((l.split(":", 1)[1].strip() for l in c if l.startswith("model name")), "?")
print(f"\nmachine: {os.cpu_count()} CPUs, {model}, Linux {os.uname().release}; "
      f"jobs: 2 x memgang-workload --mib {sys.argv[2]} --pattern seq per run")
PY
echo "results in $out"
