#!/usr/bin/env bash
# Working sets (paper 004 Fig. 5-7) of memgang-workload's access patterns
# and of a NumPy sweep, over τ = 32, 128, 512 ms, and the pool and quantum
# `memgang wss` suggests for the set. No root needed (the jobs are our
# children). Prints the table; JSON and the plot go to $out.
#   bench/wss.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
ensure_python_env
cargo build --release --workspace --bins --quiet
bin=target/release/memgang
wl=target/release/memgang-workload
out=${1:-bench/results/wss-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
# Each job runs longer than the measurement (DURATION), so that every τ
# gets several windows of steady state; 256 MiB each, like one job of the
# papers' 1 GB nodes.
DURATION=${DURATION:-8s}
job() {
  case $1 in
    seq) echo "$wl" --mib 256 --pattern seq --iterations 100000 --compute 4 ;;
    random) echo "$wl" --mib 256 --pattern random --iterations 100000 --compute 1 ;;
    stencil-2rank) echo "$wl" --mib 256 --pattern stencil --iterations 100000 --compute 2 --ranks 2 ;;
  esac
}
from=()
for name in seq random stencil-2rank numpy; do
  step "wss: $name"
  if [ "$name" = numpy ]; then
    # A NumPy sweep over a 256 MiB array (code nobody here wrote).
    cmd=(.venv/bin/python -c 'import numpy as np
a = np.ones((4096, 8192))
while True: a += 1.0')
  else
    read -r -a cmd <<<"$(job "$name")"
  fi
  "$bin" wss --name "$name" --duration "$DURATION" --json "$out/$name.json" -o "$out/$name.png" -- "${cmd[@]}" >/dev/null
  from+=(--from "$out/$name.json")
done
step "all four jobs: table and suggestion"
"$bin" wss "${from[@]}" | tee "$out/table.md"
echo "results: $out"
