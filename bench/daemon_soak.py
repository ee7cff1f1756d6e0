"""memgangd soaked (bench/daemon_soak.sh runs it, as root): for MINUTES,
two users submit jobs of hostile sizes (names up to 60 KB, environments
up to 250 KiB, NUL bytes, over-budget ones), cancel them, list, start
jobs that cannot start, while the daemon is killed (-9) and restarted
and retention forgets the ended jobs. Then the load stops, every job is
let end (or cancelled), and retention and compaction get a turn.

Printed: the daemon's resident memory, descriptors, memgang's cgroups
(memory and freezer) and journal bytes after a warm-up and at the end,
each beside its bound; and what the load did. The bounds: RSS within
16 MiB of the warm daemon's, descriptors within 8, no cgroup but the
pool, the journal within what its compaction allows: four times what it
kept (KEEP jobs of at most max_job_command bytes each) past what it kept,
plus 1 MiB.

usage: python3 bench/daemon_soak.py WORK_DIR BIN_DIR MINUTES USER_A USER_B
"""
import json
import os
import pwd
import random
import signal
import socket
import subprocess
import sys
import time

KEEP = 50
SEED = 45
RSS_SLACK = 16 << 20
FD_SLACK = 8
# The warm-up before the first measure: the allocator's arenas, the
# threads' stacks, the first pool and jobs.
WARM_S = 20


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cgroups():
    """memgang's groups (pools, jobs) in the memory and freezer trees."""
    n = 0
    for h in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified"):
        for root, dirs, _ in os.walk(h):
            n += sum(1 for d in dirs if d.startswith("memgang-pool-") or d.startswith("job-j"))
    return n


class Daemon:
    def __init__(self, work, bin_dir):
        self.work, self.bin = work, bin_dir
        self.sock = os.path.join(work, "memgang.sock")
        self.proc = None
        self.log = open(os.path.join(work, "memgangd.log"), "ab")

    def start(self):
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "memgangd"), "--config", os.path.join(self.work, "memgang.toml")],
            stderr=self.log,
        )
        deadline = time.time() + 30
        while True:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    sys.exit(f"memgangd did not start (see {self.work}/memgangd.log)")
                time.sleep(0.05)

    def stop(self, sig):
        # By pid, never by name.
        self.proc.send_signal(sig)
        self.proc.wait()

    def journal_bytes(self):
        return os.path.getsize(os.path.join(self.work, "state", "journal.jsonl"))


