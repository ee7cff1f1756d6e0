#!/usr/bin/env bash
# What memgang's Slurm controller costs in CPU while it only polls: it
# reads Slurm's queue (`squeue --json`) every --poll and squares Slurm with
# its policy, and slurmctld (and munged, for each RPC's credential)
# answers. On an emulated cluster of NODES nodes (scripts/slurm-cluster,
# memgang mode, our own controller), two NODES-node jobs that only sleep
# (`--mem` 64M: they page nothing) are submitted; one runs, the other
# waits its turn, and the controller's quantum is POLL_QUANTUM (default 1h: no
# switch falls in a window, so the rows measure polling, not switching).
# Every row is WINDOW seconds on the same cluster and jobs:
#   a            nothing polls (job a started by hand, as the controller does)
#   poll-P       `memgang slurm run --poll P` for each P in POLLS
#   squeue-json  a loop runs `squeue --json` every 500 ms (what the controller runs)
#   squeue-text  a loop runs squeue's text query of the two partitions
#                (what the controller ran before it read JSON) every 500 ms
# and the CPU seconds of slurmctld, munged and the poller (the controller
# with its waited-for children squeue and scontrol, or the loop's
# children) come from /proc (bench/slurm_poll.py). Prints one table.
#   sudo bench/slurm_poll.sh [OUT_DIR]   NODES=2 WINDOW=60 POLLS="500ms 1s 2s 5s" POLL_QUANTUM=1h
#                                        BEFORE_BIN=path: one more row, that memgang's controller at 500ms
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup slurm_poll "${1:-}"
out=$(cd "$out" && pwd)
# 60 s: 120 polls at the default 500 ms, and the CPU clock's 10 ms ticks
# are then under 0.02% of a CPU per process.
NODES=${NODES:-2} WINDOW=${WINDOW:-60} POLLS=${POLLS:-500ms 1s 2s 5s}
# Not bench/lib.sh's QUANTUM (the one-node pair's 10 s): no switch in a window.
POLL_QUANTUM=${POLL_QUANTUM:-1h}
BEFORE_BIN=${BEFORE_BIN:-}
export STATE_DIR=${STATE_DIR:-/run/memgang-slurm-poll}
export SLURM_CONF=$STATE_DIR/slurm.conf
on_exit 'scripts/slurm-cluster down >/dev/null 2>&1 || true'
scripts/slurm-cluster down >/dev/null
scripts/slurm-cluster up --nodes "$NODES" --pool 256M --mode memgang --no-controller > "$out/cluster.txt"
pid_of() { cat "$STATE_DIR/$1.pid"; }
daemons="slurmctld=$(pid_of slurmctld) munged=$(pid_of munged)"
ids=()
for j in a b; do
  ids+=("$(sbatch --parsable -N "$NODES" --ntasks-per-node=1 --mem=64M -J "$j" -o /dev/null --wrap 'sleep 100000')")
done
nodes=$(sinfo -h -p memgang -N -o %N | paste -sd,)
state_of() { squeue -h -j "$1" -o %T; }
until_running() {
  for _ in $(seq 150); do [ "$(state_of "$1")" = RUNNING ] && return 0; sleep 0.2; done
  echo "slurm_poll: job $1 is $(state_of "$1"), not RUNNING, after 30 s" >&2; exit 1
}
: > "$out/rows.txt"
row() { printf '%s\t%s\n' "$1" "$2" >> "$out/rows.txt"; }

step "a: nothing polls"
scontrol update JobId="${ids[0]}" Partition=memgang-run ReqNodeList="$nodes"
until_running "${ids[0]}"
python3 bench/slurm_poll.py measure "$out/a.json" "$WINDOW" $daemons
row a "nothing (job a started by hand)"

controller_row() { # NAME LABEL BIN POLL
  step "$1: $2"
  "$3" slurm run --munge-socket "$STATE_DIR/munge/munge.socket" --quantum "$POLL_QUANTUM" --poll "$4" \
    2> "$out/$1.log" &
  local pid=$!
  # It takes job a back (running) and keeps b queued: 5 s for its hello
  # to the agents and first polls, then the window.
  sleep 5
  python3 bench/slurm_poll.py measure "$out/$1.json" "$WINDOW" $daemons poller=$pid
  kill "$pid"
  wait "$pid" || true
  [ "$(state_of "${ids[0]}")" = RUNNING ] || { echo "slurm_poll: job a is $(state_of "${ids[0]}") after $1" >&2; exit 1; }
  row "$1" "$2"
}
for p in $POLLS; do
  label="memgang slurm run --poll $p"
  [ "$p" = 500ms ] && label="$label (default)"
  controller_row "poll-$p" "$label" "$bin" "$p"
done
[ -z "$BEFORE_BIN" ] || controller_row poll-500ms-before "the same, controller before the change ($BEFORE_BIN)" "$BEFORE_BIN" 500ms

step "squeue-json: a loop runs squeue --json every 500 ms"
python3 bench/slurm_poll.py measure "$out/squeue-json.json" "$WINDOW" $daemons --every 0.5 -- squeue --json
row squeue-json "a loop: squeue --json every 500 ms"
step "squeue-text: a loop runs squeue's text query every 500 ms"
python3 bench/slurm_poll.py measure "$out/squeue-text.json" "$WINDOW" $daemons --every 0.5 -- \
  squeue -h -a -t all -p memgang,memgang-run -o '%i|%T|%D|%m|%P|%j'
row squeue-text "a loop: squeue's text of the two partitions (slurmctl::jobs) every 500 ms"
scripts/slurm-cluster down > /dev/null

{
  echo "CPU while memgang's controller only polls: $NODES nodes, two $NODES-node jobs (one runs, one waits), quantum $POLL_QUANTUM, ${WINDOW} s a row, per minute"
  echo
  python3 bench/slurm_poll.py table "$out"
  echo
  printf 'machine: %s CPUs, Linux %s, Slurm %s\n' "$(nproc)" "$(uname -r)" "$(slurmd -V | awk '{print $2}')"
} | tee "$out/table.md"
echo "results in $out"
