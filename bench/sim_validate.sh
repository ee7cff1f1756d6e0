#!/usr/bin/env bash
# Issue 6's validation: the simulator against the measured runs. For every
# run in the result directories of bench/adaptive.sh and bench/hybrid.sh,
# the same experiment in `memgang sim` (one node: the pool, the machine's
# CPUs; each job's run time alone from the measured batch run, its declared
# memory; the sequential bandwidths measured with the run) and one table:
# measured and simulated makespan, their ratio (target: within 15%), and
# switching overhead. No root: only the simulator runs.
#
#   bench/sim_validate.sh [DIR ...]     default: adaptive-fix, hybrid-long
#                                       and hybrid-full, hybrid-full-2rank,
#                                       adaptive-access-20261127,
#                                       adaptive-lru-20261127, -r2, -600m,
#                                       -q20, -600m-q20 and -q15, the
#                                       last two 20 s ones again (-r2),
#                                       -600m again (-600m-r2),
#                                       thrash-20261127 and -r2 (if there);
#                                       stored with their per-sample
#                                       timelines emptied (compact_results.py),
#                                       which this table does not read
#   CALIBRATION=device.json bench/sim_validate.sh   random read rates and
#       switch efficiency from `memgang calibrate`
#   RANDOM_READS=device.json   only its random read rates (one at a time
#       and, if it has one, 8 in flight), readahead and reclaim cost;
#       default: bench/results/calibrate-20261123T132753Z/device.json,
#       taken the day the runs were measured (the device's random rate
#       moves from day to day on this VM, and the lru rows with it)
#   READAHEAD=device.json   the readahead window's pages and its cost in
#       random faults from a calibration that timed demand faults; default:
#       bench/results/calibrate-20261127T124054Z/device.json, the first
#       (READAHEAD= leaves them at the model's defaults: 8 pages, 1 read)
#   OWN_EVICT=device.json   the share of a resumed job's faults that evict
#       its own pages from a calibration that measured it (default: the
#       model's, 0.45, read from the runs)
#   QUEUE=0   leave out the rate at depth 8 (the model then charges a
#       readahead as one single read)
#   ACCESS=sweep   every job sweeps its memory (`--access` left at its
#       default), as the model had it before it knew random access
#
# How each simulated experiment is built, and the table's columns:
# bench/sim_validate.py.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
cargo build -p memgang --quiet
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  dirs=(bench/results/adaptive-fix bench/results/hybrid-long)
  for d in bench/results/hybrid-full bench/results/hybrid-full-2rank bench/results/adaptive-access-20261127 \
    bench/results/adaptive-lru-20261127 bench/results/adaptive-lru-20261127-r2 bench/results/adaptive-lru-20261127-600m \
    bench/results/adaptive-lru-20261127-q20 bench/results/adaptive-lru-20261127-600m-q20 \
    bench/results/adaptive-lru-20261127-q15 bench/results/adaptive-lru-20261127-q20-r2 \
    bench/results/adaptive-lru-20261127-600m-q20-r2 \
    bench/results/adaptive-lru-20261127-600m-r2 \
    bench/results/thrash-20261127 \
    bench/results/thrash-20261127-r2; do
    [ ! -d "$d" ] || dirs+=("$d")
  done
fi
# The random read rate is the device's, measured by `memgang calibrate` on
# this machine (the runs measured only the sequential bandwidths); the
# calibration's switch efficiency is used only when asked for: it was
# measured under load against other sequential bandwidths (git log -p -- docs/sim-history.md).
cal=()
if [ -n "${CALIBRATION:-}" ]; then
  cal=(--calibration "$CALIBRATION")
else
  cal=(--random-reads "${RANDOM_READS:-bench/results/calibrate-20261123T132753Z/device.json}")
fi
readahead=${READAHEAD-bench/results/calibrate-20261127T124054Z/device.json}
[ -z "$readahead" ] || cal+=(--readahead "$readahead")
[ -z "${OWN_EVICT:-}" ] || cal+=(--own-evict "$OWN_EVICT")
[ "${QUEUE:-1}" != 0 ] || cal+=(--no-queue-rate)
[ "${ACCESS:-}" != sweep ] || cal+=(--all-sweep)
python3 bench/sim_validate.py target/debug/memgang "${cal[@]}" "${dirs[@]}"