def ask(sock, req, user=None, timeout=30):
    """One request as `user` (None: root): a child process that drops to
    the user, since the daemon learns the caller from the socket."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            if user:
                u = pwd.getpwnam(user)
                os.setgroups([])
                os.setgid(u.pw_gid)
                os.setuid(u.pw_uid)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(timeout)
            s.connect(sock)
            s.sendall(json.dumps(req).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
            os.write(w, data)
        except Exception as e:  # the parent reads no answer
            os.write(w, json.dumps({"kind": "error", "message": f"client: {e}"}).encode())
            code = 1
        os._exit(code)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return {"kind": "error", "message": "no answer"}


def all_jobs(sock):
    jobs, after = [], None
    while True:
        req = {"op": "list"}
        if after is not None:
            req["after"] = after
        a = ask(sock, req)
        jobs += a.get("jobs", [])
        if a.get("next") is None:
            return jobs
        after = a["next"]


def measure(d):
    # A daemon that ended is a zombie here until stopped: no VmRSS, no fds.
    if d.proc.poll() is not None:
        sys.exit(f"memgangd ended (status {d.proc.returncode}) before the measure; its log says why")
    pid = d.proc.pid
    return {"rss": rss(pid), "fds": fds(pid), "cgroups": cgroups(), "journal": d.journal_bytes()}


class Load:
    def __init__(self, d, users, rng, workdirs):
        self.d, self.users, self.rng, self.dirs = d, users, rng, workdirs
        self.mine = {u: [] for u in users}
        self.count = {k: 0 for k in ("submitted", "refused", "cancelled", "listed", "kill -9", "SIGTERM")}

    def env(self):
        e = {"PATH": "/usr/bin:/bin", "HOME": "/"}
        if self.rng.random() < 0.5:
            e["BIG"] = "e" * self.rng.randrange(1, 250 << 10)
        return e

    def submit(self, user):
        r = self.rng.random()
        cmd = [["true"], ["sleep", str(self.rng.randrange(1, 4))],
               ["sh", "-c", "head -c 100000 /dev/urandom | od | head -c 50000"]][self.rng.randrange(3)]
        name = "n" * self.rng.randrange(1, 60_000) if self.rng.random() < 0.3 else None
        env = self.env()
        cwd = self.dirs[user]
        if r < 0.05:
            cmd = ["echo", "a\u0000b"]  # refused: NUL
        elif r < 0.10:
            env["HUGE"] = "x" * (300 << 10)  # refused: max_job_environment
        elif r < 0.15:
            # A directory removed right after: its start may fail.
            cwd = os.path.join(self.dirs[user], f"gone-{self.rng.randrange(1 << 30)}")
            os.mkdir(cwd)
            u = pwd.getpwnam(user)
            os.chown(cwd, u.pw_uid, u.pw_gid)
        req = {"op": "submit", "command": cmd, "memory_bytes": self.rng.randrange(8, 64) << 20,
               "ranks": 1, "cwd": cwd, "env": env, "name": name}
        a = ask(self.d.sock, req, user)
        if r >= 0.10 and r < 0.15:
            os.rmdir(cwd)
        if a.get("kind") == "submitted":
            self.mine[user].append(a["id"])
            self.count["submitted"] += 1
        else:
            self.count["refused"] += 1

    def step(self):
        r = self.rng.random()
        user = self.rng.choice(self.users)
        if r < 0.6:
            self.submit(user)
        elif r < 0.8 and self.mine[user]:
            job = self.rng.choice(self.mine[user])
            if ask(self.d.sock, {"op": "cancel", "id": job}, user).get("kind") == "done":
                self.count["cancelled"] += 1
        else:
            ask(self.d.sock, {"op": "list"}, user if r < 0.9 else None)
            self.count["listed"] += 1


def main():
    work, bin_dir, minutes, user_a, user_b = sys.argv[1:6]
    minutes = float(minutes)
    rng = random.Random(SEED)
    users = [user_a, user_b]
    dirs = {}
    for u in users:
        p = os.path.join(work, u)
        os.makedirs(p, exist_ok=True)
        pw = pwd.getpwnam(u)
        os.chown(p, pw.pw_uid, pw.pw_gid)
        dirs[u] = p
    d = Daemon(work, bin_dir)
    d.start()
    load = Load(d, users, rng, dirs)
    began = time.time()
    end = began + minutes * 60
    warm = None
    # Restarts only in the first two thirds: the last daemon lives
    # through a third of the load before it is measured.
    next_restart = began + rng.uniform(30, 60)
    restart_until = began + minutes * 60 * 2 / 3
    peak = 0
    while time.time() < end:
        load.step()
        peak = max(peak, rss(d.proc.pid))
        if warm is None and time.time() - began >= WARM_S:
            warm = measure(d)
        if time.time() >= next_restart and time.time() < restart_until:
            sig = signal.SIGKILL if rng.random() < 0.75 else signal.SIGTERM
            d.stop(sig)
            load.count["kill -9" if sig == signal.SIGKILL else "SIGTERM"] += 1
            d.start()
            next_restart = time.time() + rng.uniform(30, 60)
    # The load stops: what is left ends or is cancelled.
    deadline = time.time() + 120
    while True:
        open_jobs = [j for j in all_jobs(d.sock) if j["state"] in ("queued", "running", "suspended")]
        if not open_jobs:
            break
        if time.time() > deadline:
            for j in open_jobs:
                ask(d.sock, {"op": "cancel", "id": j["id"]})
        if time.time() > deadline + 60:
            sys.exit(f"{len(open_jobs)} jobs never ended")
        time.sleep(1)
    jobs = all_jobs(d.sock)
    # Retention runs every minute, and compaction with it.
    time.sleep(65)
    final = measure(d)
    kept = len(all_jobs(d.sock))
    d.stop(signal.SIGTERM)
    rows = [
        ("daemon resident memory, MiB", warm["rss"] / 2**20, final["rss"] / 2**20,
         f"start + {RSS_SLACK >> 20}", final["rss"] <= warm["rss"] + RSS_SLACK),
        ("daemon descriptors", warm["fds"], final["fds"], f"start + {FD_SLACK}",
         final["fds"] <= warm["fds"] + FD_SLACK),
        ("memgang cgroups (pools, jobs; memory and freezer)", warm["cgroups"], final["cgroups"],
         "2 (the pool)", final["cgroups"] <= 2),
        ("journal, KiB", warm["journal"] / 1024, final["journal"] / 1024,
         f"5 x {KEEP} x 64 KiB + 1 MiB", final["journal"] <= 5 * KEEP * (64 << 10) + (1 << 20)),
    ]
    print(f"| measure | after {WARM_S} s | at the end | bound | within |")
    print("|---|---|---|---|---|")
    for name, a, b, bound, ok in rows:
        fa = f"{a:.1f}" if isinstance(a, float) else str(a)
        fb = f"{b:.1f}" if isinstance(b, float) else str(b)
        print(f"| {name} | {fa} | {fb} | {bound} | {'yes' if ok else 'NO'} |")
    print()
    print("| the load | |")
    print("|---|---|")
    print(f"| minutes | {minutes:g} |")
    for k, v in load.count.items():
        print(f"| {k} | {v} |")
    ended = {}
    for j in jobs:
        ended[j["state"]] = ended.get(j["state"], 0) + 1
    print(f"| jobs listed at the end, by state | {', '.join(f'{k} {v}' for k, v in sorted(ended.items()))} |")
    print(f"| jobs kept after retention (keep_finished_jobs = {KEEP}) | {kept} |")
    print(f"| daemon peak resident memory seen, MiB | {peak / 2**20:.1f} |")
    if not all(r[4] for r in rows):
        sys.exit("a bound was passed")


if __name__ == "__main__":
    main()
