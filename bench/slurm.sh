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
#   sudo bench/slurm.sh [OUT_DIR]   NODE_COUNTS="2 4" RANK_MIB=180 NODE_POOL=256M SWEEPS=800 SLICE=10
#                                   ROWS="batch memgang slurm-gang slurm-gang-noswap" SELECT=linear|cons_tres
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup slurm "${1:-}"
out=$(cd "$out" && pwd)
# Own names: bench/lib.sh's MIB, POOL and ITERS are the one-node pair's.
NODE_COUNTS=${NODE_COUNTS:-2 4} RANK_MIB=${RANK_MIB:-180} NODE_POOL=${NODE_POOL:-256M} SWEEPS=${SWEEPS:-800}
SLICE=${SLICE:-10}  # seconds: Slurm's SchedulerTimeSlice and memgang's quantum
ROWS=${ROWS:-batch memgang slurm-gang slurm-gang-noswap} SELECT=${SELECT:-linear}
export STATE_DIR=${STATE_DIR:-/run/memgang-slurm-bench}
export SLURM_CONF=$STATE_DIR/slurm.conf
on_exit 'scripts/slurm-cluster down >/dev/null 2>&1 || true'
scripts/slurm-cluster down >/dev/null
command -v mpicc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null
mkdir -p "$out/work"
mpicc -O2 bench/slurm/mpi_sweep.c -o "$out/work/mpi_sweep"
# The emulated nodes share one machine: ranks talk TCP over loopback, as
# on a real cluster (shared memory between "nodes" is not what is measured).
# "sleep 2" first: Slurm's gang scheduler suspends a job as it starts, and
# a suspension that catches mpirun launching its daemons fails the job
# (ORTE: "proc not running - cannot relay"; bench/results/slurm-launch-at-start).
job_cmd="sleep 2; mpirun --allow-run-as-root --mca btl self,tcp $out/work/mpi_sweep $RANK_MIB $SWEEPS"

submit_pair() { # DIR NODES
  for j in a b; do
    sbatch -N "$2" --ntasks-per-node=1 --mem="${RANK_MIB}M" -J "$j" -o "$1/$j.out" --wrap "$job_cmd" >/dev/null
  done
}

# Poll Slurm until no job is pending or running; print the seconds taken.
wait_jobs() {
  local t0=$1
  while squeue -h -t PD,R,S,CG,CF | grep -q .; do sleep 0.5; done
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }'
}

job_states() { # DIR
  squeue -h -a -t all -o '%i %j %T' > "$1/states.txt"
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
    job_states "$dir"
    cp "$STATE_DIR"/slurmctld.log "$STATE_DIR"/agent-n1.log "$dir/" 2>/dev/null || true
    scripts/slurm-cluster down > /dev/null
  done
done

python3 bench/slurm_table.py "$out" "$NODE_COUNTS" "$RANK_MIB" "$NODE_POOL" "$SWEEPS" | tee "$out/table.md"
printf 'machine: %s CPUs, Linux %s, Slurm %s, select/%s\n' "$(nproc)" "$(uname -r)" "$(slurmd -V | awk '{print $2}')" "$SELECT" >> "$out/table.md"
rm -rf "$out/work"
echo "results in $out"
