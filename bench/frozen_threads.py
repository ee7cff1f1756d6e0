"""The frozen threads of memgang's jobs, observed (bench/frozen_threads.sh).

    python3 bench/frozen_threads.py OBSERVED       read until SIGTERM, then
                                                   write OBSERVED
    python3 bench/frozen_threads.py --table OBSERVED RUN.json

Reading: every 0.5 s, each cgroup under the v1 freezer whose name holds
"memgang" and that reads FROZEN; each of its threads' state, wchan and
kernel stack (/proc/TID/stack, root). Written: one line per (cgroup,
command, state, wchan) with its count, then the first stack seen of it.
The table: those lines, most seen first, and each job's
io_wait_while_frozen_s (the time account's, docs/results.md) from RUN.json.
"""
import collections
import json
import os
import signal
import sys
import time

ROOT = "/sys/fs/cgroup/freezer"
EVERY_S = 0.5  # a 10 s frozen period is read about 20 times


def observe(path):
    seen = collections.Counter()
    stacks = {}

    def write(*_):
        with open(path, "w") as f:
            for key, n in seen.most_common():
                f.write(json.dumps({"n": n, "key": key, "stack": stacks[key]}) + "\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, write)
    while True:
        for d, _, files in os.walk(ROOT):
            if "memgang" not in d or "freezer.state" not in files:
                continue
            try:
                if open(os.path.join(d, "freezer.state")).read().strip() != "FROZEN":
                    continue
                tids = open(os.path.join(d, "tasks")).read().split()
            except OSError:
                continue
            for t in tids:
                try:
                    stat = open(f"/proc/{t}/stat").read()
                    wchan = open(f"/proc/{t}/wchan").read()
                    stack = open(f"/proc/{t}/stack").read()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                state = stat[stat.rindex(")") + 2]
                key = (os.path.basename(d), comm, state, wchan)
                seen[key] += 1
                stacks.setdefault(key, " < ".join(
                    l.split("] ", 1)[-1].split("+")[0] for l in stack.splitlines()[:5]))
        time.sleep(EVERY_S)


def table(path, run_json):
    print("| times seen | cgroup | command | state | wchan | kernel stack (first seen, innermost first) |")
    print("|---|---|---|---|---|---|")
    total, frozen_sleep = 0, 0
    for line in open(path):
        o = json.loads(line)
        cg, comm, state, wchan = o["key"]
        total += o["n"]
        frozen_sleep += o["n"] if wchan == "__refrigerator" else 0
        print(f"| {o['n']} | {cg} | {comm} | {state} | {wchan} | {o['stack']} |")
    print()
    print(f"{frozen_sleep} of {total} observations in __refrigerator (the freezer's own sleep)")
    run = json.load(open(run_json))
    for j in run["jobs"]:
        a = j.get("account") or {}
        print(f"job {j['name']}: io_wait_while_frozen_s {a.get('io_wait_while_frozen_s', 0):.2f} "
              f"(width {a.get('width', 1):.2f}), frozen_s {a.get('frozen_s', 0):.1f}")


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2], sys.argv[3])
    else:
        observe(sys.argv[1])
