"""Where a gang run's jobs were off their CPU, from `perf record -a -g -e
sched:sched_switch` (bench/realapps_offcpu.sh): each stretch a task of
COMM spent switched out until its wakeup, by its state then (D: uninterruptible, S: asleep,
R: preempted) and the first kernel frames that are not the scheduler's;
then the page faults that waited for the mmap lock (lock_mm_and_find_vma:
a wait no delay-accounting counter covers, so it is the account's
"unaccounted"), by the seconds since the last switch ended.

    python3 bench/realapps_offcpu.py PERF_SCRIPT_TXT RESULT_JSON [COMM]
"""
import collections
import json
import re
import sys

WAKE = re.compile(r"^\s*(\d+)\s+([\d.]+): sched:sched_wakeup: comm=(.*?) pid=(\d+) ")
EVENT = re.compile(r"^\s*(\d+)\s+([\d.]+): sched:sched_switch: prev_comm=(.*?) prev_pid=(\d+) "
                   r".*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)")
SCHED = {"__schedule", "schedule", "schedule_timeout", "io_schedule", "schedule_preempt_disabled",
         "preempt_schedule_common", "__cond_resched", "rwsem_down_read_slowpath",
         "rwsem_down_write_slowpath"}


def events(path):
    cur = None
    for line in open(path):
        w = WAKE.match(line)
        if w:
            if cur:
                yield cur
            cur = None
            yield (float(w.group(2)), "wakeup", int(w.group(4)), "", -1, [])
            continue
        m = EVENT.match(line)
        if m:
            if cur:
                yield cur
            cur = (float(m.group(2)), m.group(3), int(m.group(4)), m.group(5), int(m.group(7)), [])
        elif cur and line.strip():
            p = line.split()
            if len(p) >= 2 and p[0].startswith("ffffffff"):
                cur[5].append(p[1])
    if cur:
        yield cur


def main(script, result, comm="python"):
    run = json.load(open(result))
    # A stretch off the CPU: from the switch-out to the wakeup (the wait
    # itself; with no wakeup recorded, as for a preemption, to the
    # switch-in: the run queue's wait).
    out, woke, stretches = {}, {}, []
    for t, prev_comm, prev_pid, state, next_pid, stack in events(script):
        if prev_comm == "wakeup":
            if prev_pid in out and prev_pid not in woke:
                woke[prev_pid] = t
            continue
        if prev_comm == comm:
            out[prev_pid] = (t, state, stack)
            woke.pop(prev_pid, None)
        if next_pid in out:
            t0, st, stk = out.pop(next_pid)
            stretches.append((t0, woke.pop(next_pid, t) - t0, st, stk))
    if not stretches:
        print(f"no switch of a {comm} task recorded")
        return
    first = min(s[0] for s in stretches)
    by = collections.defaultdict(float)
    n = collections.Counter()
    for _, d, st, stk in stretches:
        frames = [f for f in stk if f not in SCHED][:4]
        by[(st, " < ".join(frames))] += d
        n[(st, " < ".join(frames))] += 1
    print(f"Off-CPU time of the {comm} tasks (s), largest 12:")
    print()
    print("| s | times | state | kernel frames |")
    print("|---|---|---|---|")
    for k, v in sorted(by.items(), key=lambda x: -x[1])[:12]:
        print(f"| {v:.3f} | {n[k]} | {k[0]} | {k[1]} |")
    # The run's clock starts at its first job's start: about the first
    # switch-out of a job's task (within the run's first ~10 ms).
    ends = [s["at_s"] + s["took_s"] for s in run["switches"]]
    spans = [(s["at_s"], s["at_s"] + s["took_s"]) for s in run["switches"]]
    after = collections.defaultdict(float)
    total = 0.0
    for t0, d, _, stk in stretches:
        if "lock_mm_and_find_vma" not in stk:
            continue
        at = t0 - first
        total += d
        if any(a <= at <= b for a, b in spans):
            key = "inside a switch"
        else:
            done = [e for e in ends if e <= at]
            key = f"{min(5, int(at - max(done)))} s after a switch" if done else "before the first switch"
        after[key] += d
    print()
    print(f"Page faults waiting for the mmap lock: {total:.3f} s in all; the run's unaccounted "
          f"{run.get('account', {}).get('unaccounted_s', float('nan')):.3f} s of {run['makespan_s']:.1f} s")
    print()
    print("| when | s |")
    print("|---|---|")
    for k in sorted(after):
        print(f"| {k} | {after[k]:.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
