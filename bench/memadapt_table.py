#!/usr/bin/env python3
"""Tables of bench/memadapt.sh from its logs: seconds per CG iteration
alone, in pairs (Table 1) and against a memory load (Fig. 3), and the
issue's targets judged on them.

    bench/memadapt_table.py OUT_DIR
"""
import os
import sys

MODES = ["incore", "ooc", "mmap", "mema"]
# After the second job's solve starts: time for the pool to settle (the
# second job's first sweep, mema's shortages and probes).
SETTLE = 5.0


def job(out, name, j):
    """(start epoch, [(end epoch, dt)], last line) of job j of a run."""
    path = os.path.join(out, "logs", name, j, "stdout")
    start, iters, last = None, [], ""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if line.startswith("cg: solve starts at"):
            start = float(f[4])
        elif f and f[0] == "iter" and start is not None:
            iters.append((start + float(f[3]), float(f[5])))
        if line.strip():
            last = line
    if start is None:
        return None
    return start, iters, last


def mean_dt(iters, lo, hi):
    dts = [dt for end, dt in iters if lo <= end <= hi and end - dt >= lo - 1e-9]
    return sum(dts) / len(dts) if dts else None


def fmt(v, window=None):
    if v is None:
        return f">{window:.0f}" if window else "-"
    return f"{v:.3f}"


def solo(out, name, skip=3.0):
    """s/it of the run's solver: job b after a memory load a, else a."""
    r = job(out, name, "b") or job(out, name, "a")
    if r is None:
        return None
    start, iters, _ = r
    return mean_dt(iters, start + skip, float("inf"))


def pair(out, first, second):
    """(s/it of first, s/it of second, window seconds) once both run."""
    a, b = job(out, f"pair-{first}-{second}", "a"), job(out, f"pair-{first}-{second}", "b")
    if a is None or b is None:
        return None, None, 0.0
    lo = b[0] + SETTLE
    hi = min(a[1][-1][0] if a[1] else a[0], b[1][-1][0] if b[1] else b[0])
    # A job without a finished iteration in the window ran at least the
    # window per iteration; say so instead of a number.
    return mean_dt(a[1], lo, hi), mean_dt(b[1], lo, hi), max(hi - lo, 0.0)


def main(out):
    sizes = open(os.path.join(out, "sizes.txt")).read().strip()
    print(f"# memadapt benchmark ({sizes})")
    print()
    print("Alone in the pool (no pressure), s/iteration after the first 3 s:")
    print()
    alone = {m: solo(out, f"alone-{m}") for m in MODES}
    print("| " + " | ".join(MODES) + " |")
    print("|" + "---|" * len(MODES))
    print("| " + " | ".join(fmt(alone[m]) for m in MODES) + " |")
    print()
    print(f"Table 1: pairs, s/iteration of the row's job (started first) / the")
    print(f"column's (started 9 s later), from {SETTLE:.0f} s after the second")
    print("started until the first ended (>W: no iteration ended in the W s):")
    print()
    print("| first \\ second | " + " | ".join(MODES) + " |")
    print("|---|" + "---|" * len(MODES))
    pairs = {}
    for i, m in enumerate(MODES):
        cells = []
        for k, n in enumerate(MODES):
            if k < i:
                cells.append("")
                continue
            x, y, w = pair(out, m, n)
            pairs[(m, n)] = (x, y, w)
            cells.append(f"{fmt(x, w)} / {fmt(y, w)}")
        print(f"| {m} | " + " | ".join(cells) + " |")
    print()

    loads = sorted({f.split("-")[1] for f in os.listdir(os.path.join(out, "logs"))
                    if f.startswith("fig3-")}, key=float)
    configs = sorted({f.split("-")[2] for f in os.listdir(os.path.join(out, "logs"))
                      if f.startswith("fig3-")}, key=lambda c: (c != "mema", -int(c[5:] or 0)))
    print("Fig. 3: s/iteration of the solver against a memory load (fraction of")
    print("one job's footprint), after its first 5 s; fixedK: always K panels:")
    print()
    print("| load | " + " | ".join(configs) + " |")
    print("|---|" + "---|" * len(configs))
    for load in loads:
        cells = [fmt(solo(out, f"fig3-{load}-{c}", skip=5.0)) for c in configs]
        print(f"| {load} | " + " | ".join(cells) + " |")
    print()

    print("Signal: mema with a competitor locking 0.9 x the footprint from 8 s")
    print("to 20 s; s/iteration before it, in its last 6 s and from 8 s after")
    print("it ended, and the panels in at the end:")
    print()
    print("| signal | before | with it | after | panels in at the end |")
    print("|---|---|---|---|---|")
    for variant, label in [("mema", "RSS + mincore (default)"), ("rss-only", "RSS only (paper)")]:
        r = job(out, f"signal-{variant}", "a")
        if r is None:
            continue
        start, iters, _ = r
        b = job(out, f"signal-{variant}", "b")
        t0 = b[0] if b else start + 8
        panels = "-"
        for line in open(os.path.join(out, "logs", f"signal-{variant}", "a", "stdout")):
            if line.startswith("cg: memadapt"):
                panels = line.split("panels_in=")[1].split()[0]
        cells = [mean_dt(iters, start + 3, t0), mean_dt(iters, t0 + 6, t0 + 12),
                 mean_dt(iters, t0 + 20, float("inf"))]
        print(f"| {label} | " + " | ".join(fmt(c) for c in cells) + f" | {panels} |")
    print()

    print("Targets:")

    def both(p):
        x, y, _ = pairs.get(p, (None, None, 0))
        return None if x is None or y is None else (x + y) / 2

    if alone["incore"] and alone["mema"]:
        d = (alone["mema"] / alone["incore"] - 1) * 100
        print(f"- no pressure: mema {alone['mema']:.3f} vs incore {alone['incore']:.3f} "
              f"s/it: {d:+.1f}% (target: at most 3% slower): {'met' if d <= 3 else 'MISSED'}")
    mm, ii, oo = both(("mema", "mema")), both(("incore", "incore")), both(("ooc", "ooc"))
    w = pairs.get(("incore", "incore"), (0, 0, 0))[2]
    if mm is not None:
        if ii is None:
            print(f"- under pressure: mema/mema {mm:.3f} s/it; incore/incore finished no "
                  f"iteration in {w:.0f} s, so >= {w / mm:.0f}x slower (target 10x): "
                  f"{'met' if w / mm >= 10 else 'not shown'}")
        else:
            print(f"- under pressure: incore/incore {ii:.3f} vs mema/mema {mm:.3f} s/it: "
                  f"{ii / mm:.1f}x (target >= 10x): {'met' if ii / mm >= 10 else 'MISSED'}")
        if oo is not None:
            print(f"- under pressure: ooc/ooc {oo:.3f} vs mema/mema {mm:.3f} s/it: "
                  f"{oo / mm:.2f}x (target > 1): {'met' if oo > mm else 'MISSED'}")
    x, y, w = pairs.get(("mema", "mema"), (None, None, 0))
    if w == 0:  # not run (PARTS), or the second never started solving
        return
    print(f"- mema against mema: first {fmt(x, w)}, second {fmt(y, w)} s/it "
          f"(target: both progress): {'met' if x and y else 'MISSED'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/memadapt_table.py OUT_DIR (a bench/memadapt.sh output)")
    main(sys.argv[1])
