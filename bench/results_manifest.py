"""Writes bench/results/MANIFEST.md: per directory the date and the machine
of its runs, the bench script that wrote it and the docs that cite it; per
file what it is, its size and its sha256. `--check` compares instead and
fails on any difference (a file changed, added or removed without a new
manifest).

usage: python3 bench/results_manifest.py [--check]
       python3 bench/results_manifest.py --record-removed [BASE [NEW]]

--record-removed appends to bench/results/REMOVED.md every file under
bench/results that commit BASE (default HEAD) has and NEW (a commit;
default the work tree) lacks or holds changed (e.g. compacted): its size
and sha256 as BASE had it, and per directory the date, machine and script
of its runs, so that a reader can get it back (`git show BASE:PATH`) or
make it again (the script). Run it after `git rm` or compacting, before the
commit; then run the script without arguments for MANIFEST.md.

Date: the one in the directory's name, else the earliest `started_unix_s`
of its results JSON, else the day git first saw the directory. Machine: a
results JSON's `machine` (host, kernel, CPUs, memory, swap), else the
directory's machine.txt or testbed.txt, else "-".
"""
import datetime
import glob
import hashlib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RESULTS = "bench/results"
OUT = os.path.join(RESULTS, "MANIFEST.md")
REMOVED = os.path.join(RESULTS, "REMOVED.md")
NOT_LISTED = ("MANIFEST.md", "README.md", "REMOVED.md")

# Which script writes a directory, by its name's prefix (longest first).
MADE_BY = [
    ("adaptive-trace", "bench/adaptive.sh"), ("adaptive", "bench/adaptive.sh"),
    ("baseline", "bench/baseline.sh"), ("calibrate", "memgang calibrate"),
    ("daemon-defaults", "bench/daemon_defaults.sh"), ("daemon-hostile", "bench/daemon_hostile.sh"),
    ("daemon", "bench/daemon.sh"), ("dyncosched", "bench/dyncosched.sh"),
    ("fault-rate", "bench/fault_rate.sh"), ("frozen-threads", "bench/frozen_threads.sh"),
    ("hybrid", "bench/hybrid.sh"), ("many", "bench/many.sh"),
    ("memadapt_memgang", "bench/memadapt_memgang.sh"), ("memadapt", "bench/memadapt.sh"),
    ("own-share", "bench/own_share.sh"), ("paging-rate", "bench/paging_rate.sh"),
    ("paging-threads", "bench/switch_ab.sh"), ("paper004", "memgang figures"),
    ("realapps-fit-rounds", "bench/realapps_fit.sh"), ("realapps-fit", "bench/realapps_fit.sh"),
    ("realapps", "bench/realapps.sh"), ("refill", "bench/refill.sh"), ("scale", "bench/scale.sh"),
    ("sim-validate", "bench/sim_validate.sh"), ("sim_archive", "bench/sim_archive.sh"),
    ("sim_profile", "bench/sim_profile.sh"), ("sim_speed_ab", "bench/sim_speed_ab.sh"),
    ("sim_speed", "bench/sim_speed.sh"), ("slurm_poll", "bench/slurm_poll.sh"),
    ("slurm", "bench/slurm.sh"), ("switch-ab", "bench/switch_ab.sh"),
    ("switch-sampling", "bench/switch_sampling.sh"), ("thrash", "bench/thrash.sh"),
    ("workload", "bench/switch_ab.sh"), ("wss", "bench/wss.sh"),
]

# What a file is, by its name (first match).
KINDS = [
    (r"(^|/)(table[^/]*\.(txt|md)|tables\.txt|rounds\.txt)$", "table the script printed"),
    (r"(^|/)paging-params\.txt$", "bench/sim_paging_params.py's tables"),
    (r"(^|/)device\.json$", "memgang calibrate's device file (memgang sim --device)"),
    (r"(^|/)calibrate\.txt$", "memgang calibrate's summary"),
    (r"(^|/)bandwidth-[a-z]+\.json$", "swap device bandwidth at the start or end of the runs"),
    (r"(^|/)random-reads\.json$", "the swap device's random read rates, the day of the runs"),
    (r"(^|/)testbed[^/]*\.txt$", "the swap testbed: device, size, bandwidth"),
    (r"(^|/)machine\.txt$", "the machine the simulations ran on"),
    (r"(^|/)traces\.sha256$", "sha256 of the archive traces simulated"),
    (r"\.toml$", "experiment file the script wrote and ran"),
    (r"\.csv$", "timeline (CSV)"),
    (r"\.txt$", "text output of one run or step"),
]


