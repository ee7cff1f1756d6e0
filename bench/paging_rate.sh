#!/usr/bin/env bash
# How fast this kernel pages a stopped process out and in with nothing
# else running: the ceiling under a switch (issue 12), beside the disk's
# sequential bandwidth. memgang's own calls (memgang_linux::paging), from
# crates/linux/examples/paging_rate.rs:
# 1. a synthetic process of RATE_MIB (512) MiB on small pages, on huge
#    pages, and on small pages collapsed to huge ones just before the
#    page-out (the collapse timed apart), RATE_ROUNDS (3) rounds: page-out
#    (MADV_PAGEOUT), the drain memgang does after it (reclaiming the
#    group until the writes have left it), page-in (WILLNEED, then the
#    fault-in);
# 2. a LAMMPS job as bench/realapps.sh runs it (bench/apps/lammps.sh,
#    LAMMPS_SIDE^3 cells, 2 MPI ranks, small pages), stopped after 25 s:
#    its two ranks paged out, drained and paged in, in turn and with one
#    thread per rank, and in turn with the group limited to what comes
#    back and 32 MiB (memgang's ROOM_MARGIN: a pool that holds one job),
#    LAMMPS_ROUNDS (2) times each, alternating.
# vs_disk: each row's page-out + drain + page-in over the disk's limit for
# its bytes (out at the write rate, in at the read rate), as the issue's
# switch target (at most 1.25x) counts a switch.
#
#   sudo bench/paging_rate.sh [OUT_DIR]   RATE_MIB=512 RATE_ROUNDS=3 LAMMPS_ROUNDS=2
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup paging-rate "${1:-}"
cargo build --release --quiet -p memgang-linux --example paging_rate
rate=target/release/examples/paging_rate
ensure_lammps
memcg=/sys/fs/cgroup/memory
[ -d "$memcg" ] || { echo "bench/paging_rate.sh: the LAMMPS part needs cgroup v1's memory hierarchy at $memcg" >&2; exit 1; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(uname -r)" | tee "$out/table.txt"
"$bin" testbed bandwidth --json > "$out/bandwidth.json"
python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))
print("disk: read %.0f MB/s, write %.0f MB/s (sequential, O_DIRECT)" % (b["read_bytes_per_s"] / 1e6, b["write_bytes_per_s"] / 1e6))' \
  "$out/bandwidth.json" | tee -a "$out/table.txt"

# Each row's out + drain + in against the disk's limit for its bytes.
DISK_BPS=$(python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))
print("%s,%s" % (b["read_bytes_per_s"], b["write_bytes_per_s"]))' "$out/bandwidth.json")
export DISK_BPS
step "a synthetic process of ${RATE_MIB:-512} MiB, ${RATE_ROUNDS:-3} rounds"
"$rate" "${RATE_MIB:-512}" "${RATE_ROUNDS:-3}" | tee -a "$out/table.txt"

# One stopped LAMMPS job in its own memory cgroup, paged by the example.
group=memgang-bench-rate-lammps-$$
lammps_pids() { cat "$memcg/$group/cgroup.procs" 2>/dev/null || true; }
stop_lammps() {
  local p
  for p in $(lammps_pids); do kill -9 "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do [ -z "$(lammps_pids)" ] && break; sleep 0.1; done
  rmdir "$memcg/$group" 2>/dev/null || true
}
on_exit stop_lammps
# The killed jobs cannot remove their working directories: keep them here.
lammps_tmp=$(mktemp -d /tmp/memgang-bench-rate.XXXXXX)
on_exit 'rm -rf "$lammps_tmp"'
step "LAMMPS (${LAMMPS_SIDE:-66}^3 cells, 2 ranks), stopped after 25 s, ${LAMMPS_ROUNDS:-2} rounds"
printf '%-10s %7s %7s %8s %8s %7s %7s %8s %8s %7s\n' ranks out_MiB out_s out_MB/s drain_s in_MiB in_s in_MB/s total_s vs_disk | tee -a "$out/table.txt"
for round in $(seq 1 "${LAMMPS_ROUNDS:-2}"); do
  for mode in in_turn parallel turn_limit; do
    parallel=; limited=
    [ "$mode" = parallel ] && parallel=1
    [ "$mode" = turn_limit ] && limited=1
    mkdir "$memcg/$group"
    # STEPS far beyond 25 s: the job is killed after its page-in.
    TMPDIR=$lammps_tmp bash -c "echo \$\$ > $memcg/$group/cgroup.procs; exec bash bench/apps/lammps.sh ${LAMMPS_SIDE:-66} 100000" \
      > "$out/lammps-$round-$mode.log" 2>&1 &
    # Not the shell's job: it would report the kill on stderr.
    job=$!
    disown
    sleep 25
    ranks=$(pgrep -x lmp | tr '\n' ' ')
    [ "$(wc -w <<<"$ranks")" = 2 ] || { echo "expected 2 lmp ranks, found: '$ranks'" >&2; exit 1; }
    # shellcheck disable=SC2086
    kill -STOP $ranks
    sleep 0.5
    # shellcheck disable=SC2086
    PARALLEL=$parallel LIMITED=$limited "$rate" pids "$group" $ranks 2>>"$out/lammps-$round-$mode.log" | tee -a "$out/table.txt"
    stop_lammps
    while kill -0 "$job" 2>/dev/null; do sleep 0.1; done
  done
done
echo "results: $out"
