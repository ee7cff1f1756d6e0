# Helpers shared by the scripts; sourced, not run.

step() { printf '\n==> %s\n' "$*" >&2; }

need_root_or_warn() {
  if [ "$(id -u)" -ne 0 ]; then
    printf '\n*** WARNING: not root: the tests that need cgroups and swap are IGNORED (cargo lists them as ignored). Run as root for the full suite. ***\n\n' >&2
  fi
}

ensure_toolchain() {
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    step "installing Rust (rustup, stable)"
    if command -v rustup >/dev/null 2>&1; then
      rustup toolchain install stable --profile minimal -c rustfmt,clippy
    else
      echo "cargo not found and rustup not installed: install Rust from your distribution or rustup, then rerun" >&2
      exit 1
    fi
  fi
  # rustfmt and clippy are part of every check; add them if the toolchain lacks them.
  if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  fi
}

# mkswap (util-linux) makes swap files; tmux is the real terminal
# `memgang top` is tested in; everything else is the kernel's.
ensure_tools() {
  if ! command -v tmux >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      step "installing tmux (the terminal memgang top's test runs it in)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; }
    else
      # Only a root test runs it.
      echo "tmux not found: install it for memgang top's test (a root test)" >&2
    fi
  fi
  if ! command -v mkswap >/dev/null 2>&1 && [ ! -x /usr/sbin/mkswap ] && [ ! -x /sbin/mkswap ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      step "installing util-linux (mkswap)"
      apt-get update -qq && apt-get install -y -qq util-linux
    else
      echo "mkswap not found: install util-linux" >&2
      exit 1
    fi
  fi
}

# Slurm, munge and Open MPI for the cluster tests (crates/cli/tests/slurm.rs),
# from Debian's packages; scripts/slurm-cluster starts them.
ensure_slurm() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v mpicc >/dev/null && return
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing Slurm, munge and Open MPI (Debian packages) for the cluster tests"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge openmpi-bin libopenmpi-dev >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge openmpi-bin libopenmpi-dev >/dev/null; }
  fi
}

# ensure_mpi_app CMD WHAT PACKAGE...: an MPI program from Debian's
# packages (codes nobody here wrote) with Open MPI, installed when root
# can (apt-get), for WHAT.
ensure_mpi_app() {
  local cmd=$1 what=$2
  shift 2
  command -v "$cmd" >/dev/null && command -v mpirun >/dev/null && return
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing $* (Debian packages) for $what"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" openmpi-bin >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" openmpi-bin >/dev/null; }
  fi
  command -v "$cmd" >/dev/null || { echo "$cmd is not installed and cannot be (needs root and apt-get: $*)" >&2; return 1; }
}

# HPC Challenge, for bench/realapps.sh's hpcc pair and the dynamic
# coscheduling test of an MPI job over TCP.
ensure_hpcc() { ensure_mpi_app hpcc "the hpcc pair" hpcc; }

# LAMMPS (molecular dynamics), for bench/realapps.sh's lammps pair.
ensure_lammps() { ensure_mpi_app lmp "the lammps pair" lammps; }

# For the simulator's benchmarks (no root): GNU time, which reports the
# CPU time they print, and the memgang to time in $bin: BIN if given, else
# a release build of this tree. $1 names the bench for the error.
sim_bench_bin() {
  command -v /usr/bin/time >/dev/null || { echo "bench/$1.sh needs /usr/bin/time (GNU time: apt-get install time)" >&2; exit 1; }
  if [[ -n ${BIN:-} ]]; then
    bin=$BIN
  else
    cargo build --release -p memgang --quiet
    bin=target/release/memgang
  fi
}

# The CPU seconds (user + system) in GNU time's `-v` file: what a
# simulation itself took on its one core, where the wall time on a shared
# machine counts the others' turns too.
cpu_seconds() {
  awk -F': ' '/^\t(User|System) time \(seconds\)/ {s += $2} END {printf "%.2f\n", s}' "$1"
}

