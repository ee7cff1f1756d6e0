#!/usr/bin/env bash
# Where a frozen job's threads sleep (issue 36: the time account's "io wait
# while frozen", which LAMMPS shows under lru): one run of bench/realapps.sh's
# pair APP (default lammps) at q = 10 s under SWITCH (default lru), while
# bench/frozen_threads.py reads, every 0.5 s, the state, wchan and kernel
# stack of every thread of every frozen memgang cgroup, and every thread's
# block I/O delay; then its tables (observations by job, command, state
# and wchan; the block I/O delay each thread gained across its thaws, and
# each growth over 60 s beside the machine's uptime then) beside each
# job's io wait (while frozen, while running, dropped as no wait's) and
# the account's samples' time per switch, from the run's JSON.
#   sudo bench/frozen_threads.sh [OUT_DIR]      APP=lammps SWITCH=lru
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup frozen-threads "${1:-}"
out=$(cd "$out" && pwd)
ensure_python_env
app=${APP:-lammps}
sw=${SWITCH:-lru}
write_app_pair "$app" "${APP_POOL:-512M}" "$out/$app.toml"
step "$app / gang q=10s $sw, frozen threads read every 0.5 s"
python3 bench/frozen_threads.py "$out/observed.txt" &
watcher=$!
on_exit "kill $watcher 2>/dev/null || true"
"$bin" run "$out/$app.toml" --policy gang --quantum 10s --switch "$sw" --baseline none \
  --json "$out/$app-${sw//\//-}.json" --logs "$out/logs" | tail -n 1
kill -TERM "$watcher"
wait "$watcher" || true
python3 bench/frozen_threads.py --table "$out/observed.txt" "$out/$app-${sw//\//-}.json" | tee "$out/table.txt"
