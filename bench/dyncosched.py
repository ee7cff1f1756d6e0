"""Paper 003's experiment on this node, through memgangd: a parallel job
(2 ranks meeting at a barrier every iteration) run back to back while a
stream of sequential jobs with Pareto-distributed lifetimes and memory
keeps the node busy (a finished job is replaced at once, paper 003 §5).
Slowdown = the parallel job's run time under load / alone.

Arguments: MEMGANGD WORKLOAD OUT_DIR. Environment: MEANS (mean sequential
footprints in MiB, default "128 256"), RUNS (parallel runs per cell, 3),
SEQ_JOBS (sequential jobs in the system at once, 3), POOL (1G), PARALLEL
(the parallel job: "workload", memgang-workload's 2-rank stencil over Unix
sockets; or "hpcc", Debian's HPC Challenge on 2 Open MPI ranks over TCP).
The daemon is bench/memgangd.py's."""
import json
import os
import random
import subprocess
import sys
import time

import memgangd as memgangd_py

memgangd, workload, out = sys.argv[1:4]
MEANS = [int(m) for m in os.environ.get("MEANS", "128 256").split()]
RUNS = int(os.environ.get("RUNS", "3"))
SEQ_JOBS = int(os.environ.get("SEQ_JOBS", "3"))
POOL_MIB = 1024
# The parallel job: 128 MiB over 2 ranks (paper 003's CG class A is 64 MB
# on 1 GB nodes; ours twice that on a 1 GiB pool), about 10 s alone.
PAR = [workload, "--mib", "128", "--pattern", "stencil", "--ranks", "2",
       "--iterations", os.environ.get("PAR_ITERS", "400"), "--compute", "1", "--quiet"]
PAR_MEMORY = 150 << 20
PAR_ENV = {}
PARALLEL = os.environ.get("PARALLEL", "workload")
if PARALLEL == "hpcc":
    # HPL's N = 1500: about 10 s alone, as the workload job; its ranks
    # talk over TCP as between nodes (Open MPI busy-polls for messages).
    hpcc_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps", "hpcc.sh")
    PAR = ["bash", hpcc_sh, os.environ.get("HPCC_N", "1500")]
    PAR_MEMORY = 100 << 20
    PAR_ENV = {"MPI_BTL": "self,tcp"}
elif PARALLEL != "workload":
    sys.exit(f"PARALLEL={PARALLEL}: expected workload or hpcc")
# Pareto shape 1.5: heavy-tailed (paper 003 footnote 3 has k ≈ 1, whose
# mean is infinite) with a finite mean to set.
SHAPE = 1.5
MEAN_LIFE_S = 1.0
# Microseconds per page visit with --compute 1 (memgang-workload --help:
# about 1 µs of compute plus about 1 µs per visit).
US_PER_PAGE = 2.0


def pareto(mean, cap):
    xm = mean * (SHAPE - 1) / SHAPE
    return min(cap, xm / (random.random() ** (1 / SHAPE)))


class Daemon(memgangd_py.Daemon):
    def __init__(self, prevention, cosched):
        super().__init__(memgangd, lambda d, sock: (
            f'state_dir = "{d}/state"\nsocket = "{sock}"\n'
            f'pool_memory = "{POOL_MIB}M"\nswap_reserve = "0"\npolicy = "cosched"\n'
            f"paging_prevention = {str(prevention).lower()}\n"
            f"dynamic_coscheduling = {str(cosched).lower()}\n"), "memgang-bench-dyn.")

    def submit(self, cmd, memory, name, env=None):
        return self.call({"op": "submit", "command": cmd, "memory_bytes": int(memory), "ranks": 1,
                          "cwd": "/", "env": {"PATH": os.environ["PATH"], **(env or {})},
                          "name": name})["id"]


def seq_job(mean_mib):
    # Capped so that one job may claim the whole pool (paper 003 §5), no more.
    mib = max(4, int(pareto(mean_mib, POOL_MIB - 8)))
    life = pareto(MEAN_LIFE_S, 30.0)
    iters = max(1, round(life * 1e6 / (mib * 256 * US_PER_PAGE)))
    return [workload, "--mib", str(mib), "--pattern", "random", "--iterations", str(iters),
            "--compute", "1", "--quiet", "--seed", str(random.randrange(1 << 30))], (mib + 8) << 20


