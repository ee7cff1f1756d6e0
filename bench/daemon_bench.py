"""Drive memgangd through its socket (the JSON-lines protocol of
crates/proto) and through `memgang submit`; print a Markdown table and
write the numbers as JSON. Arguments: SOCKET MEMGANG JOBS CLI_JOBS OUT."""
import json
import os
import socket
import subprocess
import sys
import time

sock_path, memgang, jobs, cli_jobs, out = sys.argv[1:6]
jobs, cli_jobs = int(jobs), int(cli_jobs)


def call(req):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        s.sendall((json.dumps(req) + "\n").encode())
        f = s.makefile()
        ans = json.loads(f.readline())
    if ans["kind"] == "error":
        sys.exit(f"memgangd: {ans['message']}")
    return ans


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def wait_all(ids):
    while True:
        done = {j["id"]: j for j in call({"op": "list"})["jobs"]
                if j["id"] in ids and j["state"] in ("finished", "failed", "cancelled")}
        if len(done) == len(ids):
            return done
        time.sleep(0.2)


# `true` with 1M declared: the jobs cost nothing, so what is measured is
# the daemon (journal fsync, admission, cgroup, spawn, reaping).
submit = {"op": "submit", "command": ["true"], "memory_bytes": 1 << 20, "ranks": 1,
          "cwd": "/", "env": {"PATH": os.environ["PATH"]}, "name": "bench"}
lat, ids = [], set()
t0 = time.monotonic()
for _ in range(jobs):
    t = time.monotonic()
    ids.add(call(submit)["id"])
    lat.append(time.monotonic() - t)
t_submitted = time.monotonic()
done = wait_all(ids)
t_done = time.monotonic()
failed = sum(1 for j in done.values() if j["state"] != "finished")

cli_lat = []
env = dict(os.environ, MEMGANG_SOCKET=sock_path)
cli_ids = set()
for _ in range(cli_jobs):
    t = time.monotonic()
    r = subprocess.run([memgang, "submit", "--memory", "1M", "--", "true"],
                       capture_output=True, text=True, env=env, cwd="/")
    cli_lat.append(time.monotonic() - t)
    if r.returncode != 0:
        sys.exit(f"memgang submit: {r.stderr}")
    cli_ids.add(int(r.stdout))
failed += sum(1 for j in wait_all(cli_ids).values() if j["state"] != "finished")

res = {
    "jobs": jobs,
    "socket_submit_ms": {"p50": pct(lat, 50) * 1e3, "p99": pct(lat, 99) * 1e3, "max": max(lat) * 1e3},
    "submits_per_s": jobs / (t_submitted - t0),
    "jobs_finished_per_s": jobs / (t_done - t0),
    "cli_jobs": cli_jobs,
    "cli_submit_ms": {"p50": pct(cli_lat, 50) * 1e3, "p99": pct(cli_lat, 99) * 1e3, "max": max(cli_lat) * 1e3},
    "failed": failed,
}
with open(out, "w") as f:
    json.dump(res, f, indent=1)
s, c = res["socket_submit_ms"], res["cli_submit_ms"]
print("| measure | value |\n|---|---|")
print(f"| jobs submitted over the socket | {jobs} |")
print(f"| submit latency p50 / p99 / max | {s['p50']:.2f} / {s['p99']:.2f} / {s['max']:.2f} ms |")
print(f"| submissions per second | {res['submits_per_s']:.0f} |")
print(f"| jobs run to their end per second (submit to last exit) | {res['jobs_finished_per_s']:.1f} |")
print(f"| `memgang submit` latency p50 / p99 / max ({cli_jobs} jobs) | {c['p50']:.2f} / {c['p99']:.2f} / {c['max']:.2f} ms |")
print(f"| jobs not finished | {failed} |")
