"""A multi-node deployment on one machine: a Ray cluster of several nodes, a 3-server NATS
JetStream cluster and ingress replicas, everything on 127.0.0.1. What the multi-node tests and
``benchmarks/bench_scale.py`` run, and a way to try the cluster mode without several hosts.

Each part can be killed and replaced (a Ray worker node with every process on it, a NATS server,
a replica), as a node of a real deployment can fail. Ray's nodes use ``ray.cluster_utils.Cluster``
with 127.0.0.1 as their address (cluster mode's address rewriting is off for this process and
its children), and the replicas are ``ldpsynth aggregator serve --nats ... --ray-address ...``
processes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats, _free_port
from ldpsynth.aggregator.storage.segments import WorkerStatus
from ldpsynth.serving.observe.histogram import HistogramSnapshot


class LocalRayCluster:
    """Several Ray nodes on 127.0.0.1 in this process (``ray.cluster_utils.Cluster``, not joined as a
    driver): a head, and worker nodes to add and kill, for :class:`LocalCluster`.
    Node failures are detected within seconds (health checks every second, 5 missed)."""

    FAST_FAILURE_DETECTION = {"health_check_period_ms": 1000, "health_check_timeout_ms": 3000,
                              "health_check_failure_threshold": 5, "health_check_initial_delay_ms": 0}

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # the nodes keep 127.0.0.1 as their address
        self._cluster = Cluster(initialize_head=True, connect=False, head_node_args=dict(
            num_cpus=1, node_ip_address="127.0.0.1", include_dashboard=False,
            _system_config=self.FAST_FAILURE_DETECTION))
        # Cluster writes its address where a bare ray.init() on this host would join it: remove it.
        path = Path(ray._private.utils.get_ray_address_file(None))
        if path.exists() and self.gcs_address in path.read_text():
            path.unlink()

    @property
    def gcs_address(self) -> str:
        return str(self._cluster.gcs_address)

    def add_node(self, cpus: int, resources: dict[str, float]) -> Any:
        """Start a worker node; Ray gives it 30 s to register, which a loaded 2-core machine can
        miss, so the start is tried up to 3 times. Returns the node (``node.node_id``)."""
        for attempt in range(3):
            try:
                return self._cluster.add_node(num_cpus=cpus, node_ip_address="127.0.0.1", resources=resources)
            except Exception as exc:  # Ray raises a bare Exception for a slow start
                if "timed out during startup" not in str(exc) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def kill_node(self, node: Any) -> None:
        self._cluster.remove_node(node, allow_graceful=False)

    def shutdown(self) -> None:
        self._cluster.shutdown()


class LocalNatsCluster:
    """``size`` NATS servers on 127.0.0.1 forming one JetStream cluster (routes between all of them),
    each with its own store under ``directory``: the replicated log of the multi-node tests and
    benchmarks on one machine. :meth:`kill` and :meth:`restart` one server to simulate a lost node."""

    def __init__(self, directory: str | Path, size: int = 3):
        routes = [_free_port() for _ in range(size)]
        self.servers = [EmbeddedNats(Path(directory) / f"n{i}", (f"n{i}", routes[i], routes[:i] + routes[i + 1:]))
                        for i in range(size)]

    def start(self) -> tuple[str, ...]:
        """Start every server; return their URLs."""
        return tuple(server.start() for server in self.servers)

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(server.url for server in self.servers)

    def kill(self, index: int) -> None:
        """SIGKILL server ``index`` (no goodbye to the cluster)."""
        process = self.servers[index].process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self, index: int) -> None:
        self.servers[index].restart()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


#: The custom resource of the worker nodes: shard workers run only there (not on the head).
WORKER_RESOURCE = "ldpsynth_worker"
_START_TIMEOUT = 300.0


class ServerProcess:
    """A server subprocess that prints ``{"event": "listening", "address": ...}`` (and ``web_address`` when it
    has a web port) when it is ready
    (``aggregator serve``, or a benchmark's bare server): waits for that line; its stdout lines are
    kept (``stdout``), its stderr goes to ``log_path``."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=self._log, env=env)
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.stdout: list[str] = []
        try:
            self.address, self.web_address = self._wait_listening()
        except BaseException:
            self.kill()
            raise

    def _pump(self) -> None:
        """Queue the stdout lines until the process closes it; then close our end."""
        assert self.proc.stdout is not None
        with self.proc.stdout as out:
            for line in out:
                self._lines.put(line)
        self._lines.put(b"")

    def _wait_listening(self) -> tuple[str, str]:
        """The listening line's gRPC address and web address (``""`` without a web port)."""
        while True:
            try:
                line = self._lines.get(timeout=_START_TIMEOUT).decode()
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"no listening line; log:\n{self.log()[-5000:]}") from None
            if not line:
                raise RuntimeError(f"server exited ({self.proc.wait()}); log:\n{self.log()[-5000:]}")
            self.stdout.append(line)
            event = json.loads(line)
            if event.get("event") == "listening":
                return str(event["address"]), str(event.get("web_address", ""))

    @classmethod
    def aggregator(cls, args: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> ServerProcess:
        """``ldpsynth aggregator serve ARGS`` (the module entry point: no console script needed)."""
        return cls([sys.executable, "-m", "ldpsynth.cli.aggregator_cmd", "serve", *args], log_path, env)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (a graceful stop); the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        """SIGKILL if still running; then as :meth:`wait`."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.wait(30)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process has ended (within ``timeout`` s); closes its log."""
        code = self.proc.wait(timeout)
        self._log.close()
        return code


@dataclass
class LocalCluster:
    """The running system (see the module docstring); :meth:`start`, then :meth:`stop`."""

    directory: Path
    collections: list[Path]
    shards: int = 4
    worker_nodes: int = 3
    snapshot_every: int = 1 << 20
    #: The replicas' sealing key file (``--shuffle-key``; ``None``: they take no sealed reports).
    shuffle_key: Path | None = None
    ray: LocalRayCluster | None = None
    nodes: list[Any] = field(default_factory=list)
    nats: LocalNatsCluster | None = None
    replicas: list[ServerProcess] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)

    def start(self, replicas: int = 2) -> LocalCluster:
        self.ray = LocalRayCluster()
        for _ in range(self.worker_nodes):
            self.add_node()
        self.nats = LocalNatsCluster(self.directory / "nats")
        self.nats.start()
        for _ in range(replicas):
            self.start_replica()
        return self

    @property
    def targets(self) -> str:
        """``HOST:PORT,...`` of every replica (what devices are given)."""
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def add_node(self, cpus: int = 1) -> None:
        """Add a worker node (offering :data:`WORKER_RESOURCE`)."""
        assert self.ray is not None
        self.nodes.append(self.ray.add_node(cpus, {WORKER_RESOURCE: 100}))

    def kill_node(self, node: Any) -> None:
        """SIGKILL a worker node: its raylet and every process on it."""
        assert self.ray is not None
        self.ray.kill_node(node)
        self.nodes.remove(node)

    def serve_args(self, port: int = 0) -> list[str]:
        assert self.ray is not None and self.nats is not None
        args = ["--nats", ",".join(self.nats.urls), "--log-replicas", "3", "--ray-address", self.ray.gcs_address,
                "--worker-resource", WORKER_RESOURCE, "--worker-dir", str(self.directory / "workers"),
                "--shards", str(self.shards), "--port", str(port), "--snapshot-every", str(self.snapshot_every),
                "--grace", "2"]
        for collection in self.collections:
            args += ["--collection", str(collection)]
        if self.shuffle_key is not None:
            args += ["--shuffle-key", str(self.shuffle_key)]
        return args

    def start_replica(self, index: int | None = None) -> ServerProcess:
        """Start a replica (``index``: restart replica ``index`` on its old port)."""
        port = 0 if index is None else self.ports[index]
        replica = ServerProcess.aggregator(self.serve_args(port),
                                           self.directory / f"replica-{len(self.replicas)}-{port}.log")
        if index is None:
            self.replicas.append(replica)
            self.ports.append(int(replica.address.rsplit(":", 1)[1]))
        else:
            self.replicas[index] = replica
        return replica

    def driver(self, code: str) -> Any:
        """Run ``code`` (which prints one JSON value last) in a Ray driver process joined to the cluster."""
        assert self.ray is not None
        program = (f"import json, ray\nray.init(address={self.ray.gcs_address!r}, namespace='ldpsynth', "
                   "log_to_driver=False)\n") + code
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        for line in reversed(out.stdout.strip().splitlines()):  # Ray may print its own lines after ours
            if line.startswith(("{", "[")):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        raise RuntimeError(f"the driver printed no JSON line: {out.stdout[-2000:]!r}")

    def worker_nodes_of_shards(self) -> dict[int, str | None]:
        """The Ray node id of every shard worker (``None`` while one is restarting)."""
        return {int(k): v for k, v in self.driver(
            "names = sorted(a['name'] for a in ray.util.list_named_actors(all_namespaces=True) "
            "if a['name'].startswith('ldpsynth-'))\n"
            "def node(name):\n"
            "    try:\n"
            "        return ray.get(ray.get_actor(name).node.remote(), timeout=10)\n"
            "    except Exception:\n"
            "        return None\n"
            "print(json.dumps({n[-3:]: node(n) for n in names}))").items()}

    def worker_status(self, shard: int) -> WorkerStatus:
        """A shard worker's :meth:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker.status`."""
        found = self.driver(
            "import dataclasses\n"
            "name = [a['name'] for a in ray.util.list_named_actors(all_namespaces=True) "
            f"if a['name'].endswith('-shard-{shard:03d}')][0]\n"
            "print(json.dumps(dataclasses.asdict(ray.get(ray.get_actor(name).call.remote('status')))))")
        histograms = {key: HistogramSnapshot(tuple(found[key]["bounds"]), tuple(found[key]["cumulative"]),
                                             found[key]["count"], found[key]["total"])
                      for key in ("commit_seconds", "append_seconds") if found.get(key)}
        return WorkerStatus(**{**found, "notes": tuple(tuple(note) for note in found["notes"]), **histograms})

    def stop(self) -> None:
        for replica in self.replicas:
            if replica.proc.poll() is None:
                replica.kill()
        if self.nats is not None:
            self.nats.stop()
        if self.ray is not None:
            self.ray.shutdown()

