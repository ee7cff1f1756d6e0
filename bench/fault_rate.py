"""How fast this kernel brings swapped-out pages back by demand faults, one
process alone with room to spare: the rate the simulator's lru page-in
charges (`PagingModel::demand_read_s`, at `memgang testbed bandwidth`'s
random 4 KiB reads per second at depth 1) measured on the fault path
itself.

Per round: map MIB of anonymous memory on small pages, write every page,
page it all out (MADV_PAGEOUT) until the pages have left the swap cache
(its memory cgroup reclaimed), then touch one byte per page,
in a random order or in order,
and time it: wall seconds, the process's CPU seconds, pages read from
swap (/proc/vmstat pswpin) and major faults; per fault its CPU and wall
time, and faults per second over the disk's random reads per second at
depth 1 (FAULT_RATE_DISK_IOPS). Prints one line per round.

usage: bench/fault_rate.sh [OUT_DIR], which runs it as root with swap in a
memory cgroup (FAULT_RATE_CG); python3 bench/fault_rate.py [MIB] [ROUNDS]
(defaults 512, 3)
"""
import mmap
import os
import random
import sys
import time

MADV_PAGEOUT = 21  # linux/mman.h; Python's mmap module does not name it
PAGE = mmap.PAGESIZE


def vmstat(*keys):
    v = dict(l.split() for l in open("/proc/vmstat"))
    return [int(v[k]) for k in keys]


def drain():
    """Pages paged out stay in the swap cache until reclaimed, and a fault
    on them is minor: reclaim this process's memory cgroup (FAULT_RATE_CG,
    cgroup v1, set up by bench/fault_rate.sh) so that the faults read the
    disk, as after a real quantum."""
    cg = os.environ.get("FAULT_RATE_CG")
    if not cg:
        print("fault_rate.py: FAULT_RATE_CG not set, so the paged-out pages stay in the swap "
              "cache and most faults are minor: run bench/fault_rate.sh", file=sys.stderr)
        return
    with open(os.path.join(cg, "memory.force_empty"), "w") as f:
        f.write("0")


def round_(mib, order, seed):
    pages = mib * (1 << 20) // PAGE
    m = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_NOHUGEPAGE)
    for i in range(pages):
        m[i * PAGE] = (i * 7 + 1) & 0xFF
    idx = list(range(pages))
    if order == "random":
        random.Random(seed).shuffle(idx)
    m.madvise(MADV_PAGEOUT)
    drain()
    in0, maj0 = vmstat("pswpin", "pgmajfault")
    w0, c0 = time.monotonic(), time.process_time()
    s = 0
    for i in idx:
        s += m[i * PAGE]
    wall, cpu = time.monotonic() - w0, time.process_time() - c0
    in1, maj1 = vmstat("pswpin", "pgmajfault")
    m.close()
    return pages, wall, cpu, in1 - in0, maj1 - maj0


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    # The disk's random 4 KiB reads per second at depth 1, if the bench
    # passes them: each row's faults per second over it.
    disk = float(os.environ.get("FAULT_RATE_DISK_IOPS", "0"))
    print(f"{'order':<7} {'round':>5} {'MiB':>5} {'pages':>7} {'wall_s':>7} {'cpu_s':>6} {'pswpin':>7} "
          f"{'majflt':>7} {'faults/s':>9} {'pages in/s':>10} {'pages/fault':>11} {'cpu_us/fault':>12} "
          f"{'us/fault':>8} {'x disk':>6}")
    for n in range(1, rounds + 1):
        for order in ("random", "seq"):
            pages, wall, cpu, swin, maj = round_(mib, order, n)
            print(f"{order:<7} {n:>5} {mib:>5} {pages:>7} {wall:>7.2f} {cpu:>6.2f} {swin:>7} {maj:>7} "
                  f"{maj / wall:>9.0f} {swin / wall:>10.0f} {swin / max(maj, 1):>11.2f} "
                  f"{1e6 * cpu / max(maj, 1):>12.1f} {1e6 * wall / max(maj, 1):>8.1f} "
                  + (f"{maj / wall / disk:>6.2f}" if disk else f"{'-':>6}"), flush=True)


if __name__ == "__main__":
    main()
