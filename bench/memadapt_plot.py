#!/usr/bin/env python3
"""A memadapt timeline (cg --timeline, memadapt_write_timeline_csv) as an
SVG: RSS and dRSS (MiB) above, panels in memory below, shortages (red),
probes (green) and rebases (blue) marked. Plain SVG, no dependencies.

    bench/memadapt_plot.py TIMELINE.csv OUT.svg [TITLE] [--shade FROM TO]
--shade greys the seconds FROM..TO (say, while a competitor ran).
"""
import csv
import sys

W, H, L, R, T, GAP, PH = 760, 420, 60, 20, 30, 40, 160


def main(argv):
    shade = None
    if "--shade" in argv:
        i = argv.index("--shade")
        shade = (float(argv[i + 1]), float(argv[i + 2]))
        argv = argv[:i] + argv[i + 3:]
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    src, dst = argv[0], argv[1]
    title = argv[2] if len(argv) == 3 else src
    rows = list(csv.DictReader(open(src)))
    if not rows:
        sys.exit(f"{src}: no samples")
    t = [float(r["t_s"]) for r in rows]
    rss = [int(r["rss_bytes"]) / 2**20 for r in rows]
    drss = [int(r["drss_bytes"]) / 2**20 for r in rows]
    pin = [int(r["panels_in"]) for r in rows]
    tmax = max(t) or 1.0
    mmax = max(rss + drss) * 1.1 or 1.0
    pmax = max(pin) + 1

    def x(v):
        return L + (W - L - R) * v / tmax

    def y(v, top, vmax):
        return top + PH - PH * v / vmax

    def line(vs, top, vmax, color, width=1.2):
        pts = " ".join(f"{x(a):.1f},{y(b, top, vmax):.1f}" for a, b in zip(t, vs))
        return f'<polyline fill="none" stroke="{color}" stroke-width="{width}" points="{pts}"/>'

    top2 = T + PH + GAP
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="18" font-size="13">{title}</text>']
    if shade:
        out.append(f'<rect x="{x(shade[0]):.1f}" y="{T}" width="{x(shade[1]) - x(shade[0]):.1f}" '
                   f'height="{top2 + PH - T}" fill="#eee"/>')
    for top, vmax, label in [(T, mmax, "MiB"), (top2, pmax, "panels")]:
        out.append(f'<rect x="{L}" y="{top}" width="{W - L - R}" height="{PH}" '
                   'fill="none" stroke="#888"/>')
        out.append(f'<text x="6" y="{top + PH / 2}">{label}</text>')
        for frac in (0, 0.5, 1):
            out.append(f'<text x="{L - 4}" y="{y(vmax * frac, top, vmax) + 4:.1f}" '
                       f'text-anchor="end">{vmax * frac:.0f}</text>')
    for k in range(0, int(tmax) + 1, max(1, int(tmax) // 10)):
        out.append(f'<text x="{x(k):.1f}" y="{top2 + PH + 14}" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{W / 2}" y="{H - 4}" text-anchor="middle">seconds</text>')
    out.append(line(drss, T, mmax, "#d62728"))
    out.append(line(rss, T, mmax, "#1f77b4"))
    out.append(f'<text x="{W - R - 110}" y="{T + 14}" fill="#1f77b4">RSS</text>'
               f'<text x="{W - R - 70}" y="{T + 14}" fill="#d62728">dRSS</text>')
    out.append(line(pin, top2, pmax, "black"))
    colors = {"shortage": "#d62728", "probe": "#2ca02c", "rebase": "#1f77b4"}
    for r, a, p in zip(rows, t, pin):
        c = colors.get(r["event"])
        if c:
            out.append(f'<circle cx="{x(a):.1f}" cy="{y(p, top2, pmax):.1f}" r="2.5" fill="{c}"/>')
    out.append(f'<text x="{L + 6}" y="{top2 + 14}"><tspan fill="#d62728">shortage</tspan> '
               '<tspan fill="#2ca02c">probe</tspan> <tspan fill="#1f77b4">rebase</tspan></text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
