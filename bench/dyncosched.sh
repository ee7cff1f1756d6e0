#!/usr/bin/env bash
# Paper 003's experiment (§5, Fig. 1-2) on this node through memgangd: the
# slowdown of a parallel job beside Pareto-distributed sequential jobs,
# with neither, paging prevention only, dynamic coscheduling only, and
# both. Prints the table; JSON to $out.
#   sudo bench/dyncosched.sh [OUT_DIR]     MEANS="128 256" RUNS=3 SEQ_JOBS=3
#   PARALLEL=hpcc: the parallel job is Debian's hpcc (Open MPI over TCP)
#   MEMGANGD=path: another build of memgangd (an A/B of two builds)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup dyncosched "${1:-}"
[ "${PARALLEL:-}" = hpcc ] && ensure_hpcc
python3 bench/dyncosched.py "${MEMGANGD:-$PWD/target/release/memgangd}" "$PWD/target/release/memgang-workload" "$out" \
  | tee "$out/table.md"
printf 'machine: %s CPUs, Linux %s\n' "$(nproc)" "$(uname -r)" >> "$out/table.md"
echo "results in $out"
