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
