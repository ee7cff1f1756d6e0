"""bench/realapps.sh's table over ROUNDS rounds (DIR/round-1, ...): every
run's overhead in each round against that round's batch run, the median,
and what moves with it.

A single run here moves by 5-10% (the same batch run took 55.6 and 60.3 s,
docs/realapps.md), as much as the 5% target; the rounds took turns (batch,
lru, so/ao/ai, grown), so drift falls on all runs alike, and the median is
the figure to hold against the target. Per app and run:
- makespan and overhead in each round, the median overhead, the median of
  the rounds' cuts against lru (paper 000 Fig. 7c);
- the median of the seconds its switches took;
- its jobs' running time (the sum of their quanta, switches left out)
  over the same round's batch run, per round: more means the jobs computed
  slower between switches, not that the switches took long; and their CPU
  seconds (a program with spinning worker threads, such as OpenBLAS's,
  uses CPU in proportion to its running time).
Each job's check against the same round's batch run: all rounds together.
A second table: each run's time account (realapps_account.py), the median
of each part over the rounds.
"""
import glob
import json
import os
import re
import statistics
import sys

import realapps_account
from realapps_table import check

ORDER = {"batch": 0, "lru": 1, "so": 2, "so-ao": 3, "so-ao-ai": 4, "so-ao-ai-share5": 5,
         "so-ao-ai-share2.5": 5}


def unq(run_name):
    """A run's name without its quantum ("q10s-lru" -> "lru")."""
    return re.sub(r"^q[^-]+-", "", run_name)


def label(run_name):
    return unq(run_name).replace("-", "/").replace("/share", ", grows <= ") + (
        "%" if "share" in run_name else "")


def running(run):
    """Seconds the run's jobs ran, together: the sum of their quanta."""
    return sum(i["end_s"] - i["start_s"] for i in run["timeline"])


def main(d):
    rounds = sorted(glob.glob(os.path.join(d, "round-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
    if not rounds:
        sys.exit(f"{d}: no round-N directories (ROUNDS=1 runs print realapps_table.py's table)")
    # runs[(app, name)][round index] = results JSON
    runs = {}
    for k, r in enumerate(rounds):
        for f in glob.glob(os.path.join(r, "*.json")):
            base = os.path.basename(f)[:-5]
            if base.startswith(("bandwidth", "random-reads")):
                continue
            app, name = base.split("-", 1)
            runs.setdefault((app, name), {})[k] = json.load(open(f))
    n = len(rounds)
    print(f"{n} rounds; overhead against the same round's batch run")
    print()
    print("| app | run | makespan per round (s) | overhead per round | median overhead "
          "| cut vs lru (median) | switches took (s, median) | jobs' running time over batch per round (s) "
          "| jobs' CPU per round (s) | checks as batch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (app, name) in sorted(runs, key=lambda k: (k[0], ORDER.get(unq(k[1]), 9))):
        by_round = runs[(app, name)]
        batch = runs.get((app, "batch"), {})
        lru = next((v for (a, k), v in runs.items() if a == app and unq(k) == "lru"), {})
        spans, ovs, cuts, took, cpu, slower = [], [], [], [], [], []
        ok, total = 0, 0
        for k in range(n):
            run = by_round.get(k)
            if run is None:
                spans.append("-")
                continue
            spans.append(f"{run['makespan_s']:.1f}")
            cpu.append(f"{sum(j['cpu_s'] for j in run['jobs']):.1f}")
            took.append(sum(s["took_s"] for s in run.get("switches", [])))
            b = batch.get(k)
            if b is None or name == "batch":
                continue
            tb = b["makespan_s"]
            slower.append(f"{running(run) - running(b):.1f}")
            ovs.append(run["makespan_s"] / tb - 1)
            lr = lru.get(k)
            if lr and unq(name) != "lru" and lr["makespan_s"] > tb:
                cuts.append(1 - (run["makespan_s"] - tb) / (lr["makespan_s"] - tb))
            want = {j["name"]: check(j) for j in b["jobs"]}
            for j in run["jobs"]:
                total += 1
                got = check(j)
                ok += bool(got) and got == want.get(j["name"])
        ov_s = " ".join(f"{o * 100:.1f}%" for o in ovs) or "-"
        med = f"{statistics.median(ovs) * 100:.1f}%" if ovs else "-"
        cut = f"{statistics.median(cuts) * 100:.0f}%" if cuts else "-"
        took_s = f"{statistics.median(took):.1f}" if took and name != "batch" else "-"
        checks = f"{ok} of {total}" if total else "-"
        print(f"| {app} | {label(name)} | {' '.join(spans)} | {ov_s} | {med} | {cut} | {took_s} "
              f"| {' '.join(slower) or '-'} | {' '.join(cpu)} | {checks} |")

    print()
    print(f"Time account, median over the {n} rounds (s, and share of the makespan):")
    print()
    print(realapps_account.HEADER)
    print(realapps_account.RULE)
    for (app, name) in sorted(runs, key=lambda k: (k[0], ORDER.get(unq(k[1]), 9))):
        v = realapps_account.median_values(realapps_account.values(r) for r in runs[(app, name)].values())
        print(f"| {app} | {label(name)} | " + " | ".join(realapps_account.cells(v)) + " |")

    print()
    print(f"Counters, median over the {n} rounds (summed over the jobs; bench/realapps_account.py):")
    print()
    print(realapps_account.COUNTERS_HEADER)
    print(realapps_account.COUNTERS_RULE)
    for (app, name) in sorted(runs, key=lambda k: (k[0], ORDER.get(unq(k[1]), 9))):
        c = realapps_account.median_counters(
            realapps_account.counter_values(r) for r in runs[(app, name)].values())
        print(f"| {app} | {label(name)} | " + " | ".join(realapps_account.counter_cells(c)) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
