"""The tables of bench/hybrid.sh, made from the results JSON in DIR alone.

1. Makespan (s) against the number n of simultaneous jobs, per variant and
   policy (paper 001 Fig. 7, 9), with hybrid's ratios to the targets of
   issue 5: hybrid / cosched while everything fits (target <= 1.05), gang /
   hybrid (target >= 1.2 out of core, compute variant), hybrid / batch
   (target <= 1). A run stopped by the timeout shows as ">T"; one with a
   failed job is marked "!".
2. Paper 001 Fig. 8: major page faults per minute of each job under cosched
   at the n in $FIG8, with their mean and standard deviation.
"""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
runs = {}
for f in glob.glob(os.path.join(d, "*.json")):
    m = re.match(r"(.+)-n(\d+)-(.+)\.json$", os.path.basename(f))
    if m:
        runs[(m[1], int(m[2]), m[3])] = json.load(open(f))

policies = ["batch", "cosched", "gang", "hybrid-sequential", "hybrid-overlapped", "hybrid-prefetch"]
short = {"hybrid-sequential": "hyb-seq", "hybrid-overlapped": "hyb-ovl", "hybrid-prefetch": "hyb-pre"}


def cell(r):
    if r is None:
        return "-"
    t = f"{r['makespan_s']:.1f}"
    if r["interrupted"]:
        return ">" + t
    if any(j.get("exit_code") != 0 for j in r["jobs"]):
        return t + "!"
    return t


def best_hybrid(v, n):
    hs = [runs.get((v, n, p)) for p in policies if p.startswith("hybrid")]
    hs = [h for h in hs if h and not h["interrupted"]]
    return min(hs, key=lambda h: h["makespan_s"]) if hs else None


def ratio(a, b):
    return f"{a['makespan_s'] / b['makespan_s']:.2f}" if a and b and not a["interrupted"] and not b["interrupted"] else "-"


variants = sorted({k[0] for k in runs})
print(f"{'variant':<8} {'n':>2} " + " ".join(f"{short.get(p, p):>9}" for p in policies)
      + f" {'hyb/co':>7} {'gang/hyb':>8} {'hyb/bat':>7} {'sets':>4}")
for v in variants:
    for n in sorted({k[1] for k in runs if k[0] == v}):
        h = best_hybrid(v, n)
        sets = "-"
        if h and h["samples"]:  # emptied by bench/compact_results.py
            # Most jobs running at once in any sample: the largest set.
            sets = max((sum(j["state"] == "running" for j in s["jobs"]) for s in h["samples"]), default=0)
        print(f"{v:<8} {n:>2} " + " ".join(f"{cell(runs.get((v, n, p))):>9}" for p in policies)
              + f" {ratio(h, runs.get((v, n, 'cosched'))):>7} {ratio(runs.get((v, n, 'gang')), h):>8}"
              + f" {ratio(h, runs.get((v, n, 'batch'))):>7} {sets:>4}")
print("(makespan in s; hybrid ratios use the best overlap policy; sets = most jobs running at once under it, '-' without samples)")

# What the switches cost: gang pages out only what the incoming job lacks
# (so/ao/ai), a hybrid set switch pages the whole outgoing set out.
print()
print("Switches: count, seconds in all, GiB paged out and in (hybrid: sequential)")
print(f"{'variant':<8} {'n':>2} {'gang':>24} {'hybrid':>24}")
for v in variants:
    for n in sorted({k[1] for k in runs if k[0] == v}):
        def sw(r):
            if not r:
                return "-"
            s = r["switches"]
            return (f"{len(s)} {sum(x['took_s'] for x in s):.1f}s "
                    f"{sum(x['paged_out_bytes'] for x in s) / 2**30:.2f}/"
                    f"{sum(x['paged_in_bytes'] for x in s) / 2**30:.2f}")
        g, h = runs.get((v, n, "gang")), runs.get((v, n, "hybrid-sequential"))
        if g or h:
            print(f"{v:<8} {n:>2} {sw(g):>24} {sw(h):>24}")

fig8 = [int(x) for x in os.environ.get("FIG8", "7 9").split()]
print()
print("Fig. 8: major faults per minute per job under cosched")
for v in variants:
    for n in fig8:
        r = runs.get((v, n, "cosched"))
        if not r:
            continue
        rates = " ".join(f"{j['major_faults_per_min']:.0f}" if j.get("major_faults_per_min") is not None else "-"
                         for j in r["jobs"])
        mean, std = r.get("major_faults_per_min_mean"), r.get("major_faults_per_min_std")
        stats = f"mean {mean:.1f} std {std:.1f}" if mean is not None else "mean - std -"
        print(f"{v:<8} n={n}: {stats} | per job: {rates}{' (interrupted)' if r['interrupted'] else ''}")
