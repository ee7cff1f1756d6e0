#!/usr/bin/env bash
# The control for bench/realapps.sh: a pair (FIT_APP, default the stencil)
# in a pool that holds both (2G), so that no switch has anything to page.
# Any overhead left is the cost of taking turns itself, per mechanism.
#   sudo bench/realapps_fit.sh [OUT_DIR]      FIT_APP=stencil (cg, gather) SWITCHES="lru so so/ao so/ao/ai"
#                                             THP=1 (0: not the huge-page runs) THP_ROUNDS=1
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup realapps-fit "${1:-}"
out=$(cd "$out" && pwd)
ensure_python_env
fit_app=${FIT_APP:-stencil}
write_app_pair "$fit_app" 2G "$out/$fit_app-fit.toml" "$fit_app-fit"
py=$PWD/.venv/bin/python
"$bin" run "$out/$fit_app-fit.toml" --policy batch --baseline none --json "$out/batch.json" --logs "$out/logs/batch" | tail -n 1
runs=("$out/batch.json")
for sw in ${SWITCHES:-lru so so/ao so/ao/ai}; do
  f=$out/gang-${sw//\//-}.json
  "$bin" run "$out/$fit_app-fit.toml" --policy gang --quantum 10s --switch "$sw" --baseline "$out/batch.json" \
    --json "$f" --logs "$out/logs/${sw//\//-}" | tail -n 1
  runs+=("$f")
done
"$bin" report "${runs[@]}" | tee "$out/table.txt"
# Transparent huge pages: NumPy asks for them; swap-out splits them. Does a
# program compute slower on 4 KiB pages? Each app alone, both ways, taking
# turns THP_ROUNDS times (a single run here moves by 5%), and the medians.
thp() {
  echo "alone, seconds, with NumPy's huge pages and without (NUMPY_MADVISE_HUGEPAGE=0):"
  local r app hp s
  for r in $(seq 1 "${THP_ROUNDS:-1}"); do
    for app in "stencil.py 280 40" "cg.py 140 300" "gather.py 350 20"; do
      for hp in 1 0; do
        s=$( { /usr/bin/time -f %e env NUMPY_MADVISE_HUGEPAGE=$hp "$py" bench/apps/$app >/dev/null; } 2>&1 )
        printf '%s huge=%s %s\n' "${app%% *}" "$hp" "$s"
      done
    done
  done
}
thp_medians() {
  python3 -c '
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and p[1].startswith("huge="):
        runs.setdefault(p[0], {}).setdefault(p[1], []).append(float(p[2]))
print("| app | runs | with huge pages (s, median) | 4 KiB pages only (s, median) | 4 KiB / huge |")
print("|---|---|---|---|---|")
for app, r in runs.items():
    h, k = statistics.median(r["huge=1"]), statistics.median(r["huge=0"])
    n = len(r["huge=1"])
    print(f"| {app} | {n} | {h:.2f} | {k:.2f} | {k / h:.3f} |")
' "$1"
}
if [ "${THP:-1}" != 0 ]; then
  thp | tee "$out/thp.txt"
  thp_medians "$out/thp.txt" | tee -a "$out/thp.txt"
fi
python3 - "${runs[@]}" <<'PY' | tee -a "$out/table.txt"
import json, sys
from collections import defaultdict
print("\nrunning time per job (s): the sum of its quanta")
for f in sys.argv[1:]:
    r = json.load(open(f))
    t = defaultdict(float)
    for i in r["timeline"]:
        t[i["job"]] += i["end_s"] - i["start_s"]
    sw = '-' if r['policy'] == 'batch' else r.get('switch') or '-'
    print(f"{r['policy']:>6} {sw:>9}: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(t.items())))
PY
