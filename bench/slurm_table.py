"""bench/slurm.sh's tables, from its result directory:
   python3 bench/slurm_table.py OUT "2 4" RANK_MIB NODE_POOL SWEEPS

One row per node count and scheduler: makespan, overhead against memgang's
batch, jobs that did not complete, jobs whose checksum is the batch run's.
A second table shows memgang's switches against the swap device: on the
emulated cluster every node pages through one disk, so a switch's bytes
on all nodes share its bandwidth (testbed.txt)."""

import json
import os
import re
import sys

out, counts, mib, pool, sweeps = sys.argv[1:]
print(f"Two MPI jobs (mpi_sweep, one rank per node, {mib} MiB a rank, {sweeps} sweeps), "
      f"pool {pool} per node, quantum 10 s\n")
print("| nodes | scheduler | makespan (s) | overhead vs batch | overhead cut vs Slurm gang | jobs killed or failed | checksum as batch |")
print("|---|---|---|---|---|---|---|")
names = {
    "batch": "memgang batch",
    "slurm-gang": "Slurm gang",
    "slurm-gang-noswap": "Slurm gang, no swap",
    "memgang": "Slurm + memgang gang so/ao/ai",
}
for n in counts.split():
    base, want, slurm_ov = None, None, None
    for row in ["batch", "slurm-gang", "slurm-gang-noswap", "memgang"]:
        d = f"{out}/n{n}-{row}"
        if not os.path.exists(f"{d}/states.txt"):
            continue
        mk = float(open(f"{d}/makespan").read().strip() or 0)
        if row == "batch":
            base = mk
        states = [line.split()[2] for line in open(f"{d}/states.txt") if line.strip()]
        bad = sum(1 for s in states if s != "COMPLETED")
        sums = []
        for j in "ab":
            text = open(f"{d}/{j}.out").read() if os.path.exists(f"{d}/{j}.out") else ""
            m = re.findall(r"checksum ([0-9a-f]+)", text)
            sums.append(m[-1] if m else None)
        if row == "batch":
            want = sums[0]
        same = sum(1 for x in sums if x and x == want)
        ov = (mk / base - 1) if base else None
        if row == "slurm-gang":
            slurm_ov = ov
        cut = "-"
        if row == "memgang" and slurm_ov and ov is not None:
            cut = f"{(1 - ov / slurm_ov) * 100:.0f}%"
        ovs = "-" if ov is None else f"{ov * 100:.1f}%"
        print(f"| {n} | {names[row]} | {mk:.1f} | {ovs} | {cut} | {bad} of {len(states)} | {same} of 2 |")

bw = re.search(r"read (\d+) MB/s, write (\d+) MB/s", open(f"{out}/testbed.txt").read()) \
    if os.path.exists(f"{out}/testbed.txt") else None
print("\nmemgang's switches (all nodes of a switch page at once, through one swap device here)\n")
print("| nodes | switches | mean switch (s) | MiB out + in per switch, all nodes | per node | disk limit per switch (s) | switch / limit | vs 1 node |")
print("|---|---|---|---|---|---|---|---|")
one = None  # the one-node switch's time over its disk limit
for n in counts.split():
    f = f"{out}/n{n}-memgang/memgang.json"
    if not os.path.exists(f):
        continue
    sw = json.load(open(f))["switches"]
    if not sw:
        continue
    oks = [v["Ok"] for s in sw for v in s["nodes"].values() if "Ok" in v]
    out_b = sum(r["paged_out_bytes"] for r in oks) / len(sw)
    in_b = sum(r["paged_in_bytes"] for r in oks) / len(sw)
    mean = sum(s["took_s"] for s in sw) / len(sw)
    if bw:
        limit = out_b / (int(bw.group(2)) * 1e6) + in_b / (int(bw.group(1)) * 1e6)
        lim, ratio = f"{limit:.2f}", f"{mean / limit:.2f}"
        if n == "1":
            one = mean / limit
        vs = f"{mean / limit / one:.2f}" if one else "-"
    else:
        lim, ratio, vs = "-", "-", "-"
    mib = (out_b + in_b) / 2**20
    print(f"| {n} | {len(sw)} | {mean:.2f} | {mib:.0f} | {mib / int(n):.0f} | {lim} | {ratio} | {vs} |")
