"""Simulated against measured: for every run in each result DIR of
bench/adaptive.sh or bench/hybrid.sh, the same experiment in `memgang sim`
and one table of makespans and switching overheads (issue 6: within 15%).

usage: sim_validate.py MEMGANG [--calibration FILE | --random-reads FILE] [--readahead FILE] [--own-evict FILE] [--no-queue-rate] [--all-sweep] DIR [DIR ...]

The simulated experiment is built from the results alone: one node with
the run's pool as its memory and the machine's CPUs; per job its declared
memory, its ranks and, as its run time alone, its time in the measured
batch run (DIR/<experiment>-batch.json). The device: the sequential
bandwidths measured in that run (DIR/bandwidth-*.json, the mean of start
and end, or DIR/testbed.txt); the random read rate and the switch
efficiency from FILE (written by `memgang calibrate`; with --random-reads
only the random read rates, one at a time and 8 in flight, and the
readahead, reclaim cost and own-eviction share, those the file has), else the simulator's
defaults (20,000 reads/s, efficiency 1); the run's own random read rates
(DIR/random-reads.json, written by bench/lib.sh since 2026-11-27) come
before FILE's. --readahead FILE: the readahead window's pages and its cost
in random faults (`readahead_pages`, `readahead_reads`) from FILE, a
calibration that timed demand faults (since 2026-11-27), over any other
but the run's own (DIR/random-reads.json, when bench/lib.sh timed faults).
--own-evict FILE: the share of a resumed job's faults that evict its own
pages, how it moves with what the job lacks and how far it leans towards
the older job (`own_evict_share`, `own_evict_slope`, `own_evict_split`,
those it has) from FILE, a calibration that measured them (since
2026-11-27); else the simulator's defaults.
The jobs' touch rate: TOUCH_SHARE of their sweeps per second alone; their
access pattern (`--access`): random for memgang-workload --pattern random,
else sweep (--all-sweep: sweep for all, the model before it knew random). The simulated overhead is
measured against the simulated batch run, as the measured one against the
measured batch run: (makespan - batch) / makespan. Below the count per
policy, cosched's split by whether the simulated node was ever
overcommitted (`overcommitted_node_s`): where it was, the result rests on
the model's thrashing.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

PAGE = os.sysconf("SC_PAGE_SIZE")


def device(d, calibration, random_only, no_queue=False, readahead=None):
    bw = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(d, "bandwidth-*.json")))]
    if bw:
        read = sum(b["read_bytes_per_s"] for b in bw) / len(bw)
        write = sum(b["write_bytes_per_s"] for b in bw) / len(bw)
        src = "bandwidth-*.json"
    else:
        try:
            text = open(os.path.join(d, "testbed.txt")).read()
        except OSError:
            return None, None, False
        m = re.search(r"read (\d+) MB/s, write (\d+) MB/s", text)
        if not m:
            return None, None, False
        read, write = float(m[1]) * 1e6, float(m[2]) * 1e6
        src = "testbed.txt"
    dev = {"write_bps": write, "read_bps": read, "random_read_iops": 20000.0}
    if calibration:
        dev["random_read_iops"] = calibration["random_read_iops"]
        for k in ("readahead_pages", "readahead_reads", "reclaim_cpu_s_per_page", "queue_read_iops",
                  "own_evict_share"):
            if k in calibration:
                dev[k] = calibration[k]
        if not random_only:
            dev["switch_efficiency"] = calibration.get("switch_efficiency", 1.0)
    # The run's own random read rates, measured the day it ran (bench/lib.sh
    # writes them), come before any calibration's: the lru rows follow them.
    own = os.path.join(d, "random-reads.json")
    r = None
    if os.path.exists(own):
        r = json.load(open(own))
        dev["random_read_iops"] = r["random_read_iops"]
        if "queue_read_iops" in r and not no_queue:
            dev["queue_read_iops"] = r["queue_read_iops"]
        src += " and random-reads.json"
    # The readahead: the run's own day's if it timed faults (since
    # 2026-11-27, bench/lib.sh), else --readahead FILE's.
    for k in ("readahead_pages", "readahead_reads"):
        if r and k in r:
            dev[k] = r[k]
        elif readahead:
            dev[k] = readahead[k]
    own_readahead = bool(r) and all(k in r for k in ("readahead_pages", "readahead_reads"))
    return dev, src, own_readahead


def swf(batch):
    """One SWF line per job of the batch run: run time alone, average CPU
    time per rank (field 6, the share of its CPUs the job keeps busy alone;
    -1 where the run did not record it), ranks, KB per rank."""
    lines = []
    for i, j in enumerate(sorted(batch["jobs"], key=lambda j: j["arrival_s"]), 1):
        run = j["finish_s"] - j["start_s"]
        kb = (j["declared_memory_bytes"] or j["peak_anon_bytes"]) / j["ranks"] / 1024
        cpu = f"{j['cpu_s'] / j['ranks']:.3f}" if j.get("cpu_s") else "-1"
        lines.append(f"{i} {j['arrival_s']:.3f} -1 {run:.3f} {j['ranks']} {cpu} {kb:.0f} {j['ranks']} "
                     f"-1 -1 1 -1 -1 -1 -1 -1 -1 -1")
    return "\n".join(lines) + "\n"


# Share of a job's sweeps the simulator's `--touch-per-s` gets. The model
# faults `(1 - c)·touch·memory` per second of computing (every touch of a
# page that does not fit reads it back), more than the thrashing runs read
# from swap at the full sweep rate (pages still in the swap cache when
# touched again come back without a read). 0.5 is fitted on these same
# runs, not derived (docs/sim.md).
TOUCH_SHARE = 0.5


def touch_per_s(batch):
    """Sweeps per second of computing: memgang-workload visits every page
    of its memory once per iteration, so its iterations over its time alone
    in the batch run (mean over the jobs; None if a job is not one), times
    TOUCH_SHARE."""
    rates = []
    for j in batch["jobs"]:
        c = j["command"]
        if "--iterations" not in c:
            return None
        rates.append(int(c[c.index("--iterations") + 1]) / (j["finish_s"] - j["start_s"]))
    return TOUCH_SHARE * sum(rates) / len(rates) if rates else None


def access(batch):
    """`random` when every job touches its memory at random
    (memgang-workload --pattern random), else `sweep` (seq, stencil and
    programs not ours sweep their arrays)."""
    def pattern(j):
        c = j["command"]
        return c[c.index("--pattern") + 1] if "--pattern" in c else None
    return "random" if all(pattern(j) == "random" for j in batch["jobs"]) else "sweep"


def gib(r):
    """The node's swap traffic during the run, in and out (/proc/vmstat)."""
    return (r["swap_in_pages"] + r["swap_out_pages"]) * PAGE / 2**30


