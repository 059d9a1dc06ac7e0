"""The pymongo suites' mayflyd process (tests/clients/test_pymongo*.py).

Server starts a mayflyd (binary from $MAYFLYD, default build-asan/mayflyd
relative to the repository root) on a free port (or the one given) with a
private temporary --dbpath and extra args, keeps the tail of its stderr for
failure messages, and stops it with SIGTERM (returning the exit status, or
"forced" if it needed a SIGKILL).

start_replica_set(name, n) starts n members with --replSet name, initiates
them from the first and waits for one primary and n - 1 secondaries;
wait_for(pred, what) polls a condition (a guard against a hang, not a
timing check).
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Server:
    """A mayflyd process on a free port with a private temporary dbpath."""

    def __init__(self, args=None, port=None):
        binary = os.environ.get("MAYFLYD", "build-asan/mayflyd")
        self.args = args or []
        self.binary = binary if os.path.isabs(binary) else os.path.join(REPO_ROOT, binary)
        self.dbpath = tempfile.mkdtemp(prefix="mayfly-py-")
        self.port = port
        self.proc = None
        self.stderr_lines = []

    @staticmethod
    def _free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode("utf-8", "replace").rstrip("\n"))
            if len(self.stderr_lines) > 1000:
                del self.stderr_lines[:500]

    def tail(self, n=30):
        return "\n".join(self.stderr_lines[-n:])

    def start(self):
        if not os.path.exists(self.binary):
            raise RuntimeError("mayflyd binary not found at %s (set MAYFLYD)" % self.binary)
        if self.port is None:
            self.port = self._free_port()
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind_ip", "127.0.0.1", "--dbpath", self.dbpath] + self.args,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.drainer = threading.Thread(target=self._drain, daemon=True)
        self.drainer.start()
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("mayflyd exited during start-up (%s)\n%s" % (self.proc.returncode, self.tail()))
            try:
                # A plain TCP connect sends no bytes, so it works whatever --tlsMode is.
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("mayflyd did not accept connections within 20 s\n" + self.tail())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                return "forced"
        if self.proc:
            # Let the reader thread collect everything written at exit (sanitizer reports).
            self.drainer.join(5)
        return self.proc.returncode if self.proc else None

    def restart(self):
        """SIGTERM, then start again on the same port and dbpath; returns the exit status."""
        rc = self.stop()
        self.start()
        return rc

    def cleanup(self):
        shutil.rmtree(self.dbpath, ignore_errors=True)

    def finish(self, passed, failed):
        """Stops the server (a shutdown that is not clean counts as a failure), removes its dbpath,
        prints "N passed, M failed" and returns the suite's exit status."""
        rc = self.stop()
        if rc not in (0, -signal.SIGTERM):
            failed += 1
            print("FAIL server shutdown: exit status %r\n%s" % (rc, self.tail(40)))
        self.cleanup()
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0

    @property
    def uri(self):
        return "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=5000" % self.port


def wait_for(pred, what, timeout=30):
    """Polls pred until it returns something truthy (returned); a guard against a hang, not a timing check."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - members come and go while a set forms or fails over
            last = e
        time.sleep(0.1)
    raise AssertionError("timed out after %ds waiting for %s (last error: %r)" % (timeout, what, last))


def start_replica_set(name, members, n=3, args=()):
    """Starts n members of replica set name (each on a free port and raft port, appended to the list
    members as they start), sends replSetInitiate naming them all to the first, and waits for a primary
    and n - 1 secondaries. The caller stops every Server in members (stop() and cleanup()), also when
    this raises."""
    from pymongo import MongoClient  # only the replica-set suites need the driver here
    for _ in range(n):
        port, raft = Server._free_port(), Server._free_port()
        m = Server(args=["--replSet", name, "--raftPort", str(raft)] + list(args), port=port)
        members.append(m)
        m.start()
    hosts = ["127.0.0.1:%d" % m.port for m in members]
    first = MongoClient(hosts[0], directConnection=True)
    try:
        first.admin.command("replSetInitiate", {"_id": name, "members": [{"_id": i, "host": h} for i, h in enumerate(hosts)]})
    finally:
        first.close()

    def states():
        out = []
        for m in members:
            c = MongoClient("127.0.0.1", m.port, directConnection=True, serverSelectionTimeoutMS=2000)
            try:
                h = c.admin.command("isMaster")
                out.append("P" if h.get("ismaster") else ("S" if h.get("secondary") else "?"))
            finally:
                c.close()
        return sorted(out) == ["P"] + ["S"] * (n - 1)
    wait_for(states, "a primary and %d secondaries" % (n - 1))
