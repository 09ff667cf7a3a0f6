"""``docker/prometheus`` and ``docker/grafana``: Prometheus scrapes every replica and Ray node and loads the
alert rules (checked by promtool where it is installed); Grafana provisions its data source and the dashboard."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.docker.docker_files import (
    DOCKER,
    GRAFANA,
    METRICS_PORT,
    PROMETHEUS,
    SERVICES,
    copied_into,
    dockerfile_instructions,
    exec_form,
    flag,
    serve_argv,
    service_argv,
    services,
)


# ----- monitoring ---------------------------------------------------------------------------------
def prometheus_config() -> dict[str, Any]:
    return yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))


def test_prometheus_scrapes_every_replica_and_ray_node_and_loads_the_alert_rules() -> None:
    jobs = {job["job_name"]: [t for c in job["static_configs"] for t in c["targets"]]
            for job in prometheus_config()["scrape_configs"]}
    assert jobs["ldpsynth-replica"] == [f"{name}:{flag(serve_argv(name), '--metrics-port')}"
                                        for name in services("replica")]
    ray_nodes = [*services("ray-head"), *services("ray-worker"), *services("replica")]
    assert jobs["ray"] == [f"{name}:{flag(service_argv(name)[0], '--metrics-export-port')}" for name in ray_nodes]
    assert all(int(flag(serve_argv(name), "--metrics-port")) == METRICS_PORT for name in services("replica"))
    # The rule file it names is the one the image copies, and the command reads the copied configuration.
    [rules] = prometheus_config()["rule_files"]
    assert copied_into("Dockerfile.prometheus", PurePosixPath(rules)) == PROMETHEUS / "alerts.yml"
    command = exec_form(dockerfile_instructions("Dockerfile.prometheus"), "CMD")
    config = next(word.split("=", 1)[1] for word in command if word.startswith("--config.file="))
    assert copied_into("Dockerfile.prometheus", PurePosixPath(config)) == PROMETHEUS / "prometheus.yml"
    assert set(SERVICES["prometheus"]["networks"]) == {"backend", "monitoring"}  # reaches the replicas' metrics
    assert set(SERVICES["prometheus"]["depends_on"]) == set(services("replica"))


def test_grafana_provisions_the_prometheus_data_source_and_the_committed_dashboard() -> None:
    service = SERVICES["grafana"]
    assert service["networks"] == ["monitoring"] and service["depends_on"] == ["prometheus"]
    mounts = {target: (DOCKER / source).resolve() for source, target, *_ in
              (volume.split(":") for volume in service["volumes"]) if source.startswith("./")}
    assert mounts == {"/etc/grafana/provisioning": GRAFANA / "provisioning",
                      "/var/lib/grafana/dashboards": GRAFANA / "dashboards"}
    [source] = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["type"] == "prometheus"
    [provider] = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "ldpsynth.yml").read_text())["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    dashboard = json.loads((GRAFANA / "dashboards" / "ldpsynth.json").read_text(encoding="utf-8"))
    assert dashboard["uid"] == "ldpsynth" and len(dashboard["panels"]) >= 12
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == source["uid"] and panel["targets"], panel["title"]
        assert all(target["expr"].strip() and target["datasource"]["uid"] == source["uid"]
                   for target in panel["targets"])


def test_prometheus_configuration_and_rules_pass_promtool(tmp_path: Path) -> None:
    """promtool (Debian's prometheus package; tests/aggregator/system/test_prometheus.py runs the server
    itself)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus; .ci/run installs it in CI)")
    rules = subprocess.run([promtool, "check", "rules", str(PROMETHEUS / "alerts.yml")], capture_output=True,
                           text=True, timeout=60)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = prometheus_config()
    config["rule_files"] = [str(PROMETHEUS / "alerts.yml")]  # where the image copies it, here
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    checked = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