def simulate(memgang, tmp, trace, dev, r, policy, touch, pattern):
    """The simulated run's JSON, with `ends`: each job's end, s, in the
    trace's order (the measured batch run's)."""
    out, csv = os.path.join(tmp, "out.json"), os.path.join(tmp, "jobs.csv")
    cmd = [memgang, "sim", "--swf", trace, "--device", dev, "--json", out, "--csv", csv, "--access", pattern,
           "--nodes", "1", "--node-memory", f"{r['pool_memory_bytes']}B",
           "--cpus-per-node", str(r["machine"]["cpus"]),
           "--policy", policy, "--quantum", f"{r['quantum_s']:g}s"]
    if policy == "gang":
        cmd += ["--switch", r["switch"]]
    if r.get("overlap"):
        cmd += ["--overlap", r["overlap"]]
    if touch:
        cmd += ["--touch-per-s", f"{touch:.4g}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    sim = json.load(open(out))
    lines = open(csv).read().splitlines()
    col = lines[0].split(",").index("finish_s")
    ends = {int(l.split(",")[0]): float(l.split(",")[col]) for l in lines[1:]}
    sim["ends"] = [ends[k] for k in sorted(ends)]
    return sim


def main(argv):
    memgang, argv = argv[0], argv[1:]
    calibration, random_only = None, False
    if argv[:1] in (["--calibration"], ["--random-reads"]):
        calibration = json.load(open(argv[1]))
        random_only = argv[0] == "--random-reads"
        argv = argv[2:]
    readahead = None
    if argv[:1] == ["--readahead"]:
        readahead = json.load(open(argv[1]))
        argv = argv[2:]
    own_evict = None
    if argv[:1] == ["--own-evict"]:
        f = json.load(open(argv[1]))
        own_evict = {k: f[k] for k in ("own_evict_share", "own_evict_slope", "own_evict_split")
                     if k in f}
        argv = argv[2:]
    no_queue = argv[:1] == ["--no-queue-rate"]
    if no_queue:
        # The model then charges a readahead as one single read.
        if calibration:
            calibration.pop("queue_read_iops", None)
        argv = argv[1:]
    all_sweep = argv[:1] == ["--all-sweep"]
    if all_sweep:
        argv = argv[1:]
    rows, own_rates, spread = [], [], []
    print(f"{'experiment':<24} {'policy/switch':<18} {'meas_s':>7} {'sim_s':>7} {'sim/meas':>8} "
          f"{'meas_ovh':>8} {'sim_ovh':>8} {'meas_sw':>7} {'sim_sw':>7} {'meas_sw_s':>9} {'sim_sw_s':>8} {'meas_GiB':>8} {'sim_GiB':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for d in argv:
            dev, src, own_readahead = device(d, calibration, random_only, no_queue, readahead)
            if dev is not None and own_evict is not None:
                dev.update(own_evict)
            if dev is None:
                print(f"# {d}: no bandwidth-*.json nor testbed.txt: skipped", file=sys.stderr)
                continue
            if src.endswith("random-reads.json"):
                own = f"{os.path.basename(os.path.normpath(d))} {dev['random_read_iops']:.0f}/s"
                if own_readahead:
                    own += f" (readahead {dev['readahead_pages']:.2f} pages at {dev['readahead_reads']:.2f} faults)"
                own_rates.append(own)
                print(f"# {d}: the run's own random read rates ({dev['random_read_iops']:.0f}/s)", file=sys.stderr)
            devfile = os.path.join(tmp, "device.json")
            json.dump(dev, open(devfile, "w"))
            for bf in sorted(glob.glob(os.path.join(d, "*-batch.json"))):
                exp = os.path.basename(bf)[: -len("-batch.json")]
                batch = json.load(open(bf))
                if batch["interrupted"] or any(j.get("exit_code") != 0 for j in batch["jobs"]):
                    print(f"# {bf}: incomplete batch run: skipped", file=sys.stderr)
                    continue
                trace = os.path.join(tmp, "t.swf")
                open(trace, "w").write(swf(batch))
                touch, pattern = touch_per_s(batch), "sweep" if all_sweep else access(batch)
                sim_batch = simulate(memgang, tmp, trace, devfile, batch, "batch", touch, pattern)
                runs = sorted(f for f in glob.glob(os.path.join(d, exp + "-*.json"))
                              if re.fullmatch(re.escape(exp) + r"-[a-z].*\.json", os.path.basename(f)))
                for f in runs:
                    r = json.load(open(f))
                    if r["policy"] == "batch":
                        continue  # the simulated batch is the measured one by construction
                    s = simulate(memgang, tmp, trace, devfile, r, r["policy"], touch, pattern)
                    how = r["policy"]
                    if r["policy"] == "gang":
                        how += " " + r["switch"]
                    elif r.get("overlap"):
                        how += " " + r["overlap"]
                    ms, ss = r["makespan_s"], s["makespan_s"]
                    cut = r["interrupted"]
                    ratio = ss / ms
                    meas_ovh = "-" if cut else f"{100 * (ms - batch['makespan_s']) / ms:.1f}%"
                    sim_ovh = f"{100 * (ss - sim_batch['makespan_s']) / ss:.1f}%"
                    print(f"{os.path.basename(os.path.normpath(d)) + '/' + exp:<24} {how:<18} {('>' if cut else '') + f'{ms:.1f}':>7} {ss:>7.1f} "
                          f"{('<' if cut else '') + f'{ratio:.2f}':>8} {meas_ovh:>8} {sim_ovh:>8} "
                          f"{r['switch_count']:>7} {s['switches']:>7} {r['switch_time_s']:>9.1f} {s['switch_s']:>8.1f} {gib(r):>8.2f} "
                          f"{(s['paged_out_bytes'] + s['paged_in_bytes']) / 2**30:>7.2f}")
                    over = s.get("overcommitted_node_s")  # None: a build from before it
                    rows.append((cut, ratio, how, None if over is None else over > 0))
                    if r["policy"] == "cosched" and not cut and len(r["jobs"]) > 2:
                        order = sorted(batch["jobs"], key=lambda j: j["arrival_s"])
                        meas = {j["name"]: j["finish_s"] for j in r["jobs"]}
                        spread.append((os.path.basename(os.path.normpath(d)) + "/" + exp,
                                       [meas[j["name"]] for j in order], s["ends"]))
    done = [x for cut, x, _, _ in rows if not cut]
    within = sum(abs(x - 1) <= 0.15 for x in done)
    # Per policy (gang by switch, hybrid by overlap): a model change must
    # be seen to help one policy without hurting another.
    per = {}
    for cut, x, how, _ in rows:
        if not cut:
            n, k = per.get(how, (0, 0))
            per[how] = (n + 1, k + (abs(x - 1) <= 0.15))
    print("within 15% per policy: " + ", ".join(f"{how} {k}/{n}" for how, (n, k) in sorted(per.items())))
    # Where the model's thrashing decides a cosched run: the simulated node
    # was overcommitted (its running jobs wanted more than its memory) for
    # a while, or never.
    cos = [(cut, x, over) for cut, x, how, over in rows if how == "cosched"]
    if cos and all(o is not None for _, _, o in cos):
        def part(over):
            sel = [(cut, x) for cut, x, o in cos if o == over]
            fin = [x for cut, x in sel if not cut]
            return (f"within 15% in {sum(abs(x - 1) <= 0.15 for x in fin)} of {len(fin)} completed, "
                    f"{len(sel) - len(fin)} stopped")
        print(f"cosched, simulated node never overcommitted: {part(False)}; overcommitted: {part(True)}")
    print(f"(makespan in s; overheads against the measured and the simulated batch run; sw: switches, sw_s: their seconds; GiB: paged out + in (measured: the node's swap traffic); sim/meas within 15% in {within} of {len(done)} completed runs; "
          f"'>': the measured run was stopped, so its makespan and the ratio are bounds; "
          f"device: the run's sequential bandwidths, "
          + (f"random reads {calibration['random_read_iops']:.0f}/s from the calibration, switch efficiency 1"
             if random_only else
             f"random reads {calibration['random_read_iops']:.0f}/s and switch efficiency "
             f"{calibration.get('switch_efficiency', 1.0):.2f} from the calibration"
             if calibration else "random reads 20000/s, switch efficiency 1")
          + (f", {calibration['queue_read_iops']:.0f}/s at depth 8"
             if calibration and calibration.get("queue_read_iops") else "")
          + (f"; the runs' own random reads: {', '.join(own_rates)}" if own_rates else "")
          + (f"; a readahead of {readahead['readahead_pages']:.2f} pages costs {readahead['readahead_reads']:.2f} random faults"
             + (" where a run did not time its own" if any("readahead" in o for o in own_rates) else "")
             if readahead else "")
          + (f"; a resumed job's own evictions: {own_evict['own_evict_share']:.2f} of its faults"
             + (f", {own_evict['own_evict_slope']:+.2f} per unit it lacks" if "own_evict_slope" in own_evict else "")
             + (f", {own_evict['own_evict_split']:+.2f} for the older job" if "own_evict_split" in own_evict else "")
             if own_evict else "")
          + (f"; every job sweeps" if all_sweep else "")
          + f"; touch per s: {TOUCH_SHARE} of the jobs' sweep rate)")
    # Under cosched the jobs share the node: the model slows them alike,
    # the kernel's LRU may not (some keep their memory, others thrash).
    if spread:
        print("\ncosched runs of 3 jobs or more, each job's end in s, in the order the jobs were started:")
        for name, meas, sim in spread:
            print(f"{name:<24} measured  {' '.join(f'{t:6.1f}' for t in meas)}")
            print(f"{'':<24} simulated {' '.join(f'{t:6.1f}' for t in sim)}")


if __name__ == "__main__":
    main(sys.argv[1:])
