# Shared by the benchmarks: setup and the two-jobs experiment. Sourced.
source scripts/lib.sh

# Commands to run when the benchmark exits, last registered first (a bench
# adds its own to bench_setup's: one trap, not one that replaces another).
_on_exit=()
on_exit() {
  _on_exit=("$1" "${_on_exit[@]}")
  trap 'for _c in "${_on_exit[@]}"; do eval "$_c"; done' EXIT
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
}

POOL=1G
MIB=700          # 70% of the pool per job: one fits, two do not
QUANTUM=10s
# Iterations and compute per page chosen so that each job alone runs about
# 30 s: a few 10 s quanta each, as in the paper's runs of several quanta.
declare -A ITERS=([seq]=${SEQ_ITERS:-40} [random]=${RANDOM_ITERS:-30} [2rank]=${RANK_ITERS:-80})
declare -A ARGS=(
  [seq]="--pattern seq --compute ${SEQ_COMPUTE:-4}"
  [random]="--pattern random --compute ${RANDOM_COMPUTE:-4}"
  [2rank]="--pattern stencil --compute ${RANK_COMPUTE:-4} --ranks 2"
)

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
