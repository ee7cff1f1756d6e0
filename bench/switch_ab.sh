#!/usr/bin/env bash
# Two builds of memgang, side by side, on the switches of real
# applications (issue 12): the gather and cg pairs of bench/realapps.sh
# under gang so/ao/ai, q = 10 s, with OLD and NEW alternating, ROUNDS
# rounds; per build the switches' page-out and page-in rates, their mean
# time, the makespans, the jobs' running time (their quanta together) and
# the bytes put back on huge pages after page-ins, and each build's
# switches step by step (bench/switch_steps.py). For a mechanism change
# that the policy does not see (build OLD from the commit before it).
#   sudo bench/switch_ab.sh OLD_BIN NEW_BIN [OUT_DIR]    APPS="gather cg" ROUNDS=2
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
old_bin=${1:?usage: bench/switch_ab.sh OLD_BIN NEW_BIN [OUT_DIR]}
new_bin=${2:?usage: bench/switch_ab.sh OLD_BIN NEW_BIN [OUT_DIR]}
bench_setup switch-ab "${3:-}"
out=$(cd "$out" && pwd)
ensure_python_env
.venv/bin/python -c 'import scipy' 2>/dev/null || .venv/bin/python -m pip install --quiet scipy
"$bin" testbed bandwidth --json > "$out/bandwidth-start.json"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for app in ${APPS:-gather cg}; do
    exp=$out/$app.toml
    # The pairs of bench/realapps.sh, in its 512M pool.
    write_app_pair "$app" 512M "$exp"
    for build in old new; do
      b=$old_bin
      [ "$build" = old ] || b=$new_bin
      step "round $round: $app, gang so/ao/ai, $build build ($b)"
      "$b" run "$exp" --policy gang --quantum 10s --switch so/ao/ai \
        --baseline none --json "$out/$app-$build-r$round.json" --logs "$out/logs/$app-$build-r$round" | tail -n 1
    done
  done
done
"$bin" testbed bandwidth --json > "$out/bandwidth-end.json"
python3 - "$out" <<'PY' | tee "$out/table.txt"
import glob, json, os, re, sys
from collections import defaultdict
d = sys.argv[1]
rows = defaultdict(list)
for f in sorted(glob.glob(os.path.join(d, "*-r*.json"))):
    app, build, r = re.fullmatch(r"(.*)-(old|new)-r(\d+)\.json", os.path.basename(f)).groups()
    rows[(app, build)].append(json.load(open(f)))
bw = [json.load(open(f)) for f in glob.glob(os.path.join(d, "bandwidth-*.json"))]
print("disk: " + "; ".join(f"read {b['read_bytes_per_s']/1e6:.0f} MB/s, write {b['write_bytes_per_s']/1e6:.0f} MB/s" for b in bw))
print("| app | build | runs | makespan (s) | jobs' running time (s) | page-out MB/s | page-in MB/s | switch s (mean) | back on huge pages (MiB per run) |")
print("|---|---|---|---|---|---|---|---|---|")
for (app, t), runs in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] != "old")):
    sw = [s for r in runs for s in r["switches"]]
    out_b = sum(s["paged_out_bytes"] for s in sw); out_s = sum(s["page_out_s"] for s in sw)
    in_b = sum(s["paged_in_bytes"] for s in sw); in_s = sum(s["page_in_s"] for s in sw)
    ms = " / ".join(f"{r['makespan_s']:.1f}" for r in runs)
    took = sum(s["took_s"] for s in sw) / max(len(sw), 1)
    # The sum of the jobs' quanta: how long they computed, switches left out.
    running = " / ".join(f"{sum(i['end_s'] - i['start_s'] for i in r['timeline']):.1f}" for r in runs)
    # Put back after page-ins (results before that field have none).
    huge = " / ".join(f"{sum(j.get('huge_restored_bytes', 0) for j in r['jobs']) / 2**20:.0f}" for r in runs)
    print(f"| {app} | {t} | {len(runs)} | {ms} | {running} | {out_b/out_s/1e6 if out_s else 0:.0f} | {in_b/in_s/1e6 if in_s else 0:.0f} | {took:.2f} | {huge} |")
# Each build's switches step by step (a build before the steps were
# recorded has none), beside the kernel alone (PAGING_RATE, or the newest
# bench/paging_rate.sh table).
sys.path.insert(0, "bench")
import switch_steps
stepped = [(f"{app} {t}", runs) for (app, t), runs in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] != "old"))]
if any(switch_steps.switches(r) for _, runs in stepped for r in runs):
    rate = switch_steps.paging_rate_table()
    print()
    print(f"Switch steps (kernel alone: {rate or 'none found'}):")
    print()
    print(switch_steps.table(stepped, switch_steps.kernel_rows(rate)))
    print()
    print(switch_steps.NOTE)
PY
echo "results in $out"
