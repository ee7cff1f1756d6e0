"""Empties the per-sample timeline (`samples`, docs/results.md) of the
results JSON of `memgang run --json` in each DIR, in place: what the
stored runs are kept for (bench/sim_validate.sh and
bench/sim_paging_params.py read the top-level fields, `jobs`, `timeline`
and `switches`) is a few KiB per run, the samples are 95% of it. The key
stays, as `"samples": []`, so that the file is still a results file
(`memgang report` reads it; `memgang plot trace` has nothing to draw).
The text of every other field is left as it was, byte for byte; the
script checks that the file parses to the same document but the samples.

usage: python3 bench/compact_results.py [--keep FILE ...] DIR [DIR ...]
       (--keep: a results file left whole, e.g. the tests' fixture
       bench/results/adaptive-fix/2rank-x1-q10s-so-ao-ai.json)
"""
import glob
import json
import os
import sys


def compact(path):
    """True if `path` had samples and was rewritten with none."""
    text = open(path).read()
    doc = json.loads(text)
    if not isinstance(doc, dict) or not doc.get("samples"):
        return False
    lines = text.split("\n")
    # serde_json's pretty form: one top-level key per line, two spaces in.
    start = [i for i, l in enumerate(lines) if l.startswith('  "samples": ')]
    if len(start) != 1:
        sys.exit(f"{path}: no top-level \"samples\" line in pretty-printed JSON; "
                 "compact only files `memgang run --json` wrote")
    i = start[0]
    end = next(k for k in range(i + 1, len(lines)) if lines[k] in ("  ]", "  ],"))
    comma = "," if lines[end].endswith(",") else ""
    new = "\n".join(lines[:i] + ['  "samples": []' + comma] + lines[end + 1:])
    want = dict(doc, samples=[])
    if json.loads(new) != want:
        sys.exit(f"{path}: compacting changed more than the samples; left as it was")
    with open(path, "w") as f:
        f.write(new)
    return True


def main(argv):
    keep = set()
    while argv[:1] == ["--keep"]:
        keep.add(os.path.normpath(argv[1]))
        argv = argv[2:]
    if not argv:
        sys.exit(__doc__)
    for d in argv:
        if not os.path.isdir(d):
            sys.exit(f"{d}: not a directory")
        n = 0
        for f in sorted(glob.glob(os.path.join(d, "**", "*.json"), recursive=True)):
            if os.path.normpath(f) not in keep and os.path.getsize(f) > 0:
                n += compact(f)
        print(f"{d}: {n} results files compacted")


if __name__ == "__main__":
    main(sys.argv[1:])
