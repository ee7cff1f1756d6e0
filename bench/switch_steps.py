"""Where a switch's time goes, step by step: each switch's `steps` in the
results JSON (the switch engine and executor time each call; the steps and
`other` add up to the switch's `took_s`, docs/results.md), per-switch
medians per run, beside the kernel alone paging the same bytes
(bench/paging_rate.sh's LAMMPS rows: page-out, drain and page-in of a
stopped job's ranks, in turn, with nothing else running).

The kernel-alone column scales those rows' rates to each switch's own
bytes (out at its MADV_PAGEOUT rate, drain per byte out, in at its page-in
rate) and takes the median over the switches; `vs kernel` is the median
switch over it. Used by bench/realapps_table.py and bench/switch_ab.sh;
alone, with each run switch by switch too:
    python3 bench/switch_steps.py PAGING_RATE_TABLE RUN.json...
"""
import glob
import os
import re
import statistics
import sys

STEPS = ["freeze", "sampling", "huge_wait", "scan", "wss", "reclaim", "advise", "drain",
         "stream_wait", "page_in", "thaw", "other"]
MIB = 1 << 20


def paging_rate_table():
    """The bench/paging_rate.sh table to set switches against: PAGING_RATE,
    else the newest under bench/results/ (names sort by date); None if
    there is none."""
    return os.environ.get("PAGING_RATE") or max(
        glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "paging-rate-*",
                               "table.txt")), default=None)


def kernel_rows(table_txt):
    """bench/paging_rate.sh's LAMMPS rows by mode: [(out_MiB, out_s, drain_s,
    in_MiB, in_s, total_s)], or {} when the file is missing."""
    rows = {}
    if not table_txt or not os.path.exists(table_txt):
        return rows
    for line in open(table_txt):
        f = line.split()
        if len(f) == 10 and f[0] in ("in_turn", "parallel", "turn_limit") and re.match(r"^[\d.]+$", f[1]):
            rows.setdefault(f[0], []).append(tuple(float(f[i]) for i in (1, 2, 4, 5, 6, 8)))
    return rows


def kernel_s(rows, out_bytes, in_bytes):
    """What the kernel alone took for these bytes at a mode's median rates."""
    out_rate = statistics.median(r[0] * MIB / r[1] for r in rows)
    in_rate = statistics.median(r[3] * MIB / r[4] for r in rows)
    drain_per_byte = statistics.median(r[2] / (r[0] * MIB) for r in rows)
    return out_bytes / out_rate + out_bytes * drain_per_byte + in_bytes / in_rate


def switches(run):
    """The run's switches that moved memory and have steps."""
    return [s for s in run["switches"] if s.get("steps") and (s["paged_out_bytes"] or s["paged_in_bytes"])]


def table(labelled, kernel):
    """labelled: [(label, [run, ...])]; kernel: kernel_rows()."""
    head = ["run", "switches", "took"] + STEPS + ["out MiB", "in MiB"]
    modes = [m for m in ("in_turn", "turn_limit") if m in kernel]
    head += [f"kernel alone ({m})" for m in modes] + [f"vs kernel ({m})" for m in modes]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, runs in labelled:
        sw = [s for r in runs for s in switches(r)]
        if not sw:
            out.append(f"| {label} | 0 |" + " - |" * (len(head) - 2))
            continue
        med = lambda f: statistics.median(f(s) for s in sw)
        cells = [label, str(len(sw)), f"{med(lambda s: s['took_s']):.3f}"]
        cells += [f"{med(lambda s, k=k: s['steps'].get(k + '_s', 0.0)):.3f}" for k in STEPS]
        cells += [f"{med(lambda s: s['paged_out_bytes']) / MIB:.0f}", f"{med(lambda s: s['paged_in_bytes']) / MIB:.0f}"]
        ks = {m: [kernel_s(kernel[m], s["paged_out_bytes"], s["paged_in_bytes"]) for s in sw] for m in modes}
        cells += [f"{statistics.median(ks[m]):.3f}" for m in modes]
        cells += [f"{statistics.median(s['took_s'] / k for s, k in zip(sw, ks[m])):.2f}x" for m in modes]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def per_switch(run, kernel, mode="in_turn"):
    """Each switch of one run: its steps, its page-out side (scan, reclaim,
    advise, drain) against the kernel alone's out and drain at its bytes,
    and its whole against the kernel alone's out, drain and in; the reclaim
    by age's rate (all the switch's bytes out over its time: where it made
    only part of the room this overstates it) and memgang's own work
    (freeze, sampling, scans, thaw, other) and its share of the switch."""
    head = (["at (s)", "took"] + STEPS
            + ["out MiB", "in MiB", "out side", "reclaim MB/s", "own", "own share", "kernel out+drain",
               "reclaim / kernel out+drain", "kernel alone", "vs kernel"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = kernel.get(mode)
    for s in switches(run):
        st = s["steps"]
        side = sum(st.get(k, 0.0) for k in ("scan_s", "reclaim_s", "advise_s", "drain_s"))
        cells = [f"{s['at_s']:.1f}", f"{s['took_s']:.3f}"] + [f"{st.get(k + '_s', 0.0):.3f}" for k in STEPS]
        # memgang's own work: what is neither paging nor waiting for it.
        own = sum(st.get(k, 0.0) for k in ("freeze_s", "sampling_s", "scan_s", "wss_s", "thaw_s", "other_s"))
        rate = s["paged_out_bytes"] / st["reclaim_s"] / 1e6 if st.get("reclaim_s") else None
        cells += [f"{s['paged_out_bytes'] / MIB:.0f}", f"{s['paged_in_bytes'] / MIB:.0f}", f"{side:.3f}",
                  "-" if rate is None else f"{rate:.0f}", f"{own:.3f}", f"{own / s['took_s'] * 100:.0f}%"]
        if rows:
            k_out = kernel_s(rows, s["paged_out_bytes"], 0)
            k_all = kernel_s(rows, s["paged_out_bytes"], s["paged_in_bytes"])
            ratio = f"{st.get('reclaim_s', 0.0) / k_out:.2f}" if k_out else "-"
            cells += [f"{k_out:.3f}", ratio, f"{k_all:.3f}", f"{s['took_s'] / k_all:.2f}x"]
        else:
            cells += ["-", "-", "-", "-"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


NOTE = ("Per switch, medians (s) over the switches that moved memory; each step's median apart, so the "
        "steps need not add up to `took`. scan: PAGEMAP_SCAN records; wss: the working set over the quantum (smaps_rollup, clear_refs); reclaim: cgroup reclaim by age "
        "(so's make-room); advise: MADV_PAGEOUT; drain: waiting for the writes; stream_wait: the "
        "resume waiting for the page-in streamed beside the page-out; page_in: the page-in left at "
        "resume; sampling: taskstats at freeze and thaw. Kernel alone: bench/paging_rate.sh's LAMMPS "
        "rows at these bytes (no scan, no freezer).")


if __name__ == "__main__":
    import json
    k = kernel_rows(sys.argv[1])
    runs = [(os.path.basename(f)[:-5], json.load(open(f))) for f in sys.argv[2:]]
    print(table([(label, [run]) for label, run in runs], k))
    print()
    print(NOTE)
    for label, run in runs:
        print()
        print(f"{label}, switch by switch (kernel alone: in_turn rows):")
        print()
        print(per_switch(run, k))
