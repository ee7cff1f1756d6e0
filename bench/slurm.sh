#!/usr/bin/env bash
# memgang on Slurm (issue 14): the same pair of MPI jobs (bench/slurm/
# mpi_sweep.c, one rank per node, every rank RANK_MIB MiB, an MPI_Allreduce per
# sweep) on emulated nodes (scripts/slurm-cluster), each node's pool
# NODE_POOL: it holds one job's rank, not both. Rows per node count:
#   batch            memgang's batch policy: one job after the other (the reference)
#   slurm gang       Slurm's own gang scheduling (PreemptMode=GANG), the kernel pages
#   slurm gang noswap  the same with the pool's swap forbidden, as Slurm's
#                    task/cgroup does with ConstrainSwapSpace=yes
#   memgang gang     `memgang slurm run`, gang so/ao/ai
# Prints one table: makespan, overhead against batch, jobs killed or
# failed, and whether every job printed the checksum of the batch run
# (the same sweeps give the same checksum, whatever stopped them between).
# With 1 in NODE_COUNTS, the switch table sets each node count's switch
# against the one-node switch's (both over the disk's limit for their
# bytes: every emulated node pages through this machine's one disk, so N
# nodes move N times one node's bytes; issue 35's target is 1.2x).
# APP=lammps or APP=hpcc runs Debian's MPI codes in place of mpi_sweep
# (bench/apps/), one rank per node of an N-node job, sized per node count
# so that each rank's memory is about what the one-node pair's two ranks
# held each (bench/lib.sh's APP_ARGS), meant so that one job's fits a
# node's pool and two do not (not yet checked at full size: the table
# prints the batch row's peak per node). Their check, in place of the
# checksum, is the job's own:
# LAMMPS's last thermo line, hpcc's residual and verifications (none
# failed), each the same as the batch run's.
#   lammps  SIDE^3 cells with SIDE = 66 (N/2)^(1/3) (1,149,984 atoms at
#           2 nodes, about 575,000 a rank), 280/N steps: the same atoms per
#           node and the same work per job at every node count
#           (LAMMPS_SIDE, LAMMPS_STEPS override); --mem APP_MEM (200M)
#   hpcc    HPL's matrix of side 5000 (N/2)^(1/2) (the same bytes per
#           node), HPCC_N overrides; grid P x Q of the N ranks; --mem APP_MEM (170M)
#   sudo bench/slurm.sh [OUT_DIR]   NODE_COUNTS="2 4" RANK_MIB=180 NODE_POOL=256M SWEEPS=800 SLICE=10
#                                   ROWS="batch memgang slurm-gang slurm-gang-noswap" SELECT=linear|cons_tres
#                                   APP=mpi_sweep|lammps|hpcc
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup slurm "${1:-}"
out=$(cd "$out" && pwd)
# Own names: bench/lib.sh's MIB, POOL and ITERS are the one-node pair's.
NODE_COUNTS=${NODE_COUNTS:-2 4} RANK_MIB=${RANK_MIB:-180} NODE_POOL=${NODE_POOL:-256M} SWEEPS=${SWEEPS:-800}
SLICE=${SLICE:-10}  # seconds: Slurm's SchedulerTimeSlice and memgang's quantum
# Below 5 s, slurmctld and sbatch refuse slurm.conf ("SchedulerTimeSlice
# must be at least 5 seconds") and no job is ever submitted.
[ "$SLICE" -ge 5 ] || { echo "bench/slurm.sh: SLICE is at least 5 (Slurm's least SchedulerTimeSlice), not $SLICE" >&2; exit 2; }
ROWS=${ROWS:-batch memgang slurm-gang slurm-gang-noswap} SELECT=${SELECT:-linear}
APP=${APP:-mpi_sweep}
case $APP in
  mpi_sweep) ;;
  lammps) ensure_lammps ;;
  hpcc) ensure_hpcc ;;
  *) echo "bench/slurm.sh: APP is mpi_sweep, lammps or hpcc, not $APP" >&2; exit 2 ;;