check_leftovers() {
  local bad=0
  for root in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/freezer /sys/fs/cgroup/unified; do
    for d in "$root"/memgang*; do
      if [ -d "$d" ]; then echo "LEFTOVER cgroup: $d" >&2; bad=1; fi
    done
  done
  if grep -q memgang-test /proc/swaps 2>/dev/null; then
    echo "LEFTOVER swap: $(grep memgang-test /proc/swaps)" >&2; bad=1
  fi
  # scripts/slurm-cluster's nodes (network namespaces on a bridge).
  local ns
  ns=$(ip netns list 2>/dev/null | grep '^memgang-' || true)
  if [ -n "$ns" ]; then echo "LEFTOVER network namespaces: $ns" >&2; bad=1; fi
  if ip link show memgang-br0 >/dev/null 2>&1; then echo "LEFTOVER bridge memgang-br0" >&2; bad=1; fi
  local stopped
  stopped=$(ps -eo pid=,stat=,args= | awk '$2 ~ /^T/' | grep memgang || true)
  if [ -n "$stopped" ]; then echo "LEFTOVER stopped processes: $stopped" >&2; bad=1; fi
  local daemons
  daemons=$(ps -eo pid=,args= | grep -E 'memgang-slurm-test|slurmstepd' | grep -v grep || true)
  if [ -n "$daemons" ]; then echo "LEFTOVER Slurm processes: $daemons" >&2; bad=1; fi
  if [ "$bad" -ne 0 ]; then
    echo "tests left things behind (see above)" >&2
    exit 1
  fi
  echo "no leftovers" >&2
}

