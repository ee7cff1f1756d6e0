#!/usr/bin/env bash
# Switch mechanisms (toward issue 3): the baseline's two-jobs experiments
# under gang (quantum 10 s) with the kernel's demand paging (lru) against
# bulk page-out (ao) and bulk page-out plus recorded page-in (ao/ai), with
# the batch run of the same jobs, in one run. Prints makespan, switching
# overhead (vs batch), switch count and time, and swap traffic.
#
#   sudo bench/switching.sh [OUT_DIR]      VARIANTS="seq random 2rank" to choose
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup switching "${1:-}"

files=()
for variant in ${VARIANTS:-seq random}; do
  exp="$out/$variant.toml"
  write_experiment "$variant" "$exp"
  step "$variant / batch"
  "$bin" run "$exp" --policy batch --json "$out/$variant-batch.json" --logs "$out/logs/$variant-batch" | tail -n 1
  files+=("$out/$variant-batch.json")
  for sw in lru ao ao/ai; do
    name=$variant-gang-${sw//\//-}
    step "$variant / gang $sw"
    "$bin" run "$exp" --policy gang --switch "$sw" --baseline "$out/$variant-batch.json" \
      --json "$out/$name.json" --logs "$out/logs/$name" | tail -n 1
    files+=("$out/$name.json")
  done
done

step "switching: $POOL pool, 2 jobs x ${MIB}M, quantum $QUANTUM ($(uname -r), $(nproc) CPUs)"
"$bin" report "${files[@]}" | tee "$out/table.txt"
python3 - "$out" <<'PY'
import json, sys, glob, os
# Time spent inside switches and bytes they moved, per run (from the JSON).
print(f"{'run':<24} {'switch_s':>9} {'paged_out_MiB':>14} {'paged_in_MiB':>13} {'majflt':>9}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*-gang-*.json'))):
    r = json.load(open(f))
    out = sum(s.get('paged_out_bytes', 0) for s in r['switches']) / 2**20
    inn = sum(s.get('paged_in_bytes', 0) for s in r['switches']) / 2**20
    flt = sum(j['major_faults'] for j in r['jobs'])
    print(f"{os.path.basename(f)[:-5]:<24} {r['switch_time_s']:>9.2f} {out:>14.0f} {inn:>13.0f} {flt:>9}")
PY
