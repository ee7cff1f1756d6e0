"""bench/slurm.sh's tables, from its result directory:
   python3 bench/slurm_table.py OUT "2 4" RANK_MIB NODE_POOL SWEEPS [APP [SLICE]]
   python3 bench/slurm_table.py --self-test

One row per node count and scheduler: makespan, overhead against memgang's
batch, jobs that did not complete, jobs whose own check is the batch
run's (mpi_sweep: its checksum; lammps: the last thermo line; hpcc: HPL's
residual and the verifications passed, none failed).

The second table splits each row's overhead (its makespan minus batch's)
into parts, from what the runs record: the controller's record
(memgang.json) and Slurm's record of each job (jobs.txt, `scontrol show
job -o` at the end of the row: StartTime, EndTime and RunTime, the time
the job ran, not suspended; Slurm keeps them in whole seconds, so each
job's figures are within 1 s):
  overhead (s)       makespan minus batch's makespan
  in switches (s)    memgang: the time its switches took, summed (the
                     record's took_s: suspend, page-out, page-in, resume;
                     no job of the pair runs meanwhile). Slurm gang: "-",
                     its switch is a signal; its paging happens while the
                     jobs run, in the next column
  run time + (s)     the jobs' RunTime summed, minus batch's: the jobs ran
                     longer than alone (faults on what was paged out,
                     cache and TCP time lost to the other job, and under
                     Slurm gang the two running at once)
  rest (s)           overhead - switches - run time +: time in which no
                     job of the pair ran outside a switch (start and
                     end latency: the controller's poll, Slurm's start),
                     minus time in which both ran at once
  suspended (s)      the jobs' (EndTime - StartTime - RunTime) summed: time
                     started but stopped; not a part of the overhead (one
                     job waits while the other runs), the size of the
                     turns taken
A third table shows memgang's switches against the swap device: on the
emulated cluster every node pages through one disk, so a switch's bytes
on all nodes share its bandwidth (testbed.txt)."""

import datetime
import json
import os
import re
import sys

NAMES = {
    "batch": "memgang batch",
    "slurm-gang": "Slurm gang",
    "slurm-gang-noswap": "Slurm gang, no swap",
    "memgang": "Slurm + memgang gang so/ao/ai",
}
ROWS = ["batch", "slurm-gang", "slurm-gang-noswap", "memgang"]

# Each app's own check in a job's output: what must be the batch run's.
CHECKS = {
    "mpi_sweep": r"checksum ([0-9a-f]+)",
    "lammps": r"thermo (.+)",
    "hpcc": r"(residual \S+ passed \d+ failed 0)\s*$",
}


def check_of(app, text):
    m = re.findall(CHECKS[app], text, re.M)
    return m[-1].strip() if m else None


def seconds(run_time):
    """Slurm's [D-]HH:MM:SS (or MM:SS) as seconds."""
    days, _, hms = run_time.rpartition("-")
    s = 0
    for part in hms.split(":"):
        s = s * 60 + int(part)
    return s + int(days or 0) * 86400


def slurm_jobs(text):
    """`scontrol show job -o` lines: per job its name, state, start, end
    (datetimes) and run time (seconds)."""
    jobs = []
    for line in text.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" not in f:
            continue
        when = {}
        for k in ("StartTime", "EndTime"):
            v = f.get(k, "")
            when[k] = datetime.datetime.fromisoformat(v) if re.match(r"\d{4}-", v) else None
        jobs.append({
            "name": f.get("JobName", ""),
            "state": f.get("JobState", ""),
            "start": when["StartTime"],
            "end": when["EndTime"],
            "run_s": seconds(f["RunTime"]) if "RunTime" in f else None,
        })
    return jobs