def made_by(d):
    return next((s for p, s in MADE_BY if d.startswith(p)), "-")


def kind(path, doc):
    if isinstance(doc, dict) and "samples" in doc and "schema" in doc:
        return ("results JSON (docs/results.md), whole" if doc["samples"]
                else "results JSON, samples emptied (bench/compact_results.py)")
    if doc is not None:
        return "JSON output"
    return next((k for pat, k in KINDS if re.search(pat, path)), "-")


def git_first_day(d):
    out = subprocess.run(["git", "log", "--format=%cs", "--", d], capture_output=True, text=True,
                         cwd=ROOT).stdout.split()
    return out[-1] if out else "-"


def read_tree(f):
    """The bytes of bench/results/`f` in the work tree, or None."""
    try:
        return open(os.path.join(ROOT, RESULTS, f), "rb").read()
    except OSError:
        return None


def read_git(rev):
    """A reader of bench/results/`f` as commit `rev` holds it, or None."""
    def read(f):
        r = subprocess.run(["git", "show", f"{rev}:{RESULTS}/{f}"], capture_output=True, cwd=ROOT)
        return r.stdout if r.returncode == 0 else None
    return read


def removed_runs():
    """Per directory, the (date, machine) REMOVED.md recorded with its removed runs."""
    out, d = {}, None
    path = os.path.join(ROOT, REMOVED)
    for line in (open(path).read().splitlines() if os.path.exists(path) else []):
        if line.startswith("### "):
            d = line[4:].strip()
        elif d and line and not line.startswith("- "):
            date, machine = line.split("; ")[:2]
            old = out.get(d, ("-", "-"))
            out[d] = (old[0] if old[0] != "-" else date, old[1] if old[1] != "-" else machine)
            d = None
    return out


def describe(d, files, docs, read=read_tree):
    m = re.search(r"(20\d\d)(\d\d)(\d\d)", d)
    date, machine = (f"{m[1]}-{m[2]}-{m[3]}" if m else None), None
    for f in files:
        if not f.endswith(".json"):
            continue
        try:
            doc = json.loads(read(f) or b"")
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("machine"), dict):
            mc = doc["machine"]
            machine = machine or (f"{mc.get('hostname')}, Linux {mc.get('kernel')}, {mc.get('cpus')} CPUs, "
                                  f"{(mc.get('memory_bytes') or 0) / 2**30:.1f} GiB, "
                                  f"swap {(mc.get('swap_bytes') or 0) / 2**30:.1f} GiB")
            if not date and doc.get("started_unix_s"):
                date = datetime.datetime.fromtimestamp(doc["started_unix_s"], datetime.timezone.utc) \
                    .strftime("%Y-%m-%d")
    for name in ("machine.txt", "testbed.txt"):
        data = None if machine else read(f"{d}/{name}")
        if data:
            machine = data.decode(errors="replace").splitlines()[0]
    cited = sorted(k for k, text in docs.items()
                   if re.search(f"bench/results/{re.escape(d)}(?![A-Za-z0-9_-])", text))
    return date or git_first_day(os.path.join(RESULTS, d)), machine or "-", cited


