"""memgangd's metrics text against Prometheus's exposition format and naming
conventions, read by the Prometheus Python client's own parser.

    python prometheus_conventions.py FIRST.prom [LATER.prom]

Each file must parse, and each family must have HELP and TYPE; counters end
in _total; gauges do not; a unit (seconds, bytes) is the name's suffix and
base units only (no percent, milliseconds, MiB...); histograms have their
+Inf bucket, sum and count, buckets that never fall; info gauges are 1.
With a LATER file (the same daemon, later), no counter, histogram count,
sum or bucket is lower in it than in FIRST. Exit 1 with each problem on
stderr. Used by memgangd's tests (crates/daemon/src/service/exposition.rs,
crates/cli/tests/top.rs).
"""

import sys

from prometheus_client.parser import text_string_to_metric_families

# Base units, as suffixes (https://prometheus.io/docs/practices/naming/).
UNITS = {"seconds", "bytes"}
# Not base units, or not units at all (PSI's avg10 is a percent).
FORBIDDEN = {
    "percent", "percentage", "avg10", "avg60", "avg300", "ms", "us", "ns",
    "milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days",
    "kb", "mb", "gb", "kib", "mib", "gib", "pages",
}
# Names without a unit: counts of things, and the build's info.
UNITLESS = {
    "memgang_build_info", "memgang_jobs", "memgang_jobs_submitted",
    "memgang_jobs_completed", "memgang_jobs_accounted", "memgang_switches",
    "memgang_job_perf_events",
}


def families(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return list(text_string_to_metric_families(text))


def raw_counters(path, problems):
    """The parser names a counter's samples _total whatever the text says:
    the names as written are checked here."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    counters = set()
    for line in lines:
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"] and parts[3] == "counter":
            counters.add(parts[2])
            if not parts[2].endswith("_total"):
                problems.append(f"{path}: counter {parts[2]} does not end in _total")
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{")[0].split()[0]
        base = name[: -len("_total")] if name.endswith("_total") else name
        if base + "_total" in counters and name not in counters:
            problems.append(f"{path}: counter sample {name} does not end in _total")


def check(path, problems):
    """Problems of one file; the samples of its monotonic series."""
    rising = {}
    raw_counters(path, problems)
    try:
        fams = families(path)
    except Exception as e:  # the parser's own error: the line at fault
        problems.append(f"{path}: does not parse: {e}")
        return rising
    if not fams:
        problems.append(f"{path}: no metrics")
    for fam in fams:
        name, kind = fam.name, fam.type
        where = f"{path}: {name}"
        if not fam.documentation.strip():
            problems.append(f"{where}: no HELP")
        if kind not in ("counter", "gauge", "histogram"):
            problems.append(f"{where}: no TYPE (parsed as {kind})")
        if not name.startswith("memgang_"):
            problems.append(f"{where}: not in the memgang_ namespace")
        words = name.split("_")
        for w in words:
            if w in FORBIDDEN:
                problems.append(f"{where}: {w!r} is not a base unit (seconds, bytes)")
        for w in words[:-1]:
            if w in UNITS:
                problems.append(f"{where}: the unit {w!r} is not the name's suffix")
        if words[-1] not in UNITS and name not in UNITLESS:
            problems.append(
                f"{where}: no unit suffix (_seconds, _bytes) and not a count "
                "(add it to UNITLESS if it is one)"
            )
        for s in fam.samples:
            if kind == "counter":
                rising[(s.name, tuple(sorted(s.labels.items())))] = s.value
            if kind == "gauge" and s.name.endswith(("_total", "_count", "_sum", "_bucket")):
                problems.append(f"{where}: gauge sample {s.name} reads as a counter or histogram")
        if kind == "gauge" and name.endswith("_info"):
            for s in fam.samples:
                if s.value != 1:
                    problems.append(f"{where}: info gauge is {s.value}, not 1")
        if kind == "histogram":
            histogram(fam, where, problems, rising)
    return rising


def histogram(fam, where, problems, rising):
    buckets = [s for s in fam.samples if s.name == fam.name + "_bucket"]
    count = [s.value for s in fam.samples if s.name == fam.name + "_count"]
    total = [s.value for s in fam.samples if s.name == fam.name + "_sum"]
    if not count or not total:
        problems.append(f"{where}: histogram without _count or _sum")
    les = [float(s.labels["le"]) for s in buckets]
    if not les or les[-1] != float("inf"):
        problems.append(f"{where}: histogram without a +Inf bucket")
    if les != sorted(les):
        problems.append(f"{where}: buckets out of order")
    values = [s.value for s in buckets]
    if values != sorted(values):
        problems.append(f"{where}: cumulative buckets fall: {values}")
    if buckets and count and buckets[-1].value != count[0]:
        problems.append(f"{where}: +Inf bucket {buckets[-1].value} != count {count[0]}")
    for s in fam.samples:
        rising[(s.name, tuple(sorted(s.labels.items())))] = s.value


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    first = check(argv[1], problems)
    if len(argv) == 3:
        later = check(argv[2], problems)
        for key, v in first.items():
            if key in later and later[key] < v:
                problems.append(f"{key[0]}{dict(key[1])} fell from {v} to {later[key]}")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    fams = families(argv[-1])
    print(f"{len(fams)} families, {sum(len(f.samples) for f in fams)} samples: conventions hold")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
