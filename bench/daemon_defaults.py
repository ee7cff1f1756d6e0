"""bench/daemon_defaults.sh's runs and table: every real application pair
of docs/realapps.md submitted to a memgangd running the shipped
dist/memgang.toml, as two users would (each job by its own user, through
`memgang submit`), against the same two jobs one after the other through
the same daemon; per configuration (the shipped file, and the shipped file
with the lines of each VARIANT added), ROUNDS rounds taking turns.

Arguments: MEMGANGD MEMGANG OUT_DIR. Environment: APPS (cg stencil gather
lammps hpcc), ROUNDS (1), USERS (two users, "nobody daemon"), POOL (the
pool, default 512M as bench/realapps.sh; "shipped" keeps the file's 3/4 of
RAM), VARIANTS (`name=TOML line` per line; default the shipped file and
max_switch_share = "2.5%"), APP_CMD_<app> and APP_MEM_<app> (from
bench/daemon_defaults.sh, which reads bench/lib.sh's). The daemon is
bench/memgangd.py's.

    python3 bench/daemon_defaults.py --self-test
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from memgangd import Daemon

DIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist", "memgang.toml")


def daemon(memgangd, extra, pool):
    """A memgangd on the shipped file, its paths (state, socket, metrics)
    and the pool moved to a directory of its own."""
    return Daemon(memgangd, lambda d, sock: open(DIST).read() + (
        f'\n# bench/daemon_defaults.py\nstate_dir = "{d}/state"\nsocket = "{sock}"\n'
        f'metrics_file = ""\n' + (f'pool_memory = "{pool}"\n' if pool != "shipped" else "")
        + "".join(l + "\n" for l in extra)), "memgang-bench-defaults.")


def submit(memgang, d, user, cmd, memory, name):
    """`memgang submit` as USER from /tmp: the job's id."""
    out = subprocess.run(["runuser", "-u", user, "--", "env", f"MEMGANG_SOCKET={d.sock}", memgang, "submit",
                          "--memory", memory, "--name", name, "--"] + cmd,
                         cwd="/tmp", check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1])


def wait(d, ids):
    while True:
        jobs = d.jobs()
        if all(jobs[i]["state"] in ("finished", "failed", "cancelled") for i in ids):
            return [jobs[i] for i in ids]
        time.sleep(1)


def check(job):
    """The job's own check: the last line it printed."""
    try:
        lines = open(os.path.join(job["log_dir"], "stdout")).read().split("\n")
        return next((l for l in reversed(lines) if l.strip()), "")
    except OSError:
        return ""


def unaccounted(jobs):
    shares = [abs(j["account"]["unaccounted_s"]) / j["account"]["wall_s"]
              for j in jobs if j.get("account") and j["account"]["wall_s"] > 0]
    return max(shares) if shares else None


def run_app(memgang, d, app, cmd, mem, users):
    """The pair one after the other, then at once: their records."""
    one = []
    for j, user in zip("ab", users):
        one += wait(d, [submit(memgang, d, user, cmd, mem, f"{app}-{j}-alone")])
    both = wait(d, [submit(memgang, d, user, cmd, mem, f"{app}-{j}") for j, user in zip("ab", users)])
    return {"app": app, "one_after_the_other": one, "pair": both}


def span(jobs):
    return max(j["finished_unix_s"] for j in jobs) - min(j["submitted_unix_s"] for j in jobs)


def summary(rec):
    one, both = rec["one_after_the_other"], rec["pair"]
    ok = all(j["state"] == "finished" and j.get("exit_code") == 0 for j in one + both)
    seq = sum(j["finished_unix_s"] - j["started_unix_s"] for j in one)
    same = sum(check(a) == check(b) and check(a) != "" for a, b in zip(one, both))
    return {"seq_s": seq, "pair_s": span(both) if ok else None, "ok": ok, "same": same,
            "unacc": unaccounted(one + both)}


