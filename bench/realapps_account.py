"""The time account of a results JSON (docs/results.md, "Time account"),
as the cells bench/realapps_table.py and realapps_rounds.py print beside
each run: where its makespan went, measured (taskstats, memgang's clock).

- CPU vs batch: the jobs' CPU seconds (user + system, rusage) over the
  same jobs' in the batch run (`account.batch_cpu_s`);
- frozen: the jobs' seconds frozen by the policy outside switches, summed
  (a job waiting its turn: the time sharing itself, not an overhead);
- switch: the seconds switches took (the node's);
- io wait: the jobs' time asleep in I/O wait, over the makespan (swap-ins
  they faulted on, writeback their reclaim waited for);
- run queue: the jobs' time runnable without a CPU, over the makespan;
- unaccounted: what no part covers (the jobs' own sleeps, and what no
  counter saw), over the makespan.
Results written before the account have none: "-".
"""


def account(run):
    """The run's account, or None."""
    return run.get("account")


def pct(x, total):
    return f"{x:.1f} ({x / total * 100:.1f}%)" if total else f"{x:.1f}"


def values(run):
    """The account's numbers (s; cpu_vs_batch a fraction), or None."""
    a = account(run)
    if not a:
        return None
    cpu = a["user_cpu_s"] + a["system_cpu_s"]
    b = a.get("batch_cpu_s")
    return {
        "makespan": a["makespan_s"],
        "cpu_vs_batch": cpu / b - 1 if b else None,
        "frozen": a["jobs_frozen_s"],
        "switch": a["switch_s"],
        "io_wait": a["io_wait_s"],
        "run_queue": a["run_queue_s"],
        "unaccounted": a["unaccounted_s"],
    }


HEADER = ("| app | run | CPU vs batch | frozen (s) | switch (s) | io wait (s) "
          "| run queue (s) | unaccounted (s) |")
RULE = "|---|---|---|---|---|---|---|---|"


def cells(v):
    """The cells of `values(run)` (None: dashes), shares of the makespan in
    brackets."""
    if v is None:
        return ["-"] * 6
    m = v["makespan"]
    cvb = "-" if v["cpu_vs_batch"] is None else f"{v['cpu_vs_batch'] * 100:+.1f}%"
    return [cvb, f"{v['frozen']:.1f}", pct(v["switch"], m), pct(v["io_wait"], m),
            pct(v["run_queue"], m), pct(v["unaccounted"], m)]


def median_values(vs):
    """The median of each number over rounds (rounds without an account
    left out); None if no round has one."""
    import statistics
    vs = [v for v in vs if v]
    if not vs:
        return None
    out = {}
    for k in vs[0]:
        xs = [v[k] for v in vs if v[k] is not None]
        out[k] = statistics.median(xs) if xs else None
    return out


# The counters beside the account (docs/results.md, "Counters"): per run,
# summed over its jobs: the kernel's software perf events (no PMU needed),
# the jobs' anonymous huge pages (MB; at each quantum's end, before the
# page-out, and at every sample running; means over the readings, summed over
# the jobs), the machine's 2 MiB THP swap-outs that fell back to small
# pages (mTHP stats, machine-wide, over the longest job's life), the I/O
# wait and CPU the kernel counted while the jobs were frozen (measured at
# each freeze and thaw), the block I/O delay left out as no wait's
# (io_wait_dropped_s; "-" in runs from before it), and the hardware
# counters or why there are none.
COUNTERS_HEADER = ("| app | run | task-clock (s) | page faults (k) | major faults | context switches (k) "
                   "| CPU migrations | huge pages at quantum end (MB) | huge pages running (MB) "
                   "| THP swap-out fallbacks | frozen: io wait / CPU (s) | io wait dropped (s) "
                   "| hardware counters |")
COUNTERS_RULE = "|---|---|---|---|---|---|---|---|---|---|---|---|---|"


def counter_values(run):
    """The counters' numbers, or None for a run without an account."""
    accs = [j.get("account") for j in run.get("jobs", [])]
    accs = [a for a in accs if a]
    if not accs:
        return None
    sw = [a.get("sw") for a in accs]
    have_sw = all(sw)

    def sw_sum(k):
        return sum(s[k] for s in sw) if have_sw else None

    def huge(k):
        hs = [a.get(k) for a in accs]
        return sum(h["mean_bytes"] for h in hs if h) / 2**20 if any(hs) else None

    fallback = max((a.get("mthp", {}).get("2048kB", {}).get("swpout_fallback", 0) for a in accs), default=0)
    hw = [a.get("hw") for a in accs]
    missing = next((a.get("hw_missing") for a in accs if a.get("hw_missing")), None)
    return {
        "task_clock": sw_sum("task_clock_ns") / 1e9 if have_sw else None,
        "page_faults": sw_sum("page_faults"),
        "major_faults": sw_sum("major_faults"),
        "context_switches": sw_sum("context_switches"),
        "cpu_migrations": sw_sum("cpu_migrations"),
        "huge_quantum_end": huge("anon_huge_quantum_end"),
        "huge_running": huge("anon_huge_running"),
        "thp_fallback": fallback,
        "frozen_io": sum(a.get("io_wait_while_frozen_s", 0) for a in accs),
        "frozen_cpu": sum(a.get("cpu_while_frozen_s", 0) for a in accs),
        "io_dropped": (sum(a["io_wait_dropped_s"] for a in accs)
                       if all("io_wait_dropped_s" in a for a in accs) else None),
        "cycles": sum(h["cycles"] for h in hw) if all(hw) else None,
        "instructions": sum(h["instructions"] for h in hw) if all(hw) else None,
        "llc": sum(h["llc_misses"] for h in hw) if all(hw) else None,
        "dtlb": sum(h["dtlb_misses"] for h in hw) if all(hw) else None,
        "no_pmu": missing is not None and "PMU" in missing,
        "hw_missing": missing,
    }


def counter_cells(c):
    if c is None:
        return ["-"] * 11

    def n(x, scale=1, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x / scale)

    if c["cycles"] is not None:
        hw = (f"IPC {c['instructions'] / c['cycles']:.2f}, LLC {c['llc'] / 1e6:.1f}M, "
              f"dTLB {c['dtlb'] / 1e6:.1f}M") if c["cycles"] else "0 cycles"
    elif c["no_pmu"]:
        hw = "not available on this machine (no PMU)"
    else:
        hw = "not available" + (f": {c['hw_missing'][:60]}" if c["hw_missing"] else "")
    return [n(c["task_clock"], fmt="{:.1f}"), n(c["page_faults"], 1e3, "{:.1f}"), n(c["major_faults"]),
            n(c["context_switches"], 1e3, "{:.1f}"), n(c["cpu_migrations"]),
            n(c["huge_quantum_end"]), n(c["huge_running"]), n(c["thp_fallback"]),
            f"{c['frozen_io']:.2f} / {c['frozen_cpu']:.2f}", n(c["io_dropped"], fmt="{:.2f}"), hw]


def median_counters(cs):
    """The median of each number over rounds; None if no round has them."""
    import statistics
    cs = [c for c in cs if c]
    if not cs:
        return None
    out = dict(cs[0])
    for k, v in cs[0].items():
        if isinstance(v, bool) or isinstance(v, str) or v is None:
            continue
        xs = [c[k] for c in cs if c.get(k) is not None]
        out[k] = statistics.median(xs) if xs else None
    return out
