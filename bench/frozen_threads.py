"""The frozen threads of memgang's jobs, observed (bench/frozen_threads.sh).

    python3 bench/frozen_threads.py OBSERVED       read until SIGTERM, then
                                                   write OBSERVED
    python3 bench/frozen_threads.py --table OBSERVED RUN.json

Reading: every 0.5 s, each cgroup under the v1 freezer whose name holds
"memgang"; of each thread of one that reads FROZEN, its state, wchan and
kernel stack (/proc/TID/stack, root); of every thread, frozen or not, its
block I/O delay (/proc/TID/stat's delayacct_blkio_ticks, which the kernel
adds when a wait ends). Written: one line per (cgroup, command, state,
wchan) with its count, then the first stack seen of it; one line per
thread whose block I/O delay grew from its last reading while frozen to
its first after the thaw; one line per such growth over JUMP_S, with
/proc/uptime at that reading.
The table: those lines, most seen first, the threads by what their delay
grew across thaws, each growth over JUMP_S beside the uptime then, and
each job's io wait while frozen, while running and dropped (the time
account's, docs/results.md) and the account's samples' time per switch
from RUN.json.
"""
import collections
import json
import os
import signal
import sys
import time

ROOT = "/sys/fs/cgroup/freezer"
EVERY_S = 0.5  # a 10 s frozen period is read about 20 times
TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # /proc/TID/stat counts delays in ticks
JUMP_S = 60  # longer than any freeze of a q = 10 s pair: no wait's length


def observe(path):
    seen = collections.Counter()
    stacks = {}
    # tid -> (cgroup, command, blkio ticks at its last frozen reading)
    last_frozen = {}
    across_thaw = collections.Counter()  # (cgroup, command, tid) -> ticks
    # Growths longer than any freeze, each with the machine's uptime then:
    # is the kernel's delay the time since boot (a wait with no start)?
    jumps = []

    def write(*_):
        with open(path, "w") as f:
            for key, n in seen.most_common():
                f.write(json.dumps({"n": n, "key": key, "stack": stacks[key]}) + "\n")
            for key, ticks in across_thaw.most_common():
                f.write(json.dumps({"thread": key, "blkio_s": ticks * TICK_S}) + "\n")
            for key, jump_s, uptime_s in jumps:
                f.write(json.dumps({"jump": key, "blkio_s": jump_s, "uptime_s": uptime_s}) + "\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, write)
    while True:
        for d, _, files in os.walk(ROOT):
            if "memgang" not in d or "freezer.state" not in files:
                continue
            try:
                frozen = open(os.path.join(d, "freezer.state")).read().strip() == "FROZEN"
                tids = open(os.path.join(d, "tasks")).read().split()
            except OSError:
                continue
            for t in tids:
                try:
                    stat = open(f"/proc/{t}/stat").read()
                    wchan = open(f"/proc/{t}/wchan").read() if frozen else ""
                    stack = open(f"/proc/{t}/stack").read() if frozen else ""
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                # Fields after the command: state is the 3rd of stat, blkio
                # ticks the 42nd.
                rest = stat[stat.rindex(")") + 2:].split()
                state, blkio = rest[0], int(rest[39])
                cg = os.path.basename(d)
                if frozen:
                    last_frozen[t] = (cg, comm, blkio)
                elif t in last_frozen:
                    was = last_frozen.pop(t)
                    across_thaw[(was[0], was[1], t)] += blkio - was[2]
                    if (blkio - was[2]) * TICK_S > JUMP_S:
                        uptime = float(open("/proc/uptime").read().split()[0])
                        jumps.append(((was[0], was[1], t), (blkio - was[2]) * TICK_S, uptime))
                if not frozen:
                    continue
                key = (cg, comm, state, wchan)
                seen[key] += 1
                stacks.setdefault(key, " < ".join(
                    l.split("] ", 1)[-1].split("+")[0] for l in stack.splitlines()[:5]))
        time.sleep(EVERY_S)


def table(path, run_json):
    print("| times seen | cgroup | command | state | wchan | kernel stack (first seen, innermost first) |")
    print("|---|---|---|---|---|---|")
    total, frozen_sleep = 0, 0
    threads, jumps = [], []
    for line in open(path):
        o = json.loads(line)
        if "thread" in o:
            threads.append(o)
            continue
        if "jump" in o:
            jumps.append(o)
            continue
        cg, comm, state, wchan = o["key"]
        total += o["n"]
        frozen_sleep += o["n"] if wchan == "__refrigerator" else 0
        print(f"| {o['n']} | {cg} | {comm} | {state} | {wchan} | {o['stack']} |")
    print()
    print(f"{frozen_sleep} of {total} observations in __refrigerator (the freezer's own sleep)")
    print()
    print("Threads whose block I/O delay grew from their last frozen reading to their first after the thaw")
    print("(/proc/TID/stat delayacct_blkio_ticks; the kernel adds a wait when it ends), summed over the run:")
    print()
    print("| cgroup | command | tid | block I/O delay added across thaws (s) |")
    print("|---|---|---|---|")
    for o in threads:
        if o["blkio_s"] > 0:
            cg, comm, tid = o["thread"]
            print(f"| {cg} | {comm} | {tid} | {o['blkio_s']:.2f} |")
    print()
    if jumps:
        print(f"Growths across one thaw of over {JUMP_S} s, beside the machine's uptime then:")
        print()
        print("| cgroup | command | tid | block I/O delay added (s) | uptime (s) |")
        print("|---|---|---|---|---|")
        for o in jumps:
            cg, comm, tid = o["jump"]
            print(f"| {cg} | {comm} | {tid} | {o['blkio_s']:.2f} | {o['uptime_s']:.2f} |")
        print()
    run = json.load(open(run_json))
    for j in run["jobs"]:
        a = j.get("account") or {}
        # Absent in runs before the account dropped anything.
        dropped = f"{a['io_wait_dropped_s']:.2f}" if "io_wait_dropped_s" in a else "-"
        print(f"job {j['name']}: io_wait_while_frozen_s {a.get('io_wait_while_frozen_s', 0):.2f}, "
              f"io_wait_s {a.get('io_wait_s', 0):.2f} (width {a.get('width', 1):.2f}), "
              f"io_wait_dropped_s {dropped}, frozen_s {a.get('frozen_s', 0):.1f}")
    ms = sorted(1000 * (s.get("steps") or {}).get("sampling_s", 0) for s in run["switches"])
    if ms:
        print(f"the account's samples: {ms[len(ms) // 2]:.2f} ms a switch (median), "
              f"{ms[-1]:.2f} ms at most, over {len(ms)} switches")


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2], sys.argv[3])
    else:
        observe(sys.argv[1])
