"""The table of bench/adaptive.sh, made from the results JSON in DIR alone.

Per gang run: makespan, switching overhead against the batch run
(paper 000 §4.1), its reduction against lru of the same quantum (Fig. 7c,
9c: 1 - (T - Tbatch) / (Tlru - Tbatch)), the run's swap traffic and its
reduction against lru, and the time the switches took against their
physical limit: each switch's swapped-out bytes / write bandwidth plus
swapped-in bytes / read bandwidth, with the bandwidths measured in the same
run (the slower of the start and end measurements, the conservative limit).
"""
import glob
import json
import os
import sys

d = sys.argv[1]
PAGE = os.sysconf("SC_PAGE_SIZE")
bws = [json.load(open(os.path.join(d, f)))
       for f in ("bandwidth-start.json", "bandwidth-end.json")
       if os.path.exists(os.path.join(d, f))]
read_bw = min(b["read_bytes_per_s"] for b in bws)
write_bw = min(b["write_bytes_per_s"] for b in bws)
for name, b in zip(("start", "end"), bws):
    print(f"disk {name}: read {b['read_bytes_per_s']/1e6:.0f} MB/s, "
          f"write {b['write_bytes_per_s']/1e6:.0f} MB/s")

runs = {}
for f in glob.glob(os.path.join(d, "*.json")):
    if "bandwidth" in f:
        continue
    r = json.load(open(f))
    runs[os.path.basename(f)[:-5]] = r

# Experiments: "seq" (old results) or "seq-x3" (jobs scaled to the quantum).
exps = sorted({k[:-len("-batch")] for k in runs if k.endswith("-batch")},
              key=lambda e: (("seq", "random", "2rank").index(e.split("-")[0])
                             if e.split("-")[0] in ("seq", "random", "2rank") else 9, e))
W = max([7] + [len(e) for e in exps])
hdr = (f"{'variant':<{W}} {'q':>4} {'switch':<12} {'makespan_s':>10} {'overhead':>8} "
       f"{'ovh_cut':>7} {'paged_GiB':>9} {'pg_cut':>6} {'switches':>8} "
       f"{'switch_s':>8} {'limit_s':>7} {'x_limit':>7} {'failed':>6}")
print(hdr)
for variant in exps:
    batch = runs.get(f"{variant}-batch")
    if not batch:
        continue
    tb = batch["makespan_s"]
    print(f"{variant:<{W}} {'-':>4} {'batch':<12} {tb:>10.1f} {'0.0%':>8} "
          f"{'-':>7} {0:>9.2f} {'-':>6} {0:>8} {'-':>8} {'-':>7} {'-':>7} "
          f"{sum(not j.get('exit_code') == 0 for j in batch['jobs']):>6}")
    gang = sorted((r for k, r in runs.items() if k.startswith(variant + "-q")),
                  key=lambda r: (r["quantum_s"], len(r["switch"]) if r["switch"] != "lru" else 0,
                                 r["switch"]))
    for r in gang:
        q = r["quantum_s"]
        lru = next((x for x in gang if x["quantum_s"] == q and x["switch"] == "lru"), None)
        t = r["makespan_s"]
        paged = (r["swap_in_pages"] + r["swap_out_pages"]) * PAGE
        cut = pg_cut = "-"
        if lru and r is not lru:
            if lru["makespan_s"] > tb:
                cut = f"{1 - (t - tb) / (lru['makespan_s'] - tb):.0%}"
            lru_paged = (lru["swap_in_pages"] + lru["swap_out_pages"]) * PAGE
            if lru_paged:
                pg_cut = f"{1 - paged / lru_paged:.0%}"
        sw_s = sum(s["took_s"] for s in r["switches"])
        limit = sum(s.get("swap_out_pages", 0) * PAGE / write_bw
                    + s.get("swap_in_pages", 0) * PAGE / read_bw for s in r["switches"])
        x = f"{sw_s / limit:.2f}" if limit > 0.05 else "-"
        failed = sum(not j.get("exit_code") == 0 for j in r["jobs"])
        print(f"{variant:<{W}} {q:>3.0f}s {r['switch']:<12} {t:>10.1f} "
              f"{(t - tb) / t:>8.1%} {cut:>7} {paged / 2**30:>9.2f} {pg_cut:>6} "
              f"{r['switch_count']:>8} {sw_s:>8.2f} {limit:>7.2f} {x:>7} {failed:>6}")
    # Other policies (adaptive.sh POLICIES=...): '>' when the run was stopped.
    for k, r in sorted(runs.items()):
        if not k.startswith(variant + "-") or k == variant + "-batch" or k.startswith(variant + "-q"):
            continue
        t = r["makespan_s"]
        paged = (r["swap_in_pages"] + r["swap_out_pages"]) * PAGE
        failed = sum(not j.get("exit_code") == 0 for j in r["jobs"])
        mark = ">" if r.get("interrupted") else ""
        print(f"{variant:<{W}} {'-':>4} {r['policy']:<12} {mark + f'{t:.1f}':>10} "
              f"{(t - tb) / t:>8.1%} {'-':>7} {paged / 2**30:>9.2f} {'-':>6} "
              f"{r['switch_count']:>8} {'-':>8} {'-':>7} {'-':>7} {failed:>6}")

# Where a switch's time goes, per switch on average (q = 10 s runs): the
# disk traffic during the switch, what background writing wrote before it,
# and the time of the page-out and page-in steps.
print()
print(f"{'run (q=10s)':<24} {'switches':>8} {'out_MiB':>8} {'in_MiB':>7} {'bg_MiB':>7} "
      f"{'out_s':>6} {'in_s':>6} {'took_s':>6}")
for variant in exps:
    for k in sorted(k for k in runs if k.startswith(variant + "-q10s-")):
        sw = [s for s in runs[k]["switches"] if s["suspended"]]
        if not sw:
            continue
        n = len(sw)
        mean = lambda f: sum(f(s) for s in sw) / n
        print(f"{k:<24} {n:>8} {mean(lambda s: s.get('swap_out_pages', 0)) * PAGE / 2**20:>8.0f} "
              f"{mean(lambda s: s.get('swap_in_pages', 0)) * PAGE / 2**20:>7.0f} "
              f"{mean(lambda s: s.get('background_bytes', 0)) / 2**20:>7.0f} "
              f"{mean(lambda s: s.get('page_out_s', 0)):>6.2f} {mean(lambda s: s.get('page_in_s', 0)):>6.2f} "
              f"{mean(lambda s: s['took_s']):>6.2f}")
