"""bench/realapps.sh's table: what switching costs on real applications,
where a switch's time goes, and whether each job's own result survived.

Per gang run (results JSON in DIR, `<app>-q<q>-<switch>.json`, and the
batch run `<app>-batch.json`):
- makespan, overhead against batch, and the cut of lru's overhead
  (1 - (T - Tbatch) / (Tlru - Tbatch), paper 000 Fig. 7c);
- page-out and page-in seconds per switch (the executor times each part),
  and the switch's bytes against the disk's limit (bandwidth-*.json, the
  slower of the two measurements, as in adaptive_table.py);
- faults left after the page-in: a resumed job's major faults in its
  quantum (cgroup counter, from the samples), which memgang counts into
  each switch of the JSON (`faults_after`, and `faults_after_before_exit`
  without the last half second of a job that ends in the quantum: its
  exit; docs/results.md), against the pages the switch brought back; the
  issue's target is at most 1%. Results written before memgang stored
  these counts show "-";
- each job's check (the last line of its stdout: residual or checksum)
  against the same job's in the batch run.
A second table splits each run's time over batch: the seconds its
switches took, and the CPU seconds its jobs used beyond their batch run,
with the system part of those (page faults, and the reclaim the kernel
does in the job's context when its cgroup is full; the rest is user time:
cache and TLB refills after a switch, or noise).
A third gives each run's time account, measured (realapps_account.py):
CPU against batch, frozen, switch, io wait, run-queue wait, unaccounted;
a fourth its counters (software perf events, huge pages, THP fallbacks,
what the kernel counted while frozen, hardware counters or why none).
A fifth (switch_steps.py) splits each run's switches step by step against
the kernel alone paging the same bytes: bench/paging_rate.sh's table.txt
named by PAGING_RATE, or else the newest under bench/results/.
"""
import glob
import json
import os
import sys

import realapps_account
import switch_steps

PAGE = os.sysconf("SC_PAGE_SIZE")


def check(job):
    try:
        lines = open(os.path.join(job["log_dir"], "stdout")).read().strip().splitlines()
        return lines[-1] if lines else None
    except (OSError, KeyError, TypeError):
        return None


