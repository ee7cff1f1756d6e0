#!/usr/bin/env bash
# Where a real application's jobs wait off their CPU under gang so/ao/ai
# (issue 36: the account's "unaccounted"): one run of bench/realapps.sh's
# pair APP (default gather) at q = 10 s under `perf record -a -g -e
# sched:sched_switch -e sched:sched_wakeup` (tracepoints: no PMU needed), then
# bench/realapps_offcpu.py's tables: off-CPU time by state and kernel
# frames, and the page faults that waited for the mmap lock by the time
# since the last switch.
#   sudo bench/realapps_offcpu.sh [OUT_DIR]      APP=gather COMM=python
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup realapps-offcpu "${1:-}"
out=$(cd "$out" && pwd)
ensure_python_env
command -v perf >/dev/null || { echo "needs perf (linux-perf)" >&2; exit 1; }
app=${APP:-gather}
write_app_pair "$app" "${APP_POOL:-512M}" "$out/$app.toml"
step "$app / gang q=10s so/ao/ai under perf sched:sched_switch"
perf record -q -a -g -e sched:sched_switch -e sched:sched_wakeup -o "$out/perf.data" -- \
  "$bin" run "$out/$app.toml" --policy gang --quantum 10s --switch so/ao/ai \
  --json "$out/$app-so-ao-ai.json" --logs "$out/logs" | tail -n 1
perf script -i "$out/perf.data" -F tid,time,event,trace,ip,sym 2>/dev/null > "$out/sched.txt"
python3 bench/realapps_offcpu.py "$out/sched.txt" "$out/$app-so-ao-ai.json" "${COMM:-python}" | tee "$out/table.txt"
rm -f "$out/perf.data" "$out/sched.txt"
echo "results in $out"