def table(records):
    """records: [(variant, round, record)] -> the table's lines."""
    head = ["app", "configuration", "one after the other s (per round)", "pair s (per round)",
            "overhead (per round)", "median overhead", "checks as one after the other", "max unaccounted"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = []
    for v, _, r in records:
        if (r["app"], v) not in keys:
            keys.append((r["app"], v))
    for app, v in keys:
        rs = [summary(r) for vv, _, r in records if vv == v and r["app"] == app]
        overs = [s["pair_s"] / s["seq_s"] - 1 for s in rs if s["pair_s"] is not None and s["seq_s"]]
        un = [s["unacc"] for s in rs if s["unacc"] is not None]
        out.append("| " + " | ".join([
            app, v, " ".join(f"{s['seq_s']:.1f}" for s in rs),
            " ".join("failed" if s["pair_s"] is None else f"{s['pair_s']:.1f}" for s in rs),
            " ".join(f"{o * 100:.1f}%" for o in overs) or "-",
            f"{statistics.median(overs) * 100:.1f}%" if overs else "-",
            f"{sum(s['same'] for s in rs)} of {2 * len(rs)}",
            f"{max(un) * 100:.2f}%" if un else "-"]) + " |")
    return out


NOTE = ("Each pair's two jobs submitted at once by two users to memgangd on the shipped dist/memgang.toml "
        "(its paths moved; the pool as said above), against the same two jobs one after the other "
        "through the same daemon: overhead = pair's span (first submission to last end) / the two "
        "jobs' run times one after the other - 1. checks: each job's last line as when it ran alone. "
        "max unaccounted: the largest |unaccounted| of a job over its wall time (the time account).")


def main():
    # A signal ends the runs through `finally`: the daemon is stopped, its
    # jobs cancelled, its directory removed.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    memgangd, memgang, out = sys.argv[1:4]
    apps = os.environ.get("APPS", "cg stencil gather lammps hpcc").split()
    rounds = int(os.environ.get("ROUNDS", "1"))
    users = os.environ.get("USERS", "nobody daemon").split()
    pool = os.environ.get("POOL", "512M")
    variants = [("shipped", [])]
    for line in os.environ.get("VARIANTS", 'max_switch_share 2.5%=max_switch_share = "2.5%"').splitlines():
        if "=" in line:
            name, toml = line.split("=", 1)
            variants.append((name.strip(), [toml.strip()]))
    records = []
    for r in range(1, rounds + 1):
        for name, extra in variants:
            d = daemon(memgangd, extra, pool)
            try:
                for app in apps:
                    cmd = json.loads(os.environ[f"APP_CMD_{app}"])
                    print(f"==> round {r}, {name}: {app}", file=sys.stderr, flush=True)
                    rec = run_app(memgang, d, app, cmd, os.environ[f"APP_MEM_{app}"], users)
                    rec["checks"] = {j["name"]: check(j) for j in rec["one_after_the_other"] + rec["pair"]}
                    records.append((name, r, rec))
                    json.dump([{"configuration": v, "round": k, **x} for v, k, x in records],
                              open(os.path.join(out, "runs.json"), "w"), indent=1)
            finally:
                d.stop()
    print(f"pool: {pool} ({'the shipped 3/4 of RAM' if pool == 'shipped' else 'as bench/realapps.sh'}), "
          f"users {' and '.join(users)}, {rounds} round(s); configurations: "
          + "; ".join(f"{n}: {' '.join(e) or 'dist/memgang.toml'}" for n, e in variants))
    print()
    print("\n".join(table(records)))
    print()
    print(NOTE)


def self_test():
    def job(name, sub, start, end, line, unacc=0.1):
        return {"name": name, "state": "finished", "exit_code": 0, "submitted_unix_s": sub,
                "started_unix_s": start, "finished_unix_s": end, "log_dir": "/nonexistent",
                "account": {"wall_s": end - start, "unaccounted_s": unacc}}
    one = [job("a", 0, 0, 100, "x"), job("b", 100, 100, 200, "x")]
    pair = [job("a", 300, 300, 400, "x"), job("b", 300, 300, 504, "x", -2.04)]
    t = table([("shipped", 1, {"app": "cg", "one_after_the_other": one, "pair": pair})])
    row = t[2].strip("|").split("|")
    cells = [c.strip() for c in row]
    assert cells[2] == "200.0" and cells[3] == "204.0" and cells[4] == "2.0%" and cells[5] == "2.0%", cells
    # No output files: no check matched.
    assert cells[6] == "0 of 2" and cells[7] == "1.00%", cells
    print("self-test ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        main()
