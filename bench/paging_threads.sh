#!/usr/bin/env bash
# Issue 12: does spreading a switch's page-out and page-in over several
# threads (one per CPU: linux::paging::paging_threads) make it faster? The
# jobs are frozen during a switch, so the CPUs are idle, and one thread
# paged out at about half the disk's write rate (docs/realapps.md). The
# gather and cg pairs of bench/realapps.sh under gang so/ao/ai, q = 10 s,
# with MEMGANG_PAGING_THREADS=1 and =2, alternating; per run the switches'
# page-out and page-in rates and the makespan.
#   sudo bench/paging_threads.sh [OUT_DIR]      APPS="gather cg" THREADS="1 2" ROUNDS=2
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup paging-threads "${1:-}"
out=$(cd "$out" && pwd)
ensure_python_env
.venv/bin/python -c 'import scipy' 2>/dev/null || .venv/bin/python -m pip install --quiet scipy
py=$PWD/.venv/bin/python
# The pairs of bench/realapps.sh, in its 512M pool.
declare -A PT_ARGS=([cg]="140 ${CG_ITERS:-900}" [stencil]="280 ${STENCIL_ITERS:-120}" [gather]="350 ${GATHER_ITERS:-130}")
declare -A PT_MEM=([cg]=370M [stencil]=370M [gather]=440M)
"$bin" testbed bandwidth --json > "$out/bandwidth-start.json"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for app in ${APPS:-gather cg}; do
    exp=$out/$app.toml
    {
      echo "name = \"$app\""
      echo "pool_memory = \"512M\""
      echo "quantum = \"10s\""
      for j in a b; do
        echo "[[job]]"
        echo "name = \"$j\""
        printf 'command = ["%s", "%s"' "$py" "$PWD/bench/apps/$app.py"
        for a in ${PT_ARGS[$app]}; do printf ', "%s"' "$a"; done
        echo "]"
        echo "memory = \"${PT_MEM[$app]}\""
      done
    } > "$exp"
    for n in ${THREADS:-1 2}; do
      step "round $round: $app, gang so/ao/ai, $n paging thread(s)"
      MEMGANG_PAGING_THREADS=$n "$bin" run "$exp" --policy gang --quantum 10s --switch so/ao/ai \
        --baseline none --json "$out/$app-t$n-r$round.json" --logs "$out/logs/$app-t$n-r$round" | tail -n 1
    done
  done
done
"$bin" testbed bandwidth --json > "$out/bandwidth-end.json"
python3 - "$out" <<'PY' | tee "$out/table.txt"
import glob, json, os, re, sys
from collections import defaultdict
d = sys.argv[1]
rows = defaultdict(list)
for f in sorted(glob.glob(os.path.join(d, "*-t*-r*.json"))):
    app, t, r = re.fullmatch(r"(.*)-t(\d+)-r(\d+)\.json", os.path.basename(f)).groups()
    rows[(app, int(t))].append(json.load(open(f)))
bw = [json.load(open(f)) for f in glob.glob(os.path.join(d, "bandwidth-*.json"))]
print("disk: " + "; ".join(f"read {b['read_bytes_per_s']/1e6:.0f} MB/s, write {b['write_bytes_per_s']/1e6:.0f} MB/s" for b in bw))
print("| app | paging threads | runs | makespan (s) | page-out MB/s | page-in MB/s | switch s (mean) |")
print("|---|---|---|---|---|---|---|")
for (app, t), runs in sorted(rows.items()):
    sw = [s for r in runs for s in r["switches"]]
    out_b = sum(s["paged_out_bytes"] for s in sw); out_s = sum(s["page_out_s"] for s in sw)
    in_b = sum(s["paged_in_bytes"] for s in sw); in_s = sum(s["page_in_s"] for s in sw)
    ms = " / ".join(f"{r['makespan_s']:.1f}" for r in runs)
    took = sum(s["took_s"] for s in sw) / max(len(sw), 1)
    print(f"| {app} | {t} | {len(runs)} | {ms} | {out_b/out_s/1e6 if out_s else 0:.0f} | {in_b/in_s/1e6 if in_s else 0:.0f} | {took:.2f} |")
PY
echo "results in $out"