def run_cell(prevention, cosched, mean_mib):
    """Mean run time of RUNS parallel runs under load (None: alone)."""
    # Every configuration at a footprint draws the same stream of
    # sequential jobs: a cell that happens to draw no job too big for the
    # pool would otherwise look like a gain.
    random.seed(SEED * 100003 + (mean_mib or 0))
    d = Daemon(prevention, cosched)
    times, seq_done, majflt = [], 0, 0
    try:
        seq = set()
        for _ in range(RUNS):
            par = d.submit(PAR, PAR_MEMORY, "parallel", PAR_ENV)
            while True:
                jobs = d.jobs()
                if mean_mib is not None:
                    live = [i for i in seq if jobs[i]["state"] in ("queued", "running")]
                    seq_done += len(seq) - len(live)
                    seq = set(live)
                    while len(seq) < SEQ_JOBS:
                        cmd, mem = seq_job(mean_mib)
                        seq.add(d.submit(cmd, mem, "seq"))
                p = jobs[par]
                if p["state"] in ("finished", "failed", "cancelled"):
                    if p["state"] != "finished":
                        sys.exit(f"the parallel job {p['state']}: {p.get('reason')}")
                    times.append(p["finished_unix_s"] - p["started_unix_s"])
                    break
                time.sleep(0.1)
    finally:
        d.stop()
    return sum(times) / len(times), times, seq_done


SEED = int(os.environ.get("SEED", "1"))
alone, alone_runs, _ = run_cell(True, False, None)
rows = []
for mean in MEANS:
    for prevention, cosched, label in [(False, False, "neither"), (True, False, "prevention only"),
                                       (False, True, "coscheduling only"), (True, True, "both")]:
        vm0 = dict(l.split() for l in open("/proc/vmstat"))
        t, runs, n = run_cell(prevention, cosched, mean)
        vm1 = dict(l.split() for l in open("/proc/vmstat"))
        rows.append({"mean_seq_mib": mean, "config": label, "paging_prevention": prevention,
                     "dynamic_coscheduling": cosched, "parallel_s": t, "runs_s": runs,
                     "slowdown": t / alone, "seq_jobs_done": n,
                     "pswpin": int(vm1["pswpin"]) - int(vm0["pswpin"]),
                     "pswpout": int(vm1["pswpout"]) - int(vm0["pswpout"])})
        print(f"{mean} MiB {label}: {t:.1f} s, slowdown {t / alone:.2f}", file=sys.stderr)
res = {"parallel": PARALLEL, "parallel_command": PAR, "alone_s": alone, "alone_runs_s": alone_runs, "runs": RUNS, "seq_jobs": SEQ_JOBS,
       "pool_mib": POOL_MIB, "rows": rows}
with open(os.path.join(out, "dyncosched.json"), "w") as f:
    json.dump(res, f, indent=1)
print(f"parallel job: {' '.join(os.path.basename(a) for a in PAR[:3])} {' '.join(f'{k}={v}' for k, v in PAR_ENV.items())}\n")
print(f"parallel job alone: {alone:.1f} s (mean of {RUNS}); pool {POOL_MIB} MiB, "
      f"{SEQ_JOBS} sequential jobs in the system\n")
print("| mean seq. footprint | config | parallel run (s) | slowdown | slowdown vs neither | seq. jobs done | pages swapped in / out |")
print("|---|---|---|---|---|---|---|")
base = {}
for r in rows:
    if r["config"] == "neither":
        base[r["mean_seq_mib"]] = r["slowdown"]
    change = "-" if r["config"] == "neither" else f"{(r['slowdown'] / base[r['mean_seq_mib']] - 1) * 100:+.0f}%"
    print(f"| {r['mean_seq_mib']} MiB | {r['config']} | {r['parallel_s']:.1f} | {r['slowdown']:.2f} | "
          f"{change} | {r['seq_jobs_done']} | {r['pswpin']} / {r['pswpout']} |")
