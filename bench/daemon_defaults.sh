#!/usr/bin/env bash
# Issue 47: memgangd's defaults on the real applications, as users meet
# them. Every pair of docs/realapps.md (bench/apps/: cg, stencil, gather,
# lammps, hpcc) submitted by two users (USERS, "nobody daemon") to a
# memgangd running the shipped dist/memgang.toml (auto, 60 s, fixed
# quanta, so/ao/ai; its paths moved to a directory of its own), in a pool
# that holds one job of a pair (POOL=512M as bench/realapps.sh;
# POOL=shipped keeps the file's 3/4 of RAM, where every pair fits), against
# the same two jobs one after the other through the same daemon; then the
# same with each VARIANT's line added (default: max_switch_share = "2.5%",
# off in the shipped file). At memgangd's 60 s quantum the jobs run about
# six times as long as bench/realapps.sh's (docs/realapps.md) unless the
# knobs say otherwise (CG_ITERS, STENCIL_ITERS, GATHER_ITERS, LAMMPS_STEPS,
# HPCC_N). Prints bench/daemon_defaults.py's table (docs/scale.md).
#   sudo flock /work/wt/root.lock bench/daemon_defaults.sh [OUT_DIR]
#        APPS="cg stencil gather lammps hpcc" ROUNDS=1 POOL=512M
#        VARIANTS='max_switch_share 2.5%=max_switch_share = "2.5%"' (name=TOML line, one per line)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CG_ITERS:=5400}" "${STENCIL_ITERS:=720}" "${GATHER_ITERS:=780}" "${LAMMPS_STEPS:=840}"
export CG_ITERS STENCIL_ITERS GATHER_ITERS LAMMPS_STEPS
source bench/lib.sh
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
bench_setup daemon-defaults "${1:-}"
out=$(cd "$out" && pwd)
export APPS=${APPS:-cg stencil gather lammps hpcc}
for u in ${USERS:-nobody daemon}; do
  id "$u" >/dev/null 2>&1 || { echo "bench/daemon_defaults.sh: no user $u (USERS names two users to submit as)" >&2; exit 1; }
done
# The jobs run as USERS, who may not reach the repo's .venv (its Python
# can live under /root, pyenv's): the apps' Python is a venv of the
# system's python3 in target/, world-readable.
uvenv=$PWD/target/users-venv
if ! "$uvenv/bin/python" -c 'import numpy, scipy' 2>/dev/null; then
  step "creating $uvenv (numpy, scipy) from /usr/bin/python3 for the users' jobs"
  /usr/bin/python3 -m venv "$uvenv"
  "$uvenv/bin/python" -m pip install --quiet --disable-pip-version-check numpy scipy
fi
case " $APPS " in *" hpcc "*) ensure_hpcc ;; esac
case " $APPS " in *" lammps "*) ensure_lammps ;; esac
# Each app's command and declared memory, as bench/lib.sh's pairs have them.
for app in $APPS; do
  if [ -f "bench/apps/$app.sh" ]; then
    cmd=("$PWD/bench/apps/$app.sh")
  else
    cmd=("$uvenv/bin/python" "$PWD/bench/apps/$app.py")
  fi
  # shellcheck disable=SC2206 # APP_ARGS: words
  cmd+=(${APP_ARGS[$app]})
  export "APP_CMD_$app=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${cmd[@]}")"
  export "APP_MEM_$app=${APP_MEM[$app]}"
done
{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(uname -r)"
  echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"
python3 bench/daemon_defaults.py "$PWD/target/release/memgangd" "$PWD/target/release/memgang" "$out" | tee "$out/table.txt"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
echo "results in $out"