# The tests' Python packages (scripts/requirements-test.txt: memadapt's
# Python side with numpy and pytest, scipy, the Prometheus client's parser
# for memgangd's metrics) in a repo-local virtual environment, .venv (the
# tests find it there), so that the system's Python is untouched.
ensure_python_env() {
  local venv=.venv
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import numpy, pytest, scipy, prometheus_client' 2>/dev/null; then
    return
  fi
  local py
  py=$(command -v python3 || true)
  if [ -z "$py" ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      step "installing python3 (the memadapt Python tests)"
      apt-get update -qq && apt-get install -y -qq python3 python3-venv
      py=$(command -v python3)
    else
      echo "python3 not found: install Python 3.8 or later (memadapt's Python package is tested)" >&2
      exit 1
    fi
  fi
  step "creating $venv (scripts/requirements-test.txt: memadapt's Python tests, the real-application tests, the metrics check)"
  if ! "$py" -m venv "$venv" 2>/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && apt-get install -y -qq python3-venv
      rm -rf "$venv"
      "$py" -m venv "$venv"
    else
      echo "$py -m venv failed: install the venv module (python3-venv)" >&2
      exit 1
    fi
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
}

# memadapt's wheel as a user installs it: `pip install crates/memadapt/python`
# into a fresh venv (setuptools-rust builds the library and bundles it),
# then its tests from outside the repo, without MEMADAPT_LIB or PYTHONPATH:
# the bundled library must be the one that loads.
test_memadapt_wheel() {
  local venv
  venv=$(mktemp -d /tmp/memgang-wheel.XXXXXX)
  # shellcheck disable=SC2064 # expand now: the trap outlives this function
  trap "rm -rf '$venv'" RETURN
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check crates/memadapt/python pytest
  rm -rf crates/memadapt/python/build crates/memadapt/python/memadapt.egg-info
  local lib
  lib=$(cd / && env -u MEMADAPT_LIB -u PYTHONPATH "$venv/bin/python" -c 'import memadapt; print(memadapt.library_path())')
  case $lib in
    "$venv"/*) ;;
    *) echo "the wheel's memadapt loaded $lib, not its bundled library" >&2; return 1 ;;
  esac
  (cd / && env -u MEMADAPT_LIB -u PYTHONPATH "$venv/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/crates/memadapt/python/tests")
}

# cargo-deb (crates.io), which builds the Debian package (scripts/deb).
ensure_cargo_deb() {
  command -v cargo-deb >/dev/null 2>&1 && return
  step "installing cargo-deb (crates.io) for the Debian package"
  cargo install --locked --quiet cargo-deb
}

# --- The VM lanes (scripts/vm: Debian 12, memgangd; scripts/vm-slurm:
# Debian 13, Slurm). Each boots a Debian guest under QEMU (TCG) that runs
# its lane script from a systemd unit and powers off; the results come
# back over the guest's second serial port.

# vm_skip LANE WHY: the lane cannot run here; say so loudly, exit 77.
vm_skip() {
  printf '\n******************************************************************\n' >&2
  printf '*** %s SKIPPED (NOT passed): %s\n' "$1" "$2" >&2
  printf '******************************************************************\n\n' >&2
  exit 77
}

# vm_bootstrap_tar SUITE INCLUDE CACHE [MMDEBSTRAP_ARG...]: the path of
# the bootstrap tar of these, cached or not (keyed by what goes in).
vm_bootstrap_tar() {
  local suite=$1 include=$2 cache=$3 key
  shift 3
  key=$(printf '%s' "$suite minbase $include${*:+ $*}" | sha256sum | cut -c1-12)
  echo "$cache/$suite-$key.tar"
}

# vm_bootstrap SUITE INCLUDE CACHE NICENESS [MMDEBSTRAP_ARG...]: a minbase
# root of Debian SUITE with the packages INCLUDE (comma-separated), built
# on the host by mmdebstrap (apt and dpkg run natively, not in the
# guest), as a tar cached in CACHE; prints its path.
vm_bootstrap() {
  local suite=$1 include=$2 cache=$3 niceness=$4 tar
  shift 4
  tar=$(vm_bootstrap_tar "$suite" "$include" "$cache" "$@")
  if [ ! -s "$tar" ]; then
    step "mmdebstrap $suite (cached in $tar)"
    nice -n "$niceness" mmdebstrap --quiet --format=tar --variant=minbase --include="$include" "$@" "$suite" "$tar.tmp" >&2
    mv "$tar.tmp" "$tar"
  fi
  echo "$tar"
}

# vm_lane_root ROOT HOSTNAME DESCRIPTION: the guest's files for a lane:
# fstab, no gettys, and a unit that runs /opt/memgang-lane/lane.sh on
# boot with its output on the second serial port, then powers off.
vm_lane_root() {
  local root=$1
  echo "$2" >"$root/etc/hostname"
  printf '/dev/vda / ext4 defaults 0 1\n' >"$root/etc/fstab"
  # Nobody logs in (the console is a file): no gettys to wait for.
  for u in getty-static.service serial-getty@ttyS0.service getty@tty1.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$u"
  done
  cat >"$root/etc/systemd/system/memgang-lane.service" <<UNIT
[Unit]
Description=$3
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/opt/memgang-lane/lane.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS1
ExecStopPost=/bin/systemctl poweroff --no-block
[Install]
WantedBy=multi-user.target
UNIT
  ln -s /etc/systemd/system/memgang-lane.service "$root/etc/systemd/system/multi-user.target.wants/memgang-lane.service"
}

# vm_boot KERNEL INITRD IMG OUT TIMEOUT NICENESS MEMORY_MIB [APPEND...]:
# boot the image (QEMU, TCG, 2 CPUs) until the guest powers off or
# TIMEOUT seconds pass (then qemu is stopped by pid); the lane's output
# in OUT/lane.log, the console in OUT/console.log. Sets vm_took (s).
vm_boot() {
  local kernel=$1 initrd=$2 img=$3 out=$4 timeout=$5 niceness=$6 mem=$7 start pid
  shift 7
  rm -f "$out/lane.log" "$out/console.log"
  start=$(date +%s)
  nice -n "$niceness" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$mem" \
    -nodefaults -display none -no-reboot \
    -kernel "$kernel" -initrd "$initrd" \
    -append "root=/dev/vda rw console=ttyS0 systemd.show_status=error panic=-1 $*" \
    -drive "file=$img,format=raw,if=virtio" -device virtio-rng-pci \
    -serial "file:$out/console.log" -serial "file:$out/lane.log" &
  # The caller's exit trap stops it too (vm_stop_qemu).
  vm_qemu_pid=$!
  pid=$vm_qemu_pid
  while kill -0 "$pid" 2>/dev/null; do
    if [ $(($(date +%s) - start)) -ge "$timeout" ]; then
      echo "the VM did not power off within ${timeout}s; stopping qemu (pid $pid)" >&2
      break
    fi
    sleep 5
  done
  vm_stop_qemu
  vm_took=$(($(date +%s) - start))
}

# Stop the lane's qemu, if it runs, by its pid.
vm_stop_qemu() {
  local pid=${vm_qemu_pid:-}
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    sleep 2
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  vm_qemu_pid=
}

# lintian (Debian's package checker), for scripts/deb --lintian.
ensure_lintian() {
  command -v lintian >/dev/null 2>&1 && return
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing lintian (Debian package) to check the packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lintian >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lintian >/dev/null; }
  fi
  command -v lintian >/dev/null 2>&1 || { echo "lintian is not installed and cannot be (needs root and apt-get)" >&2; exit 1; }
}
