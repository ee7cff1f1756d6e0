#!/usr/bin/env bash
# The control for bench/realapps.sh: a pair (FIT_APP, default the stencil)
# in a pool that holds both (2G), so that no switch has anything to page.
# Any overhead left is the cost of taking turns itself, per mechanism.
#   sudo bench/realapps_fit.sh [OUT_DIR]      FIT_APP=stencil (cg, gather) SWITCHES="lru so so/ao so/ao/ai"
#                                             FIT_ROUNDS=1 THP=1 (0: not the huge-page runs) THP_ROUNDS=1
# FIT_ROUNDS=N runs the batch and every mechanism N times, taking turns
# (round-1/ ... round-N/, each with its own table), and prints
# bench/realapps_rounds.py's medians: a single run moves by 5-10% here,
# more than what this control looks for.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup realapps-fit "${1:-}"
out=$(cd "$out" && pwd)
ensure_python_env
fit_app=${FIT_APP:-stencil}
write_app_pair "$fit_app" 2G "$out/$fit_app-fit.toml" "$fit_app-fit"
py=$PWD/.venv/bin/python
# fit_round DIR: the batch run and one run per mechanism, in DIR, named
# as bench/realapps.sh names its runs (APP-batch, APP-q10s-SWITCH), so
# that bench/realapps_rounds.py reads them; sets `runs`.
fit_round() {
  local d=$1 sw f
  mkdir -p "$d"
  "$bin" run "$out/$fit_app-fit.toml" --policy batch --baseline none --json "$d/$fit_app-batch.json" \
    --logs "$d/logs/batch" | tail -n 1
  runs=("$d/$fit_app-batch.json")
  for sw in ${SWITCHES:-lru so so/ao so/ao/ai}; do
    f=$d/$fit_app-q10s-${sw//\//-}.json
    "$bin" run "$out/$fit_app-fit.toml" --policy gang --quantum 10s --switch "$sw" \
      --baseline "$d/$fit_app-batch.json" --json "$f" --logs "$d/logs/${sw//\//-}" | tail -n 1
    runs+=("$f")
  done
  "$bin" report "${runs[@]}" | tee "$d/table.txt"
}
fit_rounds=${FIT_ROUNDS:-1}
if [ "$fit_rounds" -le 1 ]; then
  fit_round "$out"
else
  for r in $(seq 1 "$fit_rounds"); do
    step "round $r of $fit_rounds"
    fit_round "$out/round-$r"
  done
  python3 bench/realapps_rounds.py "$out" | tee "$out/rounds.txt"
fi
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
# One round: each job's running time (rounds: realapps_rounds.py's column).
[ "$fit_rounds" -le 1 ] || exit 0
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
