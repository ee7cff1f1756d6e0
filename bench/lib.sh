# Shared by the benchmarks: setup and the two-jobs experiment. Sourced.
source scripts/lib.sh

# Commands to run when the benchmark exits, last registered first (a bench
# adds its own to bench_setup's: one trap, not one that replaces another).
_on_exit=()
on_exit() {
  _on_exit=("$1" "${_on_exit[@]}")
  # Every command runs, whatever the one before returned (under set -e a
  # failing one would end the trap and skip the rest).
  trap 'for _c in "${_on_exit[@]}"; do eval "$_c" || true; done' EXIT
}

# Build, check root, make sure there is swap (8G, removed at exit if this
# script added it). Sets $bin and $out (from $1 or a dated default).
bench_setup() {
  local name=$1 dir=${2:-}
  [ "$(id -u)" -eq 0 ] || { echo "bench/$name.sh needs root (cgroups, swap)" >&2; exit 1; }
  ensure_toolchain
  ensure_tools
  cargo build --release --workspace --bins --quiet
  # MEMGANG_BIN: another memgang to run the experiments with (a wrapper
  # that takes a lock, say, on a machine shared with other work).
  bin=${MEMGANG_BIN:-target/release/memgang}
  out=${dir:-bench/results/$name-$(date -u +%Y%m%dT%H%M%SZ)}
  mkdir -p "$out"
  if [ -z "$(swapon --noheadings --show=NAME)" ]; then
    on_exit '"$bin" testbed down >/dev/null' 
    "$bin" testbed up --swap 8G | tee "$out/testbed.txt"
  fi
  # The swap disk's random read rates on the day of the run (one at a
  # time, 8 in flight) and the readahead's pages and cost (128M of demand
  # faults at random and in order): bench/sim_validate.py takes them over
  # a calibration's, since this VM's disk moves from day to day and the
  # simulated lru runs follow it. A build without the options writes none.
  "$bin" testbed bandwidth --json --random-for 2s --faults 128M >"$out/random-reads.json" 2>/dev/null ||
    rm -f "$out/random-reads.json"
}

# no_swap_yet NAME: bench/NAME.sh sizes a swap file of its own, and stops
# here if swap is on that it did not make (another's, or a leftover).
no_swap_yet() {
  [ -z "$(swapon --noheadings --show=NAME)" ] && return
  echo "bench/$1.sh makes a swap file of its own size, and swap is on already:" >&2
  swapon --show >&2
  echo "turn it off first (memgang testbed down), or wait for whoever made it" >&2
  exit 1
}

# own_swap_setup NAME: the opening of bench/NAME.sh, a bench that sizes
# its own swap file (own_swap): a signal ends it through its exit commands
# (swap, cgroups), it needs root and no swap of another's, and it runs the
# release build.
own_swap_setup() {
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  [ "$(id -u)" -eq 0 ] || { echo "bench/$1.sh needs root (cgroups, swap)" >&2; exit 1; }
  no_swap_yet "$1"
  ensure_toolchain
  ensure_tools
  cargo build --release --workspace --bins --quiet
}

# own_swap NAME MIB: a swap file of MIB MiB on /var/tmp's disk for
# bench/NAME.sh ($bin's testbed), removed on every way out; prints the
# testbed's line. Not in a pipeline: its exit command is the shell's.
own_swap() {
  swapfile=/var/tmp/memgang-$1-$$.swap
  on_exit '"$bin" testbed down --path "$swapfile" >/dev/null 2>&1 || swapoff "$swapfile" 2>/dev/null; rm -f "$swapfile"'
  "$bin" testbed up --swap "$2M" --path "$swapfile"
}

# write_jobs FILE NAME POOL QUANTUM N MIB RANKS ARGS...: an experiment of N
# jobs j1..jN, each `memgang-workload --mib MIB ARGS... --seed i` with RANKS
# ranks, declared at MIB; QUANTUM "" leaves the quantum to the policy.
write_jobs() {
  local file=$1 name=$2 pool=$3 quantum=$4 n=$5 mib=$6 ranks=$7 i cmd
  shift 7
  {
    echo "name = \"$name\""
    echo "pool_memory = \"$pool\""
    [ -z "$quantum" ] || echo "quantum = \"$quantum\""
    for i in $(seq 1 "$n"); do
      cmd=$(printf '"%s", ' memgang-workload --mib "$mib" "$@" --seed "$i")
      echo "[[job]]"
      echo "name = \"j$i\""
      echo "command = [${cmd%, }]"
      echo "ranks = $ranks"
      echo "memory = \"${mib}M\""
    done
  } >"$file"
}

# stop_after BATCH_JSON X: seconds to let a run go before stopping it, X
# times its batch run's makespan and at least 60 s (cosched out of core can
# thrash for hours; a collapse is then shown as a bound).
stop_after() {
  python3 -c 'import json,sys; print(max(60, round(float(sys.argv[2]) * json.load(open(sys.argv[1]))["makespan_s"])))' "$1" "$2"
}

POOL=1G
# 70% of the pool per job: one fits, two do not. PAIR_MIB=600 (bench/
# adaptive.sh) tries another size: what the jobs lack at a switch changes.
MIB=${PAIR_MIB:-700}
QUANTUM=10s
# Iterations and compute per page chosen so that each job alone runs about
# 30 s: a few 10 s quanta each, as in the paper's runs of several quanta.
declare -A ITERS=([seq]=${SEQ_ITERS:-40} [random]=${RANDOM_ITERS:-30} [2rank]=${RANK_ITERS:-80})
declare -A ARGS=(
  [seq]="--pattern seq --compute ${SEQ_COMPUTE:-4}"
  [random]="--pattern random --compute ${RANDOM_COMPUTE:-4}"
  [2rank]="--pattern stencil --compute ${RANK_COMPUTE:-4} --ranks 2"
)