def split(jobs, switches_s, batch_run_s, overhead_s):
    """(run time +, rest, suspended) in seconds; None where Slurm's record
    lacks a job's times."""
    if not jobs or any(j["run_s"] is None or not j["start"] or not j["end"] for j in jobs):
        return None, None, None
    run = sum(j["run_s"] for j in jobs)
    suspended = sum((j["end"] - j["start"]).total_seconds() - j["run_s"] for j in jobs)
    extra = run - batch_run_s if batch_run_s is not None else None
    rest = overhead_s - (switches_s or 0) - extra if extra is not None and overhead_s is not None else None
    return extra, rest, suspended


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def main(out, counts, mib, pool, sweeps, app="mpi_sweep", slice_s="10"):
    what = {
        "mpi_sweep": f"mpi_sweep, one rank per node, {mib} MiB a rank, {sweeps} sweeps",
        "lammps": "LAMMPS Lennard-Jones melt, one rank per node",
        "hpcc": "hpcc, one rank per node",
    }[app]
    print(f"Two MPI jobs ({what}), pool {pool} per node, quantum {slice_s} s\n")
    print("| nodes | scheduler | makespan (s) | overhead vs batch | overhead cut vs Slurm gang | jobs killed or failed | check as batch |")
    print("|---|---|---|---|---|---|---|")
    parts = []
    for n in counts.split():
        base, want, slurm_ov, batch_run = None, None, None, None
        for row in ROWS:
            d = f"{out}/n{n}-{row}"
            if not os.path.exists(f"{d}/states.txt"):
                continue
            mk = float(open(f"{d}/makespan").read().strip() or 0)
            if row == "batch":
                base = mk
            states = [line.split()[2] for line in open(f"{d}/states.txt") if line.strip()]
            bad = sum(1 for s in states if s != "COMPLETED")
            checks = []
            for j in "ab":
                text = open(f"{d}/{j}.out").read() if os.path.exists(f"{d}/{j}.out") else ""
                checks.append(check_of(app, text))
            if row == "batch":
                want = checks[0]
            same = sum(1 for x in checks if x and x == want)
            ov = (mk / base - 1) if base else None
            if row == "slurm-gang":
                slurm_ov = ov
            cut = "-"
            # Only against an overhead to cut: where Slurm gang ran no
            # slower than batch, a "cut" of it is no measure.
            if row == "memgang" and slurm_ov and slurm_ov > 0 and ov is not None:
                cut = f"{(1 - ov / slurm_ov) * 100:.0f}%"
            ovs = "-" if ov is None else f"{ov * 100:.1f}%"
            print(f"| {n} | {NAMES[row]} | {mk:.1f} | {ovs} | {cut} | {bad} of {len(states)} | {same} of 2 |")

            jobs = slurm_jobs(open(f"{d}/jobs.txt").read()) if os.path.exists(f"{d}/jobs.txt") else []
            sw_s = None
            if row == "memgang" and os.path.exists(f"{d}/memgang.json"):
                sw_s = sum(s["took_s"] for s in json.load(open(f"{d}/memgang.json"))["switches"])
            over_s = mk - base if base is not None else None
            if row == "batch":
                batch_run = sum(j["run_s"] for j in jobs) if jobs and all(j["run_s"] is not None for j in jobs) else None
            extra, rest, susp = split(jobs, sw_s, batch_run, over_s)
            parts.append(f"| {n} | {NAMES[row]} | {fmt(over_s)} | {fmt(sw_s)} | {fmt(extra, '.0f')} | {fmt(rest)} | {fmt(susp, '.0f')} |")

    print("\nThe overhead, part by part (s; Slurm's times are whole seconds; columns: bench/slurm_table.py's header)\n")
    print("| nodes | scheduler | overhead | in switches | run time + | rest | suspended |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(parts))

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
        limit = out_b / (int(bw.group(2)) * 1e6) + in_b / (int(bw.group(1)) * 1e6) if bw else 0
        # No limit where nothing was paged (jobs that fit: a small check run).
        if limit > 0:
            lim, ratio = f"{limit:.2f}", f"{mean / limit:.2f}"
            if n == "1":
                one = mean / limit
            vs = f"{mean / limit / one:.2f}" if one else "-"
        else:
            lim, ratio, vs = "-", "-", "-"
        mib_sw = (out_b + in_b) / 2**20
        print(f"| {n} | {len(sw)} | {mean:.2f} | {mib_sw:.0f} | {mib_sw / int(n):.0f} | {lim} | {ratio} | {vs} |")

    peaks = []
    for n in counts.split():
        f = f"{out}/n{n}-batch/pool-peak.txt"
        if os.path.exists(f):
            mib_peak = [int(line.split()[1]) >> 20 for line in open(f) if line.strip()]
            if mib_peak:
                peaks.append(f"{n} nodes {max(mib_peak)} MiB")
    if peaks:
        print(f"\nOne job's peak per node (the batch row's pools' peak, the highest node): {', '.join(peaks)}")


def self_test():
    # Captured from bench/slurm.sh's Slurm gang row (APP=lammps, 2 nodes,
    # Slurm 22.05.8; output paths shortened): job b, suspended 27 of its
    # 56 s; then a job whose end Slurm does not know.
    line = ("JobId=2 JobName=b UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 "
            "Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 "
            "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:29 TimeLimit=UNLIMITED TimeMin=N/A "
            "SubmitTime=2026-11-29T01:30:22 EligibleTime=2026-11-29T01:30:22 AccrueTime=2026-11-29T01:30:22 "
            "StartTime=2026-11-29T01:30:25 EndTime=2026-11-29T01:31:21 Deadline=N/A "
            "SuspendTime=2026-11-29T01:31:17 SecsPreSuspend=25 LastSchedEval=2026-11-29T01:30:25 Scheduler=Main "
            "Partition=memgang AllocNode:Sid=localhost:6256 ReqNodeList=(null) ExcNodeList=(null) NodeList=n[1-2] "
            "BatchHost=n1 NumNodes=2 NumCPUs=4 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
            "TRES=cpu=4,node=2,billing=4 Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=1 "
            "MinMemoryNode=200M MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=YES "
            "Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/work/wt/slurmbench "
            "StdErr=/tmp/x/b.out StdIn=/dev/null StdOut=/tmp/x/b.out Power= ")
    pending = "JobId=8 JobName=c JobState=CANCELLED RunTime=00:00:00 StartTime=2026-11-28T10:02:00 EndTime=Unknown"
    jobs = slurm_jobs(line + "\n\n" + pending + "\n")
    assert [j["name"] for j in jobs] == ["b", "c"]
    assert jobs[0]["run_s"] == 29 and jobs[0]["state"] == "COMPLETED"
    assert jobs[1]["end"] is None
    assert seconds("1-00:00:03") == 86403 and seconds("05:07") == 307
    # 56 s from start to end, 29 run: 27 s suspended; 29 against batch's
    # 28: 1 s more run time; 10 s of overhead of which 5 s in switches.
    extra, rest, susp = split(jobs[:1], 5.0, 28, 10.0)
    assert (extra, rest, susp) == (1, 4.0, 27.0), (extra, rest, susp)
    assert split(jobs, 5.0, 28, 10.0) == (None, None, None)
    assert split(jobs[:1], None, None, None) == (None, None, 27.0)
    assert check_of("mpi_sweep", "x checksum 00ff\nmpi_sweep ... checksum 0a1b\n") == "0a1b"
    assert check_of("lammps", "lammps side 20 steps 50 thermo 50 0.7 -5.2 0 -4.1 5.3\n") == "50 0.7 -5.2 0 -4.1 5.3"
    assert check_of("hpcc", "hpcc n 1000 residual 0.0042 passed 3 failed 0\n") == "residual 0.0042 passed 3 failed 0"
    assert check_of("hpcc", "hpcc n 1000 residual 0.0042 passed 2 failed 1\n") is None
    print("slurm_table.py: self-test passed")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        main(*sys.argv[1:])
