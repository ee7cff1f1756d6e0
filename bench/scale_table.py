"""bench/scale.sh's table: per kind (memgang-workload, LAMMPS) and size, a
pair's so/ao/ai switches against the kernel alone paging the same bytes and
the disk's limit for them, memgang's own part of a switch and its CPU per
GiB moved, its peak memory per GiB recorded, each step's share of the
switches, and the overhead against the same pair in batch (issue 47,
docs/scale.md).

    python3 bench/scale_table.py OUT_DIR      (bench/scale.sh's directory)
    python3 bench/scale_table.py --self-test
"""
import glob
import json
import os
import re
import statistics
import sys

GIB = 1 << 30
MIB = 1 << 20
# memgang's own work in a switch: what is neither paging nor waiting for it.
OWN = ("freeze_s", "sampling_s", "scan_s", "wss_s", "thaw_s", "other_s")
SHARES = [("reclaim", ("reclaim_s",)), ("advise", ("advise_s",)), ("drain", ("drain_s",)),
          ("stream wait", ("stream_wait_s",)), ("page-in", ("page_in_s",)),
          ("huge wait", ("huge_wait_s",)), ("own", OWN)]


def kernel_rates(path):
    """The kernel alone's rates from a paging_rate output: (out B/s, drain s
    per byte out, in B/s), the median over its rows; None without one. Rows:
    the synthetic process's ("small ...", 15 fields) or a stopped job's
    ranks in turn ("in_turn ...", 10 fields)."""
    if not os.path.exists(path):
        return None
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 15 and f[0] == "small" and re.match(r"^[\d.]+$", f[2]):
            out_b, out_s, drain_s, in_b, in_s = float(f[2]) * MIB, float(f[6]), float(f[9]), float(f[10]) * MIB, float(f[11])
        elif len(f) == 10 and f[0] == "in_turn" and re.match(r"^[\d.]+$", f[1]):
            out_b, out_s, drain_s, in_b, in_s = float(f[1]) * MIB, float(f[2]), float(f[4]), float(f[5]) * MIB, float(f[6])
        else:
            continue
        if out_b and out_s and in_b and in_s:
            rows.append((out_b / out_s, drain_s / out_b, in_b / in_s))
    if not rows:
        return None
    return tuple(statistics.median(r[i] for r in rows) for i in range(3))


def disk(out_dir):
    """The disk's sequential (read, write) B/s, the mean of the run's start
    and end."""
    bws = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out_dir, "bandwidth-*.json")))]
    if not bws:
        return None
    return (statistics.mean(b["read_bytes_per_s"] for b in bws), statistics.mean(b["write_bytes_per_s"] for b in bws))


def moved(run):
    """The switches that moved memory and have steps."""
    return [s for s in run["switches"] if s.get("steps") and (s["paged_out_bytes"] or s["paged_in_bytes"])]


def unaccounted(run):
    """The largest |unaccounted| of a job, as a share of its wall time."""
    shares = [abs(j["account"]["unaccounted_s"]) / j["account"]["wall_s"]
              for j in run["jobs"] if j.get("account") and j["account"]["wall_s"] > 0]
    return max(shares) if shares else None


def pct(x, digits=1):
    return "-" if x is None else f"{x * 100:.{digits}f}%"


