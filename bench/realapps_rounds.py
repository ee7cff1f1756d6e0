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
of each part over the rounds; a third its counters.
A fourth sets each gang run's time over batch against its floors, medians
over the rounds: its switches' seconds; what the kernel alone takes to
page the same bytes (bench/paging_rate.sh's LAMMPS rows in turn, as
switch_steps.py scales them to each switch's bytes; PAGING_RATE names the
table, else the newest under bench/results/); the same bytes at the
disk's sequential rates (DIR's bandwidth-*.json, the slower); the rest
of the time over batch (the jobs computing, waiting or queued longer than
alone); and the overhead the run would have had, had its switches taken
only the kernel's own time. A pool that holds one job of the pair must
move those bytes at every switch, so where the kernel's time alone is more
than the target's share of batch, the quantum, not memgang's switch, sets
the overhead.
"""
import glob
import json
import os
import re
import statistics
import sys

import realapps_account
import switch_steps
from realapps_table import PAGE, check

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

    floors(d, runs, n)


def floor_row(run, batch, kernel, read_bw, write_bw):
    """One gang run against its batch run: batch's makespan, the time over
    it, its switches' seconds, the kernel alone's and the disk's for the
    same bytes (None without kernel rows or bandwidths). As
    switch_steps.py and realapps_table.py count them: the kernel alone for
    the bytes memgang paged, the disk for the pages that reached swap and
    came back from it."""
    sw = run["switches"]
    return {
        "tb": batch["makespan_s"],
        "over": run["makespan_s"] - batch["makespan_s"],
        "took": sum(s["took_s"] for s in sw),
        "kernel": sum(switch_steps.kernel_s(kernel, s["paged_out_bytes"], s["paged_in_bytes"])
                      for s in sw) if kernel else None,
        "disk": sum(s["swap_out_pages"] * PAGE / write_bw + s["swap_in_pages"] * PAGE / read_bw
                    for s in sw) if read_bw and write_bw else None,
    }


def self_test():
    """floor_row on a made-up pair: the kernel rows page 100 MiB out in
    0.1 s, drain it in 0.05 s and page 100 MiB in in 0.2 s."""
    mib = switch_steps.MIB
    kernel = [(100.0, 0.1, 0.05, 100.0, 0.2, 0.35)]
    sw = {"took_s": 0.5, "paged_out_bytes": 200 * mib, "paged_in_bytes": 100 * mib,
          "swap_out_pages": 1000, "swap_in_pages": 2000}
    run = {"makespan_s": 110.0, "switches": [sw, dict(sw)]}
    r = floor_row(run, {"makespan_s": 100.0}, kernel, read_bw=PAGE * 1000, write_bw=PAGE * 500)
    want = {"tb": 100.0, "over": 10.0, "took": 1.0,
            # per switch: 200 MiB out 0.2 s, drained 0.1 s, 100 MiB in 0.2 s
            "kernel": 1.0,
            # per switch: 1000 pages out at 500 a second, 2000 in at 1000
            "disk": 8.0}
    for k, v in want.items():
        assert abs(r[k] - v) < 1e-9, f"{k}: {r[k]} != {v}"
    r = floor_row(run, {"makespan_s": 100.0}, None, None, None)
    assert r["kernel"] is None and r["disk"] is None, r
    print("realapps_rounds.py: self-test passed")


def floors(d, runs, n):
    """The fourth table (see the module's doc)."""
    bws = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(d, "bandwidth-*.json")))]
    read_bw = min((b["read_bytes_per_s"] for b in bws), default=None)
    write_bw = min((b["write_bytes_per_s"] for b in bws), default=None)
    rate = switch_steps.paging_rate_table()
    kernel = switch_steps.kernel_rows(rate).get("in_turn")
    print()
    print(f"Time over batch against its floors, median over the {n} rounds (s; kernel alone: "
          f"{rate or 'none found'}, LAMMPS rows in turn; disk: read {read_bw / 1e6 if read_bw else 0:.0f} MB/s, "
          f"write {write_bw / 1e6 if write_bw else 0:.0f} MB/s):")
    print()
    print("| app | run | over batch | switches | kernel alone, same bytes | disk's limit, same bytes "
          "| rest over batch | overhead | overhead with the kernel's switch | kernel's switch / batch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (app, name) in sorted(runs, key=lambda k: (k[0], ORDER.get(unq(k[1]), 9))):
        batch = runs.get((app, "batch"), {})
        if name == "batch" or unq(name) == "lru":
            continue
        rows = [floor_row(run, batch[k], kernel, read_bw, write_bw)
                for k, run in runs[(app, name)].items() if k in batch]
        if not rows:
            continue
        med = lambda key: statistics.median(r[key] for r in rows) if all(
            r[key] is not None for r in rows) else None
        f = lambda x: "-" if x is None else f"{x:.1f}"
        pc = lambda x: "-" if x is None else f"{x * 100:.1f}%"
        with_k = [(r["over"] - r["took"] + r["kernel"]) / r["tb"] for r in rows] if kernel else None
        k_share = [r["kernel"] / r["tb"] for r in rows] if kernel else None
        print(f"| {app} | {label(name)} | {f(med('over'))} | {f(med('took'))} | {f(med('kernel'))} "
              f"| {f(med('disk'))} | {f(statistics.median(r['over'] - r['took'] for r in rows))} "
              f"| {pc(statistics.median(r['over'] / r['tb'] for r in rows))} "
              f"| {pc(statistics.median(with_k) if with_k else None)} "
              f"| {pc(statistics.median(k_share) if k_share else None)} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        main(sys.argv[1])