# The real applications' pairs (bench/apps/): per app its arguments (about
# 30 s alone on this machine, 2 CPUs) and its declared memory (its steady
# working set; hpcc: its peak alone at N = 5000 was 311 MiB, memgang run's
# peak_anon; lammps: 66^3 cells, 1,149,984 atoms, 382 MiB peak_anon per
# job in bench/results/realapps-lammps-20261127, whose batch ran the two
# in 74-77 s). Used by realapps.sh, realapps_fit.sh and switch_ab.sh.
declare -A APP_ARGS=([cg]="140 ${CG_ITERS:-900}" [stencil]="280 ${STENCIL_ITERS:-120}" [gather]="350 ${GATHER_ITERS:-130}" [hpcc]="${HPCC_N:-5000}" [lammps]="${LAMMPS_SIDE:-66} ${LAMMPS_STEPS:-140}")
declare -A APP_MEM=([cg]=370M [stencil]=370M [gather]=440M [hpcc]=320M [lammps]=400M)

# write_app_pair APP POOL FILE [NAME]: two jobs a and b of bench/apps/APP
# (.sh as it is, .py with the repo's .venv Python) in a POOL, q = 10 s.
write_app_pair() {
  local app=$1 pool=$2 name=${4:-$1} j a
  {
    echo "name = \"$name\""
    echo "pool_memory = \"$pool\""
    echo "quantum = \"10s\""
    for j in a b; do
      echo "[[job]]"
      echo "name = \"$j\""
      if [ -f "bench/apps/$app.sh" ]; then
        printf 'command = ["%s"' "$PWD/bench/apps/$app.sh"
      else
        printf 'command = ["%s", "%s"' "$PWD/.venv/bin/python" "$PWD/bench/apps/$app.py"
      fi
      for a in ${APP_ARGS[$app]}; do printf ', "%s"' "$a"; done
      echo "]"
      echo "memory = \"${APP_MEM[$app]}\""
    done
  } > "$3"
}

# write_experiment VARIANT FILE [SCALE [NAME]]: two jobs a and b of the
# variant, each running SCALE times the iterations (so that a longer
# quantum still sees several switches).
write_experiment() {
  local variant=$1 scale=${3:-1} name=${4:-$1} ranks=1 seed=0 cmd j
  [ "$variant" = 2rank ] && ranks=2
  {
    echo "name = \"$name\""
    echo "pool_memory = \"$POOL\""
    echo "quantum = \"$QUANTUM\""
    for j in a b; do
      seed=$((seed + 1))
      cmd=$(printf '"%s", ' memgang-workload --mib $MIB ${ARGS[$variant]} \
        --iterations $((ITERS[$variant] * scale)) --seed $seed)
      echo "[[job]]"
      echo "name = \"$j\""
      echo "command = [${cmd%, }]"
      echo "ranks = $ranks"
      echo "memory = \"${MIB}M\""
    done
  } > "$2"
}

# daemon_bench_setup NAME USER_PREFIX [OUT_DIR]: the opening of the daemon
# benches run against memgangd as other users (daemon_hostile, daemon_soak):
# root and tools checked; $bin_dir (BIN_DIR: binaries already built there,
# default target/release, built here); $out (OUT_DIR or a dated default);
# $work, a directory removed at exit; ${users[@]}, two unprivileged users
# USER_PREFIX-a and -b of the bench's own (the tests use memgang-t-*),
# deleted at exit.
daemon_bench_setup() {
  local name=$1 prefix=$2 u
  [ "$(id -u)" -eq 0 ] || { echo "bench/$name.sh needs root (memgangd, test users)" >&2; exit 1; }
  ensure_toolchain
  ensure_tools
  command -v useradd >/dev/null || { echo "needs useradd (passwd)" >&2; exit 1; }
  bin_dir=${BIN_DIR:-target/release}
  [ -n "${BIN_DIR:-}" ] || cargo build --release --workspace --bins --quiet
  out=${3:-bench/results/${name//_/-}-$(date -u +%Y%m%dT%H%M%SZ)}
  mkdir -p "$out"
  work=$(mktemp -d "/tmp/memgang-bench-${name#daemon_}.XXXXXX")
  chmod 755 "$work"
  on_exit 'rm -rf "$work"'
  users=("$prefix-a" "$prefix-b")
  for u in "${users[@]}"; do
    useradd --no-create-home --shell /usr/sbin/nologin "$u" 2>/dev/null || id "$u" >/dev/null
    on_exit "userdel -f $u 2>/dev/null || true"
  done
}

# daemon_bench_machine: the machine, the binaries and the date, for the
# end of a daemon bench's table.
daemon_bench_machine() {
  printf 'machine: %s, %s CPUs, %s GiB, Linux %s; binaries: %s (git %s)\n' "$(hostname)" "$(nproc)" \
    "$(awk '/MemTotal/ {printf "%.1f", $2 / 2^20}' /proc/meminfo)" "$(uname -r)" "$bin_dir" \
    "$(git rev-parse --short HEAD)"
  date -u +'date: %Y-%m-%d %H:%M UTC'
}