def manifest():
    files = sorted(subprocess.run(["git", "ls-files", "--others", "--cached", "--exclude-standard", RESULTS],
                                  capture_output=True, text=True, cwd=ROOT).stdout.split())
    files = [os.path.relpath(f, RESULTS) for f in files
             if os.path.exists(os.path.join(ROOT, f)) and os.path.relpath(f, RESULTS) not in NOT_LISTED]
    docs = {p: open(os.path.join(ROOT, p)).read() for p in sorted(glob.glob("docs/*.md", root_dir=ROOT))}
    dirs = by_dir(files)
    gone = removed_runs()
    out = ["# bench/results manifest", "",
           "Written by `python3 bench/results_manifest.py` (`--check` verifies it); what is kept and",
           "why: README.md here. Per directory: date, machine, the script that wrote it, the docs",
           "that cite it; per file: what it is, bytes, sha256. Removed raw runs: REMOVED.md.", ""]
    for d in sorted(dirs):
        date, machine, cited = describe(d, dirs[d], docs)
        if d in gone:
            date = gone[d][0] if date == "-" else date
            machine = gone[d][1] if machine == "-" else machine
        out.append(f"## {d}")
        out.append("")
        raw = "; raw runs in REMOVED.md" if d in gone else ""
        out.append(f"{date}; {machine}; by {made_by(d)}; cited in {', '.join(cited) or '-'}{raw}")
        out.append("")
        out += [file_line(d, f, read_tree(f)) for f in dirs[d]]
        out.append("")
    return "\n".join(out)


def file_line(d, f, data):
    """A manifest's line for file `f` of directory `d`: name, bytes, sha256, what it is."""
    try:
        doc = json.loads(data) if f.endswith(".json") else None
    except ValueError:
        doc = None
    rel = f[len(d) + 1:] if d != "." else f
    return f"- `{rel}` {len(data)} {hashlib.sha256(data).hexdigest()}: {kind(f, doc)}"


def by_dir(files):
    dirs = {}
    for f in files:
        dirs.setdefault(f.split("/")[0] if "/" in f else ".", []).append(f)
    return dirs


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout


def record_removed(base="HEAD", new=None):
    """Appends to REMOVED.md what `base` has under bench/results that `new` lacks or changed."""
    base = git("rev-parse", "--verify", f"{base}^{{commit}}").strip()
    old = [os.path.relpath(f, RESULTS) for f in git("ls-tree", "-r", "--name-only", base, RESULTS).split()]
    old = [f for f in old if f not in NOT_LISTED]
    read_old, read_new = read_git(base), (read_git(new) if new else read_tree)
    gone = []
    for f in old:
        was, now = read_old(f), read_new(f)
        if was and now != was:  # empty files were removed as such; nothing to get back
            gone.append((f, was, "removed" if now is None else "changed (e.g. samples emptied)"))
    if not gone:
        sys.exit(f"nothing under {RESULTS} removed or changed since {base[:12]}")
    day = git("show", "-s", "--format=%cs", new or base).strip() if new else \
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    path = os.path.join(ROOT, REMOVED)
    text = open(path).read() if os.path.exists(path) else "\n".join([
        "# bench/results: removed files", "",
        "Raw runs no longer in the tree, recorded by `python3 bench/results_manifest.py",
        "--record-removed` when they went (README.md here says why). Per removal: the commit",
        "that last held them whole; per directory: date and machine of its runs and the bench",
        "script that makes them again; per file: bytes and sha256 as they were, so that a run",
        "made again, or one got back with `git show COMMIT:bench/results/DIR/FILE`, can be",
        "checked against them.", ""])
    out = [f"## {len(gone)} files, {sum(len(w) for _, w, _ in gone) / 2**20:.1f} MiB, on {day}: "
           f"last whole in commit {base}", ""]
    files = [f for f, _, _ in gone]
    for d, fs in sorted(by_dir(files).items()):
        date, machine, _ = describe(d, fs, {}, read_old)
        out += [f"### {d}", "", f"{date}; {machine}; by {made_by(d)}", ""]
        out += [f"{file_line(d, f, was)}; {what}" for f, was, what in gone if f in fs]
        out.append("")
    open(path, "w").write(text.rstrip("\n") + "\n\n" + "\n".join(out))
    print(f"{REMOVED}: recorded {len(gone)} files of {len(by_dir(files))} directories")


def main(argv):
    if argv[:1] == ["--record-removed"]:
        record_removed(*argv[1:3])
        return
    text = manifest()
    path = os.path.join(ROOT, OUT)
    if argv[:1] == ["--check"]:
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            sys.exit(f"{OUT} is not current: run python3 bench/results_manifest.py")
        print(f"{OUT}: current")
        return
    open(path, "w").write(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
