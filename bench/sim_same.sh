#!/usr/bin/env bash
# Whether two builds of memgang simulate the same: 20 `memgang sim` runs
# (gang lru, ao, ao/ai, so/ao/ai/bg; hybrid sequential, prefetch,
# overlapped; auto; batch; cosched; open and closed workloads, drained and
# overloaded clusters; NASA's archive trace at twice its load under
# gang, hybrid and batch) by each binary, their JSON (less wall_s,
# events_per_s, node_actions and the command line) and per-job CSV compared. A speed-up
# of the engine or of a policy must leave them equal (issue 16). No root.
#
#   bench/sim_same.sh OLD_BIN NEW_BIN [OUT_DIR]
#
# Exits 0 when every output is the same, 1 otherwise (with the diff).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BIN NEW_BIN [OUT_DIR]" >&2; exit 2; }
old=$(readlink -f "$1")
new=$(readlink -f "$2")
out=${3:-$(mktemp -d)}
nasa=$(readlink -f "$(dirname "$0")/traces/NASA-iPSC-1993-3.1-cln.swf.gz")
runs() {
  local bin=$1 dir=$2
  mkdir -p "$dir"
  run() {
    local name=$1
    shift
    "$bin" sim "$@" --json "$dir/$name.raw.json" --csv "$dir/$name.csv" >/dev/null 2>&1
    python3 - "$dir/$name.raw.json" >"$dir/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
# node_actions counts the engine's work, not what it simulated (and builds
# before it lack it).
for k in ("wall_s", "events_per_s", "node_actions"):
    r.pop(k, None)
r["provenance"].pop("command", None)
print(json.dumps(r, indent=1, sort_keys=True))
PY
    rm "$dir/$name.raw.json"
  }
  # Overloaded (thousands alive), small, and the speed benchmark's cluster.
  local O="--nodes 256 --node-memory 8G --quantum 60s --arrival-gap 30s --mean-memory 1G --max-ranks 64 --seed 1"
  local S="--nodes 64 --node-memory 8G --quantum 60s --arrival-gap 60s --mean-memory 2G --max-ranks 16 --seed 2"
  local B="--nodes 1024 --node-memory 64G --quantum 60s --arrival-gap 30s --mean-memory 2G --max-ranks 64 --seed 1"
  run gang-aoai-over --generate 20000 $O --policy gang --switch ao/ai
  run gang-lru-over --generate 5000 $O --policy gang --switch lru
  run gang-soaoaibg-over --generate 5000 $O --policy gang --switch so/ao/ai/bg
  run gang-ao-small --generate 3000 $S --policy gang --switch ao
  run gang-aoai-bench --generate 30000 $B --policy gang --switch ao/ai
  run hybrid-seq-over --generate 5000 $O --policy hybrid
  run hybrid-pre-over --generate 3000 $O --policy hybrid --overlap prefetch
  run hybrid-ovl-small --generate 3000 $S --policy hybrid --overlap overlapped
  run hybrid-bench --generate 30000 $B --policy hybrid
  run auto-small --generate 3000 $S --policy auto
  run auto-over --generate 3000 $O --policy auto
  run batch-over --generate 5000 $O --policy batch
  run batch-small --generate 3000 $S --policy batch
  run cosched-over --generate 5000 $O --policy cosched
  run cosched-small --generate 3000 $S --policy cosched --switch lru
  run gang-closed --generate 3000 --closed 200 $S --policy gang --switch ao/ai
  run hybrid-closed --generate 3000 --closed 200 $S --policy hybrid
  # A real archive trace at twice its load (bench/sim_archive.sh's NASA rows).
  local A="--swf $nasa --node-memory 1G --default-memory 700M --load-factor 2"
  run nasa-gang $A --policy gang --switch ao/ai
  run nasa-hybrid $A --policy hybrid
  run nasa-batch $A --policy batch
}
runs "$old" "$out/old"
runs "$new" "$out/new"
if diff -r "$out/old" "$out/new"; then
  echo "same: $(ls "$out/old" | wc -l) outputs in $out"
else
  echo "DIFFERENT (above); outputs in $out" >&2
  exit 1
fi