def num(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def row(kind, size, batch, gang, kernel, dsk, rss_slope):
    sw = moved(gang)
    took = [s["took_s"] for s in sw]
    out_b = [s["paged_out_bytes"] for s in sw]
    in_b = [s["paged_in_bytes"] for s in sw]
    k = [o / kernel[0] + o * kernel[1] + i / kernel[2] for o, i in zip(out_b, in_b)] if kernel else None
    d = [o / dsk[1] + i / dsk[0] for o, i in zip(out_b, in_b)] if dsk else None
    total = sum(took)
    step = lambda keys: sum(s["steps"].get(key, 0.0) for s in sw for key in keys)
    gib_moved = (sum(out_b) + sum(in_b)) / GIB
    extra = lambda key: None if not gib_moved or "executor" not in gang or "executor" not in batch \
        else (gang["executor"][key] - batch["executor"][key]) / gib_moved
    rss = (gang.get("executor") or {}).get("max_rss_bytes")
    rss_b = (batch.get("executor") or {}).get("max_rss_bytes")
    longest = max((i["end_s"] - i["start_s"] for i in gang["timeline"]), default=None)
    jobs_ok = sum(1 for j in gang["jobs"] + batch["jobs"] if j.get("exit_code") == 0)
    med = lambda xs: statistics.median(xs) if xs else None
    cells = [
        kind, f"{size:g}", f"{gang['pool_memory_bytes'] / GIB:.2f}",
        f"{gang['quantum_s']:.0f} / {num(longest, '{:.0f}')}", str(len(sw)),
        num(med(took)), num(med(k)), num(med(d)),
        num(med([t / x for t, x in zip(took, k)]) if k else None, "{:.2f}x"),
        num(med([t / x for t, x in zip(took, d)]) if d else None, "{:.2f}x"),
        num(med([sum(s["steps"].get(key, 0.0) for key in OWN) for s in sw]), "{:.3f}"),
        num(extra("user_cpu_s"), "{:.3f}"), num(extra("system_cpu_s"), "{:.3f}"),
        num(None if rss is None else rss / MIB, "{:.0f}"),
        num(None if rss is None or rss_b is None else (rss - rss_b) / MIB / size, "{:.1f}"),
        num(rss_slope, "{:.1f}"),
    ]
    cells += [pct(step(keys) / total if total else None) for _, keys in SHARES]
    over = gang["makespan_s"] / batch["makespan_s"] - 1 if batch["makespan_s"] else None
    cells += [f"{batch['makespan_s']:.1f}", f"{gang['makespan_s']:.1f}", pct(over),
              pct(unaccounted(batch), 2), pct(unaccounted(gang), 2),
              f"{jobs_ok} of {len(gang['jobs']) + len(batch['jobs'])}"]
    return cells


HEAD = (["kind", "GiB a job", "pool GiB", "quantum s (set / longest)", "switches", "switch s",
         "kernel alone s", "disk's limit s", "switch / kernel", "switch / disk", "own s a switch",
         "memgang user CPU s per GiB moved", "memgang system CPU s per GiB moved", "peak RSS MiB", "RSS over batch, MiB per GiB",
         "RSS MiB per GiB more"]
        + [f"{name} share" for name, _ in SHARES]
        + ["batch s", "gang s", "over batch", "max unaccounted (batch)", "max unaccounted (gang)",
           "jobs exit 0"])


def table(out_dir):
    dsk = disk(out_dir)
    lines = []
    for f in ("machine.txt", "testbed.txt"):
        p = os.path.join(out_dir, f)
        if os.path.exists(p):
            lines += [l.rstrip() for l in open(p) if l.strip()]
    if dsk:
        lines.append(f"disk: read {dsk[0] / 1e6:.0f} MB/s, write {dsk[1] / 1e6:.0f} MB/s (sequential, "
                     "O_DIRECT; the mean of the run's start and end)")
    lines += ["", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for kind in ("workload", "lammps"):
        sizes = sorted({float(m.group(1)) for f in glob.glob(os.path.join(out_dir, f"{kind}-*-gang.json"))
                        for m in [re.search(r"-([\d.]+)-gang\.json$", f)] if m})
        first = None
        for size in sizes:
            s = f"{size:g}"
            gang = json.load(open(os.path.join(out_dir, f"{kind}-{s}-gang.json")))
            batch_p = os.path.join(out_dir, f"{kind}-{s}-batch.json")
            if not os.path.exists(batch_p):
                continue
            batch = json.load(open(batch_p))
            kernel = kernel_rates(os.path.join(out_dir, f"kernel-{kind}-{s}.txt"))
            rss = (gang.get("executor") or {}).get("max_rss_bytes")
            slope = None
            if first and rss is not None and size > first[0]:
                slope = (rss - first[1]) / MIB / (size - first[0])
            if first is None and rss is not None:
                first = (size, rss)
            lines.append("| " + " | ".join(row(kind, size, batch, gang, kernel, dsk, slope)) + " |")
    lines += ["", NOTE]
    return "\n".join(lines)


NOTE = ("Per kind and size, one pair in a pool that holds one job, gang so/ao/ai with the quantum growing "
        "after a dear switch, against the same pair in batch. switch s, kernel alone s, disk's limit s: "
        "medians over the switches that moved memory; the kernel alone pages the switch's bytes at "
        "crates/linux/examples/paging_rate.rs's rates measured in this run (a synthetic process of the "
        "size on small pages; for LAMMPS its stopped ranks in turn), the disk's limit writes the bytes out "
        "and reads them in at its sequential rates. own: memgang's own steps (freeze, sampling, scan, wss, "
        "thaw, other), median per switch; its share of all switch time is the own share. memgang CPU: the "
        "executor's user and system CPU (getrusage) over the batch run's, per GiB the switches moved (the "
        "system part holds the kernel's paging done in memgang's calls: the cgroup reclaim, the page-in). RSS over batch: the executor's peak RSS less "
        "the batch run's, per GiB of a job (a pool that holds one records all of a job); RSS more: the "
        "peak's growth per GiB from the smallest size. Shares: each step's part of all switch time. "
        "unaccounted: the largest |unaccounted| of a job over its wall time (the time account).")


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        json.dump({"read_bytes_per_s": 1e9, "write_bytes_per_s": 5e8}, open(os.path.join(d, "bandwidth-start.json"), "w"))
        with open(os.path.join(d, "kernel-workload-1.txt"), "w") as f:
            f.write("pages      round    MiB huge_MiB collapse_s coll_cpu     out_s out_MB/s  out_cpu   drain_s   "
                    "in_MiB      in_s  in_MB/s   in_cpu vs_disk\n")
            f.write("small          1   1024       0     0.000    0.000     1.000     1074    0.900     0.100     "
                    "1024     1.000     1074    0.800    0.50\n")
        steps = {"freeze_s": 0.01, "sampling_s": 0.01, "scan_s": 0.02, "wss_s": 0.01, "reclaim_s": 1.5,
                 "drain_s": 0.2, "stream_wait_s": 0.2, "page_in_s": 0.0, "thaw_s": 0.0, "other_s": 0.05}
        sw = {"at_s": 10, "took_s": 2.0, "paged_out_bytes": GIB, "paged_in_bytes": GIB, "steps": steps}
        acc = lambda u: {"wall_s": 100.0, "unaccounted_s": u}
        job = lambda u: {"exit_code": 0, "account": acc(u)}
        gang = {"pool_memory_bytes": 1.1 * GIB, "quantum_s": 60, "makespan_s": 210.0,
                "timeline": [{"start_s": 0, "end_s": 60}, {"start_s": 62, "end_s": 182}],
                "switches": [sw, dict(sw, took_s=2.2), {"took_s": 0.01, "paged_out_bytes": 0,
                                                         "paged_in_bytes": 0, "steps": steps}],
                "jobs": [job(0.5), job(-0.8)],
                "executor": {"user_cpu_s": 3.0, "system_cpu_s": 5.0, "max_rss_bytes": 40 * MIB}}
        batch = {"makespan_s": 200.0, "timeline": [], "switches": [], "jobs": [job(0.1), job(0.2)],
                 "executor": {"user_cpu_s": 1.0, "system_cpu_s": 1.0, "max_rss_bytes": 20 * MIB}}
        json.dump(gang, open(os.path.join(d, "workload-1-gang.json"), "w"))
        json.dump(batch, open(os.path.join(d, "workload-1-batch.json"), "w"))
        t = table(d)
        r = [l for l in t.splitlines() if l.startswith("| workload")]
        assert len(r) == 1, t
        c = [x.strip() for x in r[0].strip("|").split("|")]
        cell = dict(zip(HEAD, c))
        # Kernel alone: 1 GiB out at 1074 MiB/s (1 s), drain 0.1 s, in 1 s.
        assert cell["kernel alone s"] == "2.10", cell
        assert cell["disk's limit s"] == "3.22", cell
        assert cell["switch s"] == "2.10" and cell["switch / kernel"] == "1.00x", cell
        assert cell["quantum s (set / longest)"] == "60 / 120", cell
        # Own: 0.01+0.01+0.02+0.01+0+0.05 = 0.10 per switch, of 4.2 s.
        assert cell["own s a switch"] == "0.100" and cell["own share"] == "4.8%", cell
        # (3 - 1) s of user CPU and (5 - 1) of system over 4 GiB moved.
        assert cell["memgang user CPU s per GiB moved"] == "0.500", cell
        assert cell["memgang system CPU s per GiB moved"] == "1.000", cell
        assert cell["RSS over batch, MiB per GiB"] == "20.0", cell
        assert cell["over batch"] == "5.0%" and cell["max unaccounted (gang)"] == "0.80%", cell
        assert cell["jobs exit 0"] == "4 of 4", cell
    print("self-test ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        print(table(sys.argv[1]))
