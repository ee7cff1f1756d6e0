"""Where the simulator's demand-paging constants come from (docs/sim.md):
from the stored measured runs that paged on demand (gang lru, cosched),
per run the kernel CPU per page moved (the jobs' CPU seconds over their
batch run's, per page swapped in or out: crates/sim RECLAIM_CPU_S) and the
pages read per major fault (swap readahead: READAHEAD_PAGES), and for gang
lru the MiB faulted in per resume (a resume is a switch that does not
start a job: switches - (jobs - 1); the swept jobs fault all of their
memory back, `PagingModel::demand_faulted`; the last resume, after the
other job ended, has room and faults only what it lacks), the seconds of
makespan over batch per resume, what each job lacks at a switch (`lack`:
the jobs' memory over the pool) and what a random order faults back under
a strict LRU, its own old pages evicted before it touches them:
lack * (1 + ln(mem / lack)). Runs that
were stopped (`interrupted`) or moved under 10,000 pages are left out.

A second table, for the random gang lru pairs (crates/sim
OWN_EVICT_SHARE): the MiB each resume faulted while the other job was
still there (the major faults of the quantum after the switch; neither a
job's first start nor the last resume, alone), their mean, and the share
of a resume's faults that evicted the job's own pages if it had the time
to fault all it lacked: 1 - lack / mean.

usage: python3 bench/sim_paging_params.py DIR [DIR ...]
       (default: the stored runs that paged on demand: adaptive-fix,
       adaptive-access-20261127, adaptive-lru-20261127 and its -r2, -600m,
       -q20, -600m-q20, -q15, -q20-r2, -600m-q20-r2 and -600m-r2,
       hybrid-long, hybrid-full, hybrid-full-2rank)
"""
import glob
import json
import math
import os
import re
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def mib_of(job):
    return round((job["declared_memory_bytes"] or 0) / 2**20)


dirs = sys.argv[1:] or [f"bench/results/{d}" for d in
                        ("adaptive-fix", "adaptive-access-20261127", "adaptive-lru-20261127",
                         "adaptive-lru-20261127-r2", "adaptive-lru-20261127-600m",
                         "adaptive-lru-20261127-q20", "adaptive-lru-20261127-600m-q20",
                         "adaptive-lru-20261127-q15", "adaptive-lru-20261127-q20-r2",
                         "adaptive-lru-20261127-600m-q20-r2", "adaptive-lru-20261127-600m-r2",
                         "hybrid-long", "hybrid-full",
                         "hybrid-full-2rank")]
refills = []
print(f"{'run':<36} {'policy':<10} {'pages moved':>11} {'extra CPU / page (us)':>21} {'pages in / major fault':>22} "
      f"{'MiB in / resume':>15} {'s lost / resume':>15} {'job MiB':>7} {'ranks':>5} {'lack':>5} "
      f"{'LRU random':>10}")
for d in dirs:
    for b in sorted(glob.glob(os.path.join(d, "*-batch.json"))):
        exp = os.path.basename(b)[:-len("-batch.json")]
        batch = json.load(open(b))
        batch_cpu = sum(j["cpu_s"] or 0 for j in batch["jobs"])
        for f in sorted(glob.glob(os.path.join(d, exp + "-*.json"))):
            if not re.fullmatch(re.escape(exp) + r"-[a-z].*\.json", os.path.basename(f)):
                continue
            r = json.load(open(f))
            demand = r["policy"] == "cosched" or (r["policy"] == "gang" and r.get("switch") == "lru")
            pages = r["swap_in_pages"] + r["swap_out_pages"]
            if not demand or r.get("interrupted") or pages < 10000:
                continue
            cpu = sum(j["cpu_s"] or 0 for j in r["jobs"])
            faults = sum(j["major_faults"] or 0 for j in r["jobs"])
            per_fault = f"{r['swap_in_pages'] / faults:.2f}" if faults else "-"
            how = r["policy"] + (" lru" if r["policy"] == "gang" else "")
            resumes = r["switch_count"] - (len(r["jobs"]) - 1)
            lru = r["policy"] == "gang" and resumes > 0
            per_resume = f"{r['swap_in_pages'] * PAGE / 2**20 / resumes:.0f}" if lru else "-"
            lost = f"{(r['makespan_s'] - batch['makespan_s']) / resumes:.1f}" if lru else "-"
            ranks = {j["ranks"] for j in r["jobs"]}
            mib = {mib_of(j) for j in r["jobs"]}
            lack, lru_random = "-", "-"
            # A pair of one size: each lacks what the two want over the pool.
            if lru and len(r["jobs"]) == 2 and len(mib) == 1:
                m = next(iter(mib))
                short = 2 * m - r["pool_memory_bytes"] / 2**20
                if 0 < short < m:
                    lack, lru_random = f"{short:.0f}", f"{short * (1 + math.log(m / short)):.0f}"
                    if "random" in exp and all("faults_after" in s for s in r["switches"]):
                        seen, turns = set(), []
                        for s in r["switches"]:
                            job = (s["resumed"] or [None])[0]
                            if job in seen and s["suspended"]:
                                turns.append(s["faults_after"] * PAGE / 2**20)
                            seen.add(job)
                            seen.update(s["suspended"])
                        if turns:
                            refills.append((os.path.basename(d) + "/" + exp, r["quantum_s"], short, turns))
            print(f"{os.path.basename(d) + '/' + exp:<36} {how:<10} {pages:>11} "
                  f"{(cpu - batch_cpu) / pages * 1e6:>21.1f} {per_fault:>22} "
                  f"{per_resume:>15} {lost:>15} {'/'.join(map(str, sorted(mib))):>7} "
                  f"{'/'.join(map(str, sorted(ranks))):>5} {lack:>5} {lru_random:>10}")

if refills:
    print(f"\n{'random gang lru':<36} {'q_s':>4} {'lack':>5} {'mean':>5} {'1-lack/mean':>11}  MiB faulted per resume, the other job there")
    for name, q, lack, turns in refills:
        mean = sum(turns) / len(turns)
        print(f"{name:<36} {q:>4.0f} {lack:>5.0f} {mean:>5.0f} {1 - lack / mean:>11.2f}  {' '.join(f'{t:.0f}' for t in turns)}")
