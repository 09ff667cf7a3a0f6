"""``docker/nats``: the three NATS configurations, moved to loopback ports, are started and must form one
JetStream cluster."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ldpsynth.aggregator.runtime.nats_process import EMBEDDED_MAX_PAYLOAD, _free_port, nats_server_binary
from tests.docker.docker_files import host_port, nats_file, nats_of, services


# ----- the NATS configurations, run -----------------------------------------------------------------
def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def test_the_nats_configurations_form_a_jetstream_cluster(tmp_path: Path) -> None:
    """The three files, with their addresses moved to free loopback ports and the store to a
    temporary directory (nothing else changed), start three servers that form one JetStream
    cluster: every server healthy, a meta group of 3, every write fsynced, 8 MiB messages."""
    names = services("nats")
    ports = {name: {"client": _free_port(), "route": _free_port(), "http": _free_port()} for name in names}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name in names:
            config = nats_of(name)
            text = nats_file(name).read_text(encoding="utf-8")
            moves = {config["listen"]: f"127.0.0.1:{ports[name]['client']}",
                     config["cluster"]["listen"]: f"127.0.0.1:{ports[name]['route']}",
                     config["http"]: f"127.0.0.1:{ports[name]['http']}",
                     config["jetstream"]["store_dir"]: f'"{tmp_path / name}"'}
            moves |= {f"nats-route://{other}:{host_port(config['cluster']['listen'])[1]}":
                      f"nats-route://127.0.0.1:{ports[other]['route']}" for other in names if other != name}
            for old, new in moves.items():
                assert text.count(old) == 1, old
                text = text.replace(old, new)
            assert "0.0.0.0" not in text  # loopback only
            path = tmp_path / f"{name}.conf"
            path.write_text(text, encoding="utf-8")
            log = tmp_path / f"{name}.log"
            processes.append(subprocess.Popen([nats_server_binary(), "-c", str(path), "-l", str(log)],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        healthy: set[str] = set()
        while healthy != set(names):
            assert time.monotonic() < deadline, f"healthy: {sorted(healthy)}"
            assert all(p.poll() is None for p in processes), "a nats-server exited (see its log)"
            for name in set(names) - healthy:
                try:
                    _get_json(f"http://127.0.0.1:{ports[name]['http']}/healthz")
                    healthy.add(name)
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.2)
        for name in names:
            varz = _get_json(f"http://127.0.0.1:{ports[name]['http']}/varz")
            assert varz["server_name"] == name and varz["host"] == "127.0.0.1"
            assert varz["jetstream"]["config"]["sync_always"] is True
            assert varz["max_payload"] == EMBEDDED_MAX_PAYLOAD
        leader = _get_json(f"http://127.0.0.1:{ports[names[0]]['http']}/jsz")["meta_cluster"]["leader"]
        meta = _get_json(f"http://127.0.0.1:{ports[leader]['http']}/jsz")["meta_cluster"]
        assert meta["cluster_size"] == 3 and meta["name"] == nats_of(names[0])["cluster"]["name"]
        assert {leader, *(r["name"] for r in meta["replicas"] if r["current"])} == set(names)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
