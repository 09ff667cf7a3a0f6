"""A real Prometheus (Debian's ``prometheus`` package) scrapes a replica on 127.0.0.1 under load, with the
committed configuration (``docker/prometheus/prometheus.yml``, its targets moved to the replica) and alert
rules (``docker/prometheus/alerts.yml``); then every panel query of ``docker/grafana/dashboards/ldpsynth.json``
and every alert rule is evaluated on what it scraped.

The load: three report streams, retries (duplicates), refused batches (a code out of range, an unknown
collection, a credential over its quota), queries and an export, a shard worker killed and restarted by
Ray, then the other worker killed for good (batches left unacknowledged, the replica NOT_SERVING). Every
panel shows data; the rules that describe that state return it, the others return nothing; Prometheus
evaluated every rule without error.

Prometheus binds 127.0.0.1, keeps its data in the test's directory and is stopped by its PID. Outside CI
the test is skipped when the binary is absent (``apt-get install prometheus``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import ray
import yaml

from ldpsynth.aggregator.ingress.ingest import route
from ldpsynth.aggregator.runtime.nats_process import _free_port
from ldpsynth.client import RetryPolicy
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, ServerThread, batch, make_reports, submit
from ..scrape import scrape, value

StartServer = Callable[..., ServerThread]
ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS_DIR = ROOT / "docker" / "prometheus"
DASHBOARD = ROOT / "docker" / "grafana" / "dashboards" / "ldpsynth.json"
#: The rules whose expressions describe the state the load ends in (the others must return nothing).
EXPECTED_ALERTS = {"LdpsynthReplicaNotServing", "LdpsynthShardWorkerNotReady", "LdpsynthReportsUnacknowledged",
                   "LdpsynthManyReportsRefused"}


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Debian's prometheus package (.ci/run), but no prometheus binary is on PATH")
        pytest.skip("the prometheus binary is absent (apt-get install prometheus)")
    return found


def get(url: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(url + query, timeout=10) as answer:
        return json.loads(answer.read())


class Prometheus:
    """A Prometheus server on 127.0.0.1 with the committed rules, scraping ``target`` every second."""

    def __init__(self, directory: Path, target: str):
        config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text(encoding="utf-8"))
        [job] = [job for job in config["scrape_configs"] if job["job_name"] == "ldpsynth-replica"]
        job["static_configs"] = [{"targets": [target]}]
        config["scrape_configs"] = [job]  # the Ray job scrapes Ray nodes' own metrics: none here
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(PROMETHEUS_DIR / "alerts.yml")]
        path = directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(directory / "prometheus.log", "wb")
        self.proc = subprocess.Popen([prometheus_binary(), f"--config.file={path}",
                                      f"--storage.tsdb.path={directory / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def wait_scraping(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, (Path(self.log.name)).read_text()[-3000:]
            try:
                targets = get(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
                if targets and all(t["health"] == "up" for t in targets):
                    return
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, "Prometheus did not scrape the replica"
            time.sleep(0.2)

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = get(f"{self.url}/api/v1/query", query=expr)
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self.log.close()


@pytest.fixture
def prometheus_dir(tmp_path: Path) -> Path:
    prometheus_binary()
    directory = tmp_path / "prometheus"
    directory.mkdir()
    return directory


def stream(address: str, batches: int, seed: int, results: list[Any]) -> None:
    """One report stream of ``batches`` batches of 200 reports; appends ``(acks, code, details, batches)``."""
    stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(address))
    rng = np.random.default_rng(seed)
    sent = [batch(make_reports(RATINGS, 200, rng), sequence=i) for i in range(batches)]
    results.append((*submit(stub, sent), sent))


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def panel_queries() -> Iterator[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def test_prometheus_scrapes_a_replica_and_every_panel_and_rule_evaluates(
        start_server: StartServer, prometheus_dir: Path, rng: np.random.Generator) -> None:
    server = start_server(metrics_port=0, limits=Limits(max_rows_per_client=20_000))
    url = server.server.metrics_url
    assert url is not None
    prometheus = Prometheus(prometheus_dir, url.split("//", 1)[1].split("/", 1)[0])
    try:
        prometheus.wait_scraping()
        stub = pb_grpc.CollectionServiceStub(server.channel())

        # Three report streams at once, then two batches sent again.
        results: list[Any] = []
        threads = [threading.Thread(target=stream, args=(server.address, 20, seed, results)) for seed in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [result[1] for result in results] == [grpc.StatusCode.OK] * 3
        assert [ack.duplicates for ack in submit(stub, results[0][3][:2])[0]] == [200, 200]
        # Refused: two batches with a code out of range, one for an unknown collection, one over the quota.
        for _ in range(2):
            bad = make_reports(RATINGS, 2000, rng)
            bad.private_codes[0] = 10**6
            assert submit(stub, [batch(bad)])[1] == grpc.StatusCode.INVALID_ARGUMENT
        unknown = batch(make_reports(RATINGS, 300, rng))
        unknown.collection = "nope"
        assert submit(stub, [unknown])[1] == grpc.StatusCode.FAILED_PRECONDITION
        assert submit(stub, [batch(make_reports(RATINGS, 9000, rng))])[1] == grpc.StatusCode.RESOURCE_EXHAUSTED
        with QueryClient(server.address, retry=RetryPolicy(max_attempts=1)) as analyst:
            for _ in range(3):
                assert analyst.estimate("ratings", queries=[{"kind": "marginal", "attributes": ["rating"]}]).n == 12_000
            assert len(analyst.export("ratings")) == 12_000

        # Shard 0's worker killed; Ray restarts it; the replica sees it restore, behind its log, then ready.
        ray.kill(server.server.workers.actor(0), no_restart=False)
        wait_until(lambda: value(scrape(url), "ldpsynth_shard_worker_restarts_total", shard="0") == 1
                   and value(scrape(url), "ldpsynth_shard_worker_state", shard="0", state="ready") == 1,
                   "shard 0 restarted and ready")
        stream(server.address, 5, 7, results)
        assert results[-1][1] == grpc.StatusCode.OK
        time.sleep(3)  # Prometheus scrapes the healthy state a few times

        # Shard 1's worker killed for good: batches cannot commit, the replica turns NOT_SERVING.
        ray.kill(server.server.workers.actor(1), no_restart=True)
        lost = make_reports(RATINGS, 200, rng)
        acks, code, _ = submit(stub, [batch(lost)])
        assert (acks, code) == ([], grpc.StatusCode.UNAVAILABLE)
        stored_part = int((route(lost.report_ids, 2) == 0).sum())  # not acknowledged; shard 0's part is stored
        wait_until(lambda: value(scrape(url), "ldpsynth_replica_serving", service="all") == 0, "NOT_SERVING")
        time.sleep(4)  # scraped, and the rules evaluated, in that state

        shown = {}
        for title, expr in panel_queries():
            result = prometheus.query(expr)
            assert result, f"panel {title!r} shows nothing: {expr}"
            shown[(title, expr)] = {json.dumps(r["metric"], sort_keys=True): r["value"][1] for r in result}
        print(json.dumps({f"{title} | {expr}": series for (title, expr), series in shown.items()}, indent=1))

        def panel(title: str, expr_part: str = "", nonzero: bool = False) -> dict[str, float]:
            [(key, series)] = [(k, v) for k, v in shown.items() if k[0] == title and expr_part in k[1]]
            return {json.dumps({n: m for n, m in json.loads(labels).items() if n not in ("instance", "job")},
                               sort_keys=True): float(v) for labels, v in series.items() if float(v) or not nonzero}

        assert panel("Reports stored per collection") == {'{"collection": "graph"}': 0.0,
                                                          '{"collection": "ratings"}': 13_000.0 + stored_part}
        assert panel("Shard worker restarts") == {'{"shard": "0"}': 1.0, '{"shard": "1"}': 0.0}
        assert panel("Shard worker state") == {'{"shard": "0", "state": "ready"}': 1.0,
                                               '{"shard": "1", "state": "unreachable"}': 1.0}
        assert panel("Replicas serving") == {'{"__name__": "ldpsynth_replica_serving", "service": "all"}': 0.0}
        assert set(panel("Reports refused per second, by reason", nonzero=True)) == {
            '{"reason": "invalid"}', '{"reason": "wrong_state"}', '{"reason": "quota"}'}
        assert set(panel("Reports acknowledged per second", nonzero=True)) == {'{"outcome": "accepted"}',
                                                                               '{"outcome": "duplicate"}'}
        assert set(panel("Reports not acknowledged per second", nonzero=True)) == {'{"reason": "shard_unavailable"}'}
        assert panel("Quota refusals (5 min)", nonzero=True) == {'{"collection": "ratings"}': pytest.approx(1, rel=.5)}
        latency = panel("Query latency, p99 by kind")
        assert set(latency) == {'{"kind": "estimate"}', '{"kind": "export"}'}
        assert all(0 < v < 60 for v in latency.values())
        assert all(0 < v < 10 for v in panel("Commit latency (admission to acknowledgement)", "0.99").values())
        assert all(0 < v < 10 for v in panel("Log append latency, p99 by shard").values())
        assert 200 <= panel("Reports per batch", "0.5")["{}"] <= panel("Reports per batch", "0.99")["{}"] <= 9000
        calls = panel("Calls per second, by method and status", nonzero=True)
        assert {json.loads(k)["grpc_code"] for k in calls} == {"OK", "INVALID_ARGUMENT", "FAILED_PRECONDITION",
                                                             "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
        assert panel("Epsilon delivered per collection")['{"collection": "ratings"}'] == pytest.approx(1.0, rel=1e-3)

        # Every rule loaded and evaluated without error; the ones describing this state return it.
        wait_until(lambda: all(rule["lastEvaluation"] > "2000" for group in get(
            f"{prometheus.url}/api/v1/rules")["data"]["groups"] for rule in group["rules"]), "rule evaluations", 30)
        rules = [rule for group in get(f"{prometheus.url}/api/v1/rules")["data"]["groups"] for rule in group["rules"]]
        committed = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text(encoding="utf-8"))
        assert sorted(r["name"] for r in rules) == sorted(r["alert"] for g in committed["groups"] for r in g["rules"])
        assert all(rule["health"] == "ok" and not rule.get("lastError") for rule in rules), rules
        returning = {rule["name"] for rule in rules if prometheus.query(rule["query"])}
        assert returning == EXPECTED_ALERTS
        active = {alert["labels"]["alertname"]: alert["state"] for alert in
                  get(f"{prometheus.url}/api/v1/alerts")["data"]["alerts"]}
        assert set(active) == EXPECTED_ALERTS and set(active.values()) <= {"pending", "firing"}
    finally:
        prometheus.stop()
