"""memgangd against hostile users, measured (bench/daemon_hostile.sh runs
it, as root, against a daemon it started): what crates/cli/tests/hostile.rs
asserts bounds on, here as numbers.

1. A connection flood: two users each open 600 connections and send
   nothing. Printed: the daemon's threads and CPU seconds over 2 s of it,
   the time root's `memgang submit` takes during it, how long a client
   sending a byte every 2 s keeps its connection, the connections each
   flooder got.
2. A status-file bomb: a job writes 200 MB into each of its files (status,
   allowance, stdout) and 200 MB to stderr. Printed: the daemon's peak
   resident memory (VmHWM) before and after, and the job's end.

usage: python3 bench/daemon_hostile.py SOCKET MEMGANG DAEMON_PID USER_A USER_B
"""
import json
import os
import pwd
import socket
import subprocess
import sys
import time

FLOOD = 600
FLOOD_HOLD_S = 20
CPU_WINDOW_S = 2.0


def threads_and_cpu(pid):
    status = open(f"/proc/{pid}/status").read()
    threads = int(next(l.split()[1] for l in status.splitlines() if l.startswith("Threads:")))
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return threads, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    status = open(f"/proc/{pid}/status").read()
    return int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmHWM:"))) / 1024


def as_user(name):
    u = pwd.getpwnam(name)
    return {"user": u.pw_uid, "group": u.pw_gid, "extra_groups": [],
            "env": {"PATH": "/usr/bin:/bin", "HOME": "/"}}


def cli(memgang, sock, args, user=None, cwd=None, timeout=60):
    env = dict(os.environ, MEMGANG_SOCKET=sock)
    kw = as_user(user) if user else {}
    if user:
        kw["env"] = dict(kw["env"], MEMGANG_SOCKET=sock)
    else:
        kw["env"] = env
    return subprocess.run([memgang, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, **kw)


def wait_all(memgang, sock, timeout):
    deadline = time.time() + timeout
    while True:
        jobs = json.loads(cli(memgang, sock, ["status", "--json"]).stdout)
        if all(j["state"] in ("finished", "failed", "cancelled") for j in jobs):
            return jobs
        if time.time() > deadline:
            sys.exit(f"jobs did not end in {timeout} s: {jobs}")
        time.sleep(0.2)


def flood(sock, memgang, pid, users):
    script = (f"my @s; for (1..{FLOOD}) {{ my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or next; "
              f"push @s, $s }} print scalar(@s), \"\\n\"; STDOUT->flush; sleep {FLOOD_HOLD_S};")
    flooders = [subprocess.Popen(["perl", "-MIO::Socket::UNIX", "-MIO::Handle", "-e", script, sock],
                                 stdout=subprocess.PIPE, text=True, **as_user(u)) for u in users]
    try:
        slow = socket.socket(socket.AF_UNIX)
        slow.connect(sock)
        slow_start = time.monotonic()
        time.sleep(3)
        threads, cpu0 = threads_and_cpu(pid)
        time.sleep(CPU_WINDOW_S)
        _, cpu1 = threads_and_cpu(pid)
        t = time.monotonic()
        out = cli(memgang, sock, ["submit", "--memory", "10M", "--", "true"], timeout=60)
        submit_s = time.monotonic() - t
        if out.returncode != 0:
            sys.exit(f"root's submit during the flood failed: {out.stderr}")
        slow.settimeout(CPU_WINDOW_S)
        closed_s = None
        while time.monotonic() - slow_start < 60:
            try:
                slow.sendall(b" ")
                slow.recv(256)  # closed (b"") or answered (an error): either ends it
                closed_s = time.monotonic() - slow_start
                break
            except socket.timeout:
                continue
            except OSError:
                closed_s = time.monotonic() - slow_start
                break
        held = [int(f.stdout.readline() or 0) for f in flooders]
    finally:
        for f in flooders:
            f.kill()
            f.wait()
    wait_all(memgang, sock, 60)
    return [
        ("connection flood", f"{len(users)} users x {FLOOD} idle connections, held "
         f"{', '.join(map(str, held))}", ""),
        ("", "daemon threads during the flood", f"{threads}"),
        ("", f"daemon CPU s over {CPU_WINDOW_S:.0f} s of the flood", f"{cpu1 - cpu0:.2f}"),
        ("", "root's `memgang submit` during the flood, s", f"{submit_s:.2f}"),
        ("", "a client sending a byte every 2 s closed after, s",
         f"{closed_s:.1f}" if closed_s is not None else "not closed in 60 s"),
    ]


def bomb(sock, memgang, pid, user, cwd):
    before = peak_rss_mib(pid)
    d = 'd=$(dirname "$MEMGANG_ALLOWANCE")'
    job = (f'{d}; for f in status allowance stdout; do head -c 200M /dev/zero > "$d/$f" 2>/dev/null; '
           'done; head -c 200M /dev/zero >&2; exit 3')
    out = cli(memgang, sock, ["submit", "--memory", "10M", "--", "sh", "-c", job], user=user, cwd=cwd)
    if out.returncode != 0:
        sys.exit(f"submit as {user} failed: {out.stderr}")
    jid = int(out.stdout)
    jobs = wait_all(memgang, sock, 300)
    j = next(j for j in jobs if j["id"] == jid)
    return [
        ("status-file bomb", "a job writes 200 MB into status, allowance, stdout, and stderr", ""),
        ("", "daemon peak resident memory before, MiB", f"{before:.0f}"),
        ("", "daemon peak resident memory after, MiB", f"{peak_rss_mib(pid):.0f}"),
        ("", "the job's end as recorded (exit 3 expected)", f"{j['state']}, exit {j['exit_code']}"),
    ]


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    sock, memgang, pid, a, b = argv[0], argv[1], int(argv[2]), argv[3], argv[4]
    rows = flood(sock, memgang, pid, [a, b])
    rows += bomb(sock, memgang, pid, a, os.path.dirname(sock))
    print("| test | what | measured |")
    print("|------|------|----------|")
    for r in rows:
        print(f"| {' | '.join(r)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
