#!/usr/bin/env bash
# Two builds of memgang on sim_speed.sh's overloaded rows (100k jobs on
# 256 nodes of 8G, 1G per rank, a gap of 40 s), run alternately ROUNDS
# times, so that the machine's drift (about 10% between runs of one
# binary here) falls on both alike; prints each run's CPU seconds and the
# median's events and job-node actions (the engine's work, see
# docs/sim.md) per CPU second. An engine change that is not faster
# here by more than the spread is not a speed-up. No root.
#
#   bench/sim_speed_ab.sh OLD_BIN NEW_BIN [OUT_DIR]     ROUNDS=5 POLICIES="gang hybrid"
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BIN NEW_BIN [OUT_DIR]" >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "$0 needs /usr/bin/time (GNU time: apt-get install time)" >&2; exit 1; }
old=$(readlink -f "$1")
new=$(readlink -f "$2")
out=${3:-$(mktemp -d)}
mkdir -p "$out"
rounds=${ROUNDS:-5}
for p in ${POLICIES:-gang hybrid}; do
  for r in $(seq "$rounds"); do
    for b in old new; do
      bin=$old; [[ $b == new ]] && bin=$new
      /usr/bin/time -f "%U %S" -o "$out/$p-$b-$r.time" "$bin" sim --generate 100000 --policy "$p" \
        --switch ao/ai --quantum 60s --max-ranks 64 --seed 1 --nodes 256 --node-memory 8G \
        --arrival-gap 40s --mean-memory 1G --json "$out/$p-$b-$r.json" >/dev/null
    done
  done
done
python3 - "$out" "$rounds" "${POLICIES:-gang hybrid}" <<'PY' | tee "$out/table.txt"
import json, statistics, sys
out, rounds, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
print("| policy | build | CPU s per run | median | events/CPU-s (median) | node actions/CPU-s (median) | new / old |")
print("|---|---|---|---|---|---|---|")
for p in policies:
    med = {}
    for b in ("old", "new"):
        cpu = [sum(map(float, open(f"{out}/{p}-{b}-{r}.time").read().split()[:2]))
               for r in range(1, rounds + 1)]
        r = json.load(open(f"{out}/{p}-{b}-1.json"))
        events = r["events"]
        # Builds before it was counted lack it.
        actions = r.get("node_actions")
        med[b] = statistics.median(cpu)
        ratio = f"{med['old'] / med['new']:.2f}x" if b == "new" else "-"
        per_s = f"{actions / med[b]:,.0f}" if actions else "-"
        print(f"| {p} | {b} | {' '.join(f'{c:.2f}' for c in cpu)} | {med[b]:.2f} "
              f"| {events / med[b]:,.0f} | {per_s} | {ratio} |")
PY
echo "results: $out"
