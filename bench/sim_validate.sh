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
#                                       and hybrid-full, hybrid-full-2rank (if there)
#   CALIBRATION=device.json bench/sim_validate.sh   random read rate and
#       switch efficiency from `memgang calibrate` (else the simulator's
#       defaults: 20,000 reads/s, efficiency 1)
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
  for d in bench/results/hybrid-full bench/results/hybrid-full-2rank; do
    [ ! -d "$d" ] || dirs+=("$d")
  done
fi
cal=()
[ -z "${CALIBRATION:-}" ] || cal=(--calibration "$CALIBRATION")
python3 bench/sim_validate.py target/debug/memgang "${cal[@]}" "${dirs[@]}"