def main(d):
    d = sys.argv[1]
    bws = [json.load(open(os.path.join(d, f))) for f in ("bandwidth-start.json", "bandwidth-end.json")
           if os.path.exists(os.path.join(d, f))]
    read_bw = min(b["read_bytes_per_s"] for b in bws) if bws else None
    write_bw = min(b["write_bytes_per_s"] for b in bws) if bws else None
    print("| app | run | makespan (s) | overhead | cut vs lru | switches | page-out s / switch "
          "| page-in s / switch | switch / disk limit | faults after page-in / pages paged in "
          "| checks as batch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ORDER = {"lru": 0, "so-ao-ai-nohuge": 1, "so-ao-ai": 2, "so-ao-ai-share5": 3}
    files = glob.glob(os.path.join(d, "*-q*.json"))
    files.sort(key=lambda f: (os.path.basename(f).split("-q")[0],
                              ORDER.get(os.path.basename(f)[:-5].split("-", 2)[-1], 9)))
    for f in files:
        run = json.load(open(f))
        app = os.path.basename(f).split("-q")[0]
        label = os.path.basename(f)[:-5].split("-", 2)[-1].replace("-", "/").replace("/nohuge", ", no huge-page restore")
        if run.get("max_switch_share"):
            label = label.split("/share")[0] + f", quantum grows (switching <= {run['max_switch_share'] * 100:g}%)"
        batch_f = os.path.join(d, f"{app}-batch.json")
        batch = json.load(open(batch_f)) if os.path.exists(batch_f) else None
        lru_f = glob.glob(os.path.join(d, f"{app}-q*-lru.json"))
        lru = json.load(open(lru_f[0])) if lru_f else None
        tb = batch["makespan_s"] if batch else None
        ov = run["makespan_s"] / tb - 1 if tb else None
        cut = "-"
        if lru and tb and run is not lru and lru["makespan_s"] > tb and "lru" not in f:
            cut = f"{(1 - (run['makespan_s'] - tb) / (lru['makespan_s'] - tb)) * 100:.0f}%"
        ovs = "-" if ov is None else f"{ov * 100:.1f}%"
        sw = run["switches"]
        n = len(sw) or 1
        po = sum(s["page_out_s"] for s in sw) / n
        pi = sum(s["page_in_s"] for s in sw) / n
        ratio = "-"
        if read_bw and write_bw and any(x["paged_in_bytes"] or x["paged_out_bytes"] for x in sw):
            limits = [s["swap_out_pages"] * PAGE / write_bw + s["swap_in_pages"] * PAGE / read_bw for s in sw]
            took = sum(s["took_s"] for s in sw)
            if sum(limits) > 0:
                ratio = f"{took / sum(limits):.2f}"
        faults, early, pages, counted = 0, 0, 0, True
        for s in sw:
            if not s["resumed"] or not s["paged_in_bytes"]:
                continue
            if "faults_after" not in s:
                counted = False
            faults += s.get("faults_after") or 0
            early += s.get("faults_after_before_exit") or 0
            pages += s["paged_in_bytes"] // PAGE
        if not counted:
            frac = "-"
        elif pages:
            frac = f"{faults} / {pages} ({faults / pages * 100:.1f}%; {early / pages * 100:.1f}% before exits)"
        else:
            frac = f"{faults} / 0"
        same = "-"
        if batch:
            want = {j["name"]: check(j) for j in batch["jobs"]}
            got = [check(j) for j in run["jobs"]]
            ok = sum(1 for j, g in zip(run["jobs"], got) if g and g == want.get(j["name"]))
            same = f"{ok} of {len(run['jobs'])}"
        print(f"| {app} | {label} | {run['makespan_s']:.1f} | {ovs} | {cut} | {len(sw)} | {po:.2f} | {pi:.2f} "
              f"| {ratio} | {frac} | {same} |")

    print()
    print("| app | run | over batch (s) | switches took (s) | jobs' CPU over batch (s) | of it system (s) |")
    print("|---|---|---|---|---|---|")
    for f in files:
        run = json.load(open(f))
        app = os.path.basename(f).split("-q")[0]
        batch_f = os.path.join(d, f"{app}-batch.json")
        if not os.path.exists(batch_f):
            continue
        batch = json.load(open(batch_f))
        label = os.path.basename(f)[:-5].split("-", 2)[-1]
        cpu = sum(j["cpu_s"] for j in run["jobs"]) - sum(j["cpu_s"] for j in batch["jobs"])
        # Results written before system_cpu_s was recorded lack it.
        sys_s = [j.get("system_cpu_s") for j in run["jobs"] + batch["jobs"]]
        system = "-"
        if None not in sys_s:
            extra = (sum(j["system_cpu_s"] for j in run["jobs"])
                     - sum(j["system_cpu_s"] for j in batch["jobs"]))
            system = f"{extra:.1f}"
        print(f"| {app} | {label} | {run['makespan_s'] - batch['makespan_s']:.1f} "
              f"| {sum(s['took_s'] for s in run['switches']):.1f} | {cpu:.1f} | {system} |")

    print()
    print("Time account (s, and share of the makespan):")
    print()
    print(realapps_account.HEADER)
    print(realapps_account.RULE)
    apps = sorted({os.path.basename(f).split("-q")[0] for f in files})
    rows = []
    for app in apps:
        batch_f = os.path.join(d, f"{app}-batch.json")
        rows += [(app, batch_f, "batch")] if os.path.exists(batch_f) else []
        rows += [(app, f, os.path.basename(f)[:-5].split("-", 2)[-1])
                 for f in files if os.path.basename(f).split("-q")[0] == app]
    for app, f, label in rows:
        v = realapps_account.values(json.load(open(f)))
        print(f"| {app} | {label} | " + " | ".join(realapps_account.cells(v)) + " |")

    print()
    print("Counters (summed over the jobs; bench/realapps_account.py):")
    print()
    print(realapps_account.COUNTERS_HEADER)
    print(realapps_account.COUNTERS_RULE)
    for app, f, label in rows:
        c = realapps_account.counter_values(json.load(open(f)))
        print(f"| {app} | {label} | " + " | ".join(realapps_account.counter_cells(c)) + " |")

    stepped = [(f"{app} {label}", [json.load(open(f))]) for app, f, label in rows if label != "batch"]
    stepped = [(l, r) for l, r in stepped if switch_steps.switches(r[0])]
    if stepped:
        rate = switch_steps.paging_rate_table()
        print()
        print(f"Switch steps (switch_steps.py; kernel alone: {rate or 'none found'}):")
        print()
        print(switch_steps.table(stepped, switch_steps.kernel_rows(rate)))
        print()
        print(switch_steps.NOTE)


if __name__ == "__main__":
    main(sys.argv[1])
