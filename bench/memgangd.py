"""A memgangd for a bench (bench/daemon_defaults.py, bench/dyncosched.py):
a directory of its own (config, state, socket, log), started on a config
and stopped with every job it still holds cancelled and the directory
removed."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

LIVE = ("queued", "running", "suspended")


class Daemon:
    def __init__(self, memgangd, config, prefix):
        """`config(dir, sock)`: the memgang.toml text, given the daemon's
        directory and socket path."""
        self.dir = tempfile.mkdtemp(prefix=prefix)
        # The jobs' users reach the socket below it.
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "memgang.sock")
        self.config = config(self.dir, self.sock)
        path = os.path.join(self.dir, "memgang.toml")
        with open(path, "w") as f:
            f.write(self.config)
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.proc = subprocess.Popen([memgangd, "--config", path], stderr=self.log)
        # 20 s: a daemon's recovery of an empty state takes well under one.
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            if self.proc.poll() is not None:
                sys.exit(f"memgangd ended at its start: {open(self.log.name).read()}")
            time.sleep(0.1)
        self.stop()
        sys.exit("memgangd did not start")

    def call(self, req):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.sock)
            s.sendall((json.dumps(req) + "\n").encode())
            ans = json.loads(s.makefile().readline())
        if ans["kind"] == "error":
            raise RuntimeError(ans["message"])
        return ans

    def jobs(self):
        return {j["id"]: j for j in self.call({"op": "list"})["jobs"]}

    def stop(self):
        """Cancel what still runs (60 s for it to end), then stop."""
        try:
            for j in self.jobs().values():
                if j["state"] in LIVE:
                    self.call({"op": "cancel", "id": j["id"]})
            deadline = time.time() + 60
            while time.time() < deadline and any(j["state"] in LIVE for j in self.jobs().values()):
                time.sleep(0.5)
        except OSError:
            pass
        self.proc.terminate()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])