esac
export STATE_DIR=${STATE_DIR:-/run/memgang-slurm-bench}
export SLURM_CONF=$STATE_DIR/slurm.conf
on_exit 'scripts/slurm-cluster down >/dev/null 2>&1 || true'
scripts/slurm-cluster down >/dev/null
command -v mpicc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null
mkdir -p "$out/work"
if [ "$APP" = mpi_sweep ]; then mpicc -O2 bench/slurm/mpi_sweep.c -o "$out/work/mpi_sweep"; fi
# The emulated nodes share one machine: ranks talk TCP over loopback, as
# on a real cluster (shared memory between "nodes" is not what is measured).
# "sleep 2" first: Slurm's gang scheduler suspends a job as it starts, and
# a suspension that catches mpirun launching its daemons fails the job
# (ORTE: "proc not running - cannot relay"; bench/results/slurm-launch-at-start).
# No signal forwarding (docs/slurm.md): Slurm stops every rank itself.
mpi_args="--mca ess_base_forward_signals none"
# The job's command and its --mem for N nodes: "MEM COMMAND...".
job_of() { # NODES
  local n=$1
  case $APP in
    mpi_sweep)
      echo "${RANK_MIB}M sleep 2; mpirun --allow-run-as-root --mca btl self,tcp $mpi_args $out/work/mpi_sweep $RANK_MIB $SWEEPS" ;;
    lammps)
      local side steps
      side=${LAMMPS_SIDE:-$(python3 -c "print(round(66 * ($n / 2) ** (1 / 3)))")}
      steps=${LAMMPS_STEPS:-$((280 / n))}
      echo "${APP_MEM:-200M} sleep 2; NP=$n MPI_BTL=self,tcp MPI_ARGS='$mpi_args' $PWD/bench/apps/lammps.sh $side $steps" ;;
    hpcc)
      local size
      size=${HPCC_N:-$(python3 -c "print(round(5000 * ($n / 2) ** 0.5))")}
      echo "${APP_MEM:-170M} sleep 2; NP=$n MPI_BTL=self,tcp MPI_ARGS='$mpi_args' $PWD/bench/apps/hpcc.sh $size" ;;
  esac
}

submit_pair() { # DIR NODES
  local job mem
  job=$(job_of "$2")
  mem=${job%% *}
  for j in a b; do
    sbatch -N "$2" --ntasks-per-node=1 --mem="$mem" -J "$j" -o "$1/$j.out" --wrap "${job#* }" >/dev/null
  done
  echo "${job#* }" > "$1/job.txt"
}

# Poll Slurm until no job is pending or running; print the seconds taken.
wait_jobs() {
  local t0=$1
  while squeue -h -t PD,R,S,CG,CF | grep -q .; do sleep 0.5; done
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }'
}

# Each job's final state, Slurm's record of it (start, end, and RunTime:
# the time it was not suspended; bench/slurm_table.py splits the overhead
# with it) and each node's pool peak (one job's ranks in the batch row).
job_states() { # DIR NODES
  squeue -h -a -t all -o '%i %j %T' > "$1/states.txt"
  local id
  for id in $(squeue -h -a -t all -o %i); do scontrol show job -o "$id"; done > "$1/jobs.txt"
  local k f
  for k in $(seq "$2"); do
    for f in /sys/fs/cgroup/memory/memgang-slurm-n$k/memory.max_usage_in_bytes /sys/fs/cgroup/memgang-slurm-n$k/memory.peak; do
      if [ -r "$f" ]; then echo "n$k $(cat "$f")"; fi
    done
  done > "$1/pool-peak.txt"
}

for nodes in $NODE_COUNTS; do
  for row in $ROWS; do
    dir=$out/n$nodes-$row
    mkdir -p "$dir"
    step "$nodes nodes: $row"
    case $row in
      batch | memgang)
        scripts/slurm-cluster up --nodes "$nodes" --pool "$NODE_POOL" --mode memgang --quantum "$SLICE" --select "$SELECT" --no-controller > "$dir/cluster.txt"
        policy=gang
        [ $row = batch ] && policy=batch
        submit_pair "$dir" "$nodes"
        "$bin" slurm run --munge-socket "$STATE_DIR/munge/munge.socket" --policy $policy --quantum "${SLICE}s" \
          --switch so/ao/ai --exit-when-idle --json "$dir/memgang.json" 2> "$dir/controller.log"
        python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['makespan_s'])" "$dir/memgang.json" > "$dir/makespan"
        ;;
      slurm-gang*)
        scripts/slurm-cluster up --nodes "$nodes" --pool "$NODE_POOL" --mode gang --quantum "$SLICE" --select "$SELECT" > "$dir/cluster.txt"
        if [ $row = slurm-gang-noswap ]; then
          for k in $(seq "$nodes"); do
            echo "$NODE_POOL" > "/sys/fs/cgroup/memory/memgang-slurm-n$k/memory.memsw.limit_in_bytes"
          done
        fi
        t0=$(date +%s.%N)
        submit_pair "$dir" "$nodes"
        wait_jobs "$t0" > "$dir/makespan"
        ;;
    esac
    job_states "$dir" "$nodes"
    cp "$STATE_DIR"/slurmctld.log "$STATE_DIR"/agent-n1.log "$dir/" 2>/dev/null || true
    scripts/slurm-cluster down > /dev/null
  done
done

python3 bench/slurm_table.py "$out" "$NODE_COUNTS" "$RANK_MIB" "$NODE_POOL" "$SWEEPS" "$APP" "$SLICE" | tee "$out/table.md"
printf 'machine: %s CPUs, Linux %s, Slurm %s, select/%s\n' "$(nproc)" "$(uname -r)" "$(slurmd -V | awk '{print $2}')" "$SELECT" >> "$out/table.md"
rm -rf "$out/work"
echo "results in $out"
