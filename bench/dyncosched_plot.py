#!/usr/bin/env python3
"""bench/dyncosched.sh's results as an SVG (paper 003 Fig. 1's shape): the
parallel job's slowdown per configuration, one group of bars per run and
mean sequential footprint. Plain SVG, no dependencies.

    bench/dyncosched_plot.py OUT.svg LABEL=DIR/dyncosched.json [LABEL=...]
"""
import json
import sys

CONFIGS = ["neither", "prevention only", "coscheduling only", "both"]
COLORS = ["#999999", "#4477aa", "#ee6677", "#228833"]
BAR, GAP, L, T, H, B = 18, 28, 50, 40, 260, 70


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    out, runs = argv[1], []
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        try:
            runs.append((label, json.load(open(path))))
        except (OSError, ValueError) as e:
            sys.exit(f"{path}: cannot read dyncosched results ({e}); give LABEL=DIR/dyncosched.json")
    groups = [(label, m, {x["config"]: x["slowdown"] for x in res["rows"] if x["mean_seq_mib"] == m})
              for label, res in runs
              for m in sorted({x["mean_seq_mib"] for x in res["rows"]})]
    top = max(max(g[2].values()) for g in groups)
    top = int(top + 1)
    width = L + len(groups) * (len(CONFIGS) * BAR + GAP) + 20
    y = lambda v: T + H - v / top * H
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{T + H + B}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{L}" y="16" font-size="13">parallel job slowdown (run under load / alone)</text>']
    for v in range(top + 1):
        svg.append(f'<line x1="{L}" x2="{width - 10}" y1="{y(v)}" y2="{y(v)}" stroke="#ddd"/>'
                   f'<text x="{L - 6}" y="{y(v) + 4}" text-anchor="end">{v}</text>')
    for i, (label, mean, rows) in enumerate(groups):
        x0 = L + 10 + i * (len(CONFIGS) * BAR + GAP)
        for k, c in enumerate(CONFIGS):
            if c in rows:
                x = x0 + k * BAR
                svg.append(f'<rect x="{x}" y="{y(rows[c]):.1f}" width="{BAR - 2}" '
                           f'height="{T + H - y(rows[c]):.1f}" fill="{COLORS[k]}">'
                           f'<title>{label}, {mean} MiB, {c}: {rows[c]:.2f}</title></rect>')
        cx = x0 + len(CONFIGS) * BAR / 2
        svg.append(f'<text x="{cx}" y="{T + H + 16}" text-anchor="middle">{label}</text>'
                   f'<text x="{cx}" y="{T + H + 30}" text-anchor="middle">{mean} MiB</text>')
    for k, c in enumerate(CONFIGS):
        x = L + k * 130
        svg.append(f'<rect x="{x}" y="{T + H + 44}" width="10" height="10" fill="{COLORS[k]}"/>'
                   f'<text x="{x + 14}" y="{T + H + 53}">{c}</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


main(sys.argv)
