"""bench/slurm_poll.sh's measurements and table: the CPU that polling Slurm
costs, per process, over a fixed window.

  python3 bench/slurm_poll.py measure OUT.json WINDOW NAME=PID... [--every S -- CMD...]
  python3 bench/slurm_poll.py table OUT_DIR
  python3 bench/slurm_poll.py --self-test

`measure` reads each process's CPU time from /proc/PID/stat (utime +
stime, and cutime + cstime: the children it has waited for, here the
controller's squeue and scontrol) at the window's start and end, and
writes the difference in seconds. With `--every S -- CMD...` it also runs
CMD every S seconds itself during the window (a poll loop without the
controller: `squeue --json` against `squeue`'s text) and counts its
children's CPU (getrusage) as the row's "poller".

`table` reads OUT_DIR/rows.txt (one row a line: name, then what it
measured, tab-separated) and the rows' JSON, and prints one table. Columns:
  slurmctld      CPU seconds per minute of Slurm's controller daemon
                 (answers every squeue; its own threads, all of them)
  munged         the same for munged: every squeue RPC is a credential
                 encoded (by squeue) and decoded (by slurmctld)
  poller         the controller process with its waited-for children
                 (squeue, scontrol), or the shell-less loop's children
  total          the three added up
  % of one CPU   total / 60 s
  extra vs (a)   total minus row (a)'s (nothing polling), as % of one CPU
"""

import json
import os
import resource
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def parse_stat(text):
    """CPU seconds in one /proc/PID/stat line: (own, waited-for children).
    The command name (field 2) may hold spaces and parentheses: fields are
    counted after its last ')'."""
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); utime, stime, cutime, cstime are fields 14-17.
    utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        own, children = parse_stat(f.read())
    return own + children


def measure(args):
    out, window = args[0], float(args[1])
    procs, cmd, every = {}, None, None
    rest = args[2:]
    if "--every" in rest:
        i = rest.index("--every")
        every = float(rest[i + 1])
        cmd = rest[rest.index("--") + 1:]
        rest = rest[:i]
    for a in rest:
        name, pid = a.split("=")
        procs[name] = int(pid)
    start = {n: cpu(p) for n, p in procs.items()}
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    runs = 0
    if cmd:
        nxt = t0
        while time.monotonic() - t0 < window:
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            runs += 1
            nxt += every
            time.sleep(max(0.0, nxt - time.monotonic()))
    else:
        time.sleep(window)
    took = time.monotonic() - t0
    result = {n: cpu(p) - start[n] for n, p in procs.items()}
    if cmd:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["poller"] = (kids.ru_utime - kids0.ru_utime) + (kids.ru_stime - kids0.ru_stime)
    json.dump({"window_s": took, "cpu_s": result, "runs": runs}, open(out, "w"))


def rows_of(lines, load):
    """(name, label, per-minute CPU dict) for each line of rows.txt."""
    rows = []
    for line in lines:
        if not line.strip():
            continue
        name, label = line.rstrip("\n").split("\t", 1)
        m = load(name)
        per_min = {k: v * 60 / m["window_s"] for k, v in m["cpu_s"].items()}
        rows.append((name, label, per_min))
    return rows


def render(rows):
    lines = [
        "| row | what polls | slurmctld (CPU s/min) | munged | poller (+ children) | total | % of one CPU | extra vs (a) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = None
    for name, label, c in rows:
        total = sum(c.values())
        if base is None:
            base = total
        poller = f"{c['poller']:.2f}" if "poller" in c else "-"
        lines.append(
            f"| {name} | {label} | {c.get('slurmctld', 0):.2f} | {c.get('munged', 0):.2f} | {poller} "
            f"| {total:.2f} | {total / 60 * 100:.1f}% | {(total - base) / 60 * 100:+.1f}% |"
        )
    return "\n".join(lines)


def table(out):
    with open(f"{out}/rows.txt") as f:
        rows = rows_of(f, lambda n: json.load(open(f"{out}/{n}.json")))
    print(render(rows))


def self_test():
    own, kids = parse_stat(
        f"42 (squeue (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 {2 * TICK} {TICK} {3 * TICK} 0 20 0 1 0"
    )
    assert (own, kids) == (3.0, 3.0), (own, kids)
    data = {
        "a": {"window_s": 30.0, "cpu_s": {"slurmctld": 0.3, "munged": 0.1}},
        "b": {"window_s": 60.0, "cpu_s": {"slurmctld": 1.0, "munged": 0.4, "poller": 2.2}},
    }
    rows = rows_of(["a\tnothing\n", "b\tcontroller, poll 500ms\n", "\n"], data.__getitem__)
    assert [r[0] for r in rows] == ["a", "b"]
    assert abs(rows[0][2]["slurmctld"] - 0.6) < 1e-9  # per minute: 30 s window doubled
    text = render(rows)
    assert "| a | nothing | 0.60 | 0.20 | - | 0.80 | 1.3% | +0.0% |" in text, text
    assert "| b | controller, poll 500ms | 1.00 | 0.40 | 2.20 | 3.60 | 6.0% | +4.7% |" in text, text
    print("slurm_poll.py: self-test passed")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    elif sys.argv[1] == "measure":
        measure(sys.argv[2:])
    elif sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
