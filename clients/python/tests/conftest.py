"""A real dev agent for the tests: ``foreman agent --dev`` on a free loopback
port with a temporary data dir, started once per session and stopped after.

The binary is $FOREMAN_BIN, else <repo>/bin/foreman (``make build``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, TypeVar

import pytest

from foreman import Client

REPO = Path(__file__).resolve().parents[3]

# Generous for a loaded 2-core CI machine; polls end as soon as they can.
AGENT_START_TIMEOUT = 60.0  # process start to a known leader
AGENT_STOP_TIMEOUT = 30.0  # SIGTERM to exit
JOB_TIMEOUT = 60.0  # a short job from submit to its end

T = TypeVar("T")


def foreman_bin() -> str:
    b = os.environ.get("FOREMAN_BIN") or str(REPO / "bin" / "foreman")
    if not os.access(b, os.X_OK):
        pytest.fail(f"no foreman binary at {b}: run `make build` or set FOREMAN_BIN", pytrace=False)
    return b


def eventually(what: str, fn: Callable[[], Optional[T]], timeout: float = JOB_TIMEOUT) -> T:
    """Poll fn until it returns something other than None (or stops
    raising), backing off to 0.5 s; fail naming what after timeout."""
    deadline = time.monotonic() + timeout
    wait, last = 0.02, None
    while True:
        try:
            v = fn()
            if v is not None:
                return v
        except Exception as e:  # noqa: BLE001 - reported when it lasts
            last = e
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {timeout}s (last error: {last!r})", pytrace=False)
        time.sleep(wait)
        wait = min(wait * 1.5, 0.5)


def free_base() -> int:
    """A port P with P, P+1 and P+2 free on 127.0.0.1, TCP and UDP (the
    agent's HTTP, raft and gossip ports)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base > 65000:
            continue
        if all(_port_free(p) for p in range(base, base + 3)):
            return base
    raise RuntimeError("no three free ports in a row on 127.0.0.1")


def _port_free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


class Agent:
    """One `foreman agent --dev` process; its files live under root."""

    def __init__(self, root: str, args: List[str], scheme: str = "http") -> None:
        self.root = root
        self.base = free_base()
        self.url = f"{scheme}://127.0.0.1:{self.base}"
        self.log_path = os.path.join(root, "agent.log")
        self.args = [foreman_bin(), "agent", "--dev", "--port", str(self.base), "--data-dir", os.path.join(root, "data")] + args
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, client: Client) -> None:
        def ready():
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"agent exited with {self.proc.returncode}:\n{self.log_tail()}", pytrace=False)
            return client.ready()

        eventually(f"agent {self.url} ready", ready, AGENT_START_TIMEOUT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(AGENT_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        kill_strays(self.root)

    def log_tail(self, n: int = 6000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""


def kill_strays(root: str) -> None:
    """SIGKILL what the agent left behind (supervisors and jobs are detached
    by design): every process whose command line or environment names root."""
    me, needle = os.getpid(), root.encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cl = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in cl or needle in env:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def make_root(prefix: str) -> str:
    root = tempfile.mkdtemp(prefix=prefix)
    # Traversable by others: process jobs run as nobody, and must reach their
    # attempt dirs under the data dir.
    os.chmod(root, 0o711)
    return root


@pytest.fixture(scope="session")
def agent(request: pytest.FixtureRequest) -> Iterator[Agent]:
    """A dev agent that runs process jobs and advertises two GPUs (so the
    README's gang example, which asks for one per task, is placed)."""
    root = make_root("foreman-pytest-")
    a = Agent(root, ["--default-driver", "process", "--resource", "gpu=2"])
    a.start()
    try:
        a.wait_ready(Client(a.url, token="", namespace=""))
        yield a
    finally:
        a.stop()
        if request.session.testsfailed:
            print(f"\n--- agent log (tail) ---\n{a.log_tail()}")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def client(agent: Agent) -> Client:
    # token and namespace given: the tests ignore FOREMAN_TOKEN/NAMESPACE.
    return Client(agent.url, token="", namespace="", timeout=30)
