"""The aggregator's sealing key on disk and in the log, and the shuffled path's admission without a server:
the key file refused when damaged, foreign, edited or readable by others; one key for every replica
of a cluster; ``ldpsynth aggregator sealing-key``; quotas counted against the shuffler's credential."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.ingress.shuffled import ShuffledIngest
from ldpsynth.aggregator.runtime.backend import BackendError, _open_sealing_key
from ldpsynth.aggregator.runtime.config import ClusterConfig, ConfigError, ServerConfig
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.checked_file import write_checked
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.sealing_key import KIND, SealingKeyError, read_key_file, write_key_file
from ldpsynth.serving.auth import Credential
from ldpsynth.serving.status import status_of
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import OpeningKey, seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb

from ..conftest import RATINGS, RATINGS_CARD, VERSION, make_reports
from ..ingress.test_ingest import Harness

ROOT = Path(__file__).resolve().parents[3]


def test_a_key_file_round_trips_and_is_owner_only_from_its_creation(tmp_path: Path) -> None:
    key = OpeningKey.generate()
    path = tmp_path / "key"
    old = os.umask(0)
    try:
        write_key_file(path, key)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    back = read_key_file(path, "--shuffle-key")
    assert back.key_id == key.key_id and back.private_bytes() == key.private_bytes()
    assert key.private_bytes() not in json.dumps(str(back)).encode()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_a_key_file_others_may_access_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "key"
    write_key_file(path, OpeningKey.generate())
    path.chmod(mode)
    with pytest.raises(SealingKeyError, match=f"mode {mode:04o} lets group or others access it.*chmod 600"):
        read_key_file(path, "--shuffle-key")


def _other_kind(path: Path) -> None:
    write_checked(path, "ldpsynth.something-else/1", {}, {"private_key": np.zeros(32, np.uint8)}, mode=0o600)


def _edited(path: Path) -> None:
    key, other = OpeningKey.generate(), OpeningKey.generate()
    write_checked(path, KIND, {"suite": "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM",
                               "public_key": other.public.public_key.hex(), "key_id": other.key_id.hex()},
                  {"private_key": np.frombuffer(key.private_bytes(), np.uint8)}, mode=0o600)


def _short_key(path: Path) -> None:
    write_checked(path, KIND, {}, {"private_key": np.zeros(31, np.uint8)}, mode=0o600)


def _flipped(path: Path) -> None:
    write_key_file(path, OpeningKey.generate())
    data = bytearray(path.read_bytes())
    data[-8] ^= 0x10
    path.write_bytes(bytes(data))


def _pem(path: Path) -> None:
    path.write_text("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VuBCIEIA==\n-----END PRIVATE KEY-----\n")
    path.chmod(0o600)


@pytest.mark.parametrize("damage, words", [
    (_flipped, "checksum mismatch"), (_other_kind, "where a 'ldpsynth.sealing-key/1' file was expected"),
    (_edited, "does not give the public key"), (_short_key, "no 32-byte private key"),
    (_pem, "not an ldpsynth checked file"), (lambda path: None, "missing"),
], ids=["flipped", "other-kind", "edited", "short", "pem", "missing"])
def test_a_damaged_foreign_or_edited_key_file_is_refused_naming_it(tmp_path: Path, damage, words: str) -> None:
    path = tmp_path / "key"
    damage(path)
    with pytest.raises(SealingKeyError) as info:
        read_key_file(path, "--shuffle-key")
    assert words in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_shuffle_key_is_a_cluster_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--shuffle-key: only with --nats"):
        ServerConfig(data_dir=tmp_path, collections=(RATINGS_CARD,), shuffle_key=tmp_path / "key")
    ServerConfig(data_dir=None, collections=(RATINGS_CARD,), shuffle_key=tmp_path / "key",
                 cluster=ClusterConfig(("nats://127.0.0.1:4222",)))


def test_every_replica_of_a_cluster_holds_the_same_key_or_is_refused(tmp_path: Path) -> None:
    nats = EmbeddedNats(tmp_path / "log")
    url = nats.start()
    keys = {}
    for name in ("a", "b"):
        keys[name] = tmp_path / f"key-{name}"
        write_key_file(keys[name], OpeningKey.generate())

    def config(key: Path | None) -> ServerConfig:
        return ServerConfig(data_dir=None, collections=(RATINGS_CARD,), shuffle_key=key,
                            cluster=ClusterConfig((url,), replicas=1))

    async def open_key(key: Path | None):
        replicated = await ReplicatedLog.connect(LogSettings((url,), replicas=1), name="test")
        try:
            return await _open_sealing_key(config(key), None, replicated)
        finally:
            await replicated.close()

    try:
        assert asyncio.run(open_key(None)) is None  # no key, none registered: no sealed reports
        first = asyncio.run(open_key(keys["a"]))
        assert first is not None and asyncio.run(open_key(keys["a"])).key_id == first.key_id
        with pytest.raises(BackendError, match=f"served with sealing key {first.key_id.hex()}, not"):
            asyncio.run(open_key(keys["b"]))
        with pytest.raises(BackendError, match="give this replica the same key file"):
            asyncio.run(open_key(None))
        keys["a"].chmod(0o644)
        with pytest.raises(BackendError, match="chmod 600"):
            asyncio.run(open_key(keys["a"]))
    finally:
        nats.stop()


def test_the_sealing_key_command_writes_a_new_file_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "cluster.key"
    command = [sys.executable, "-m", "ldpsynth.cli.main", "aggregator", "sealing-key", "--out", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    key = read_key_file(path, "--out")
    assert printed["key_id"] == key.key_id.hex() and printed["public_key"] == key.public.public_key.hex()
    assert "private" not in done.stdout and key.private_bytes().hex() not in done.stdout
    before = path.read_bytes()
    again = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert again.returncode == 2 and "never overwritten" in again.stderr and path.read_bytes() == before


# ----- the shuffled path's admission, without a server ------------------------------------------------


@pytest.fixture
def harness(tmp_path: Path):
    h = Harness(tmp_path, limits=Limits(max_rows_per_client=10))
    yield h
    h.close()


def test_quotas_count_against_the_shufflers_credential(harness: Harness) -> None:
    key = OpeningKey.generate()
    shuffled = ShuffledIngest(harness.catalog, harness.ingestor, key)
    mixer = Credential("mixer", frozenset({"shuffler"}), None)
    other = Credential("mixer-2", frozenset({"shuffler"}), None)
    rng = np.random.default_rng(3)

    def send(credential: Credential, n: int) -> pb.ShuffledAck:
        reports = one_key(n, rng)
        batch = pb.SealedBatch(collection="ratings", key_id=key.key_id,
                               reports=seal_reports(key.public, "ratings", VERSION, reports).tobytes())

        async def go() -> pb.ShuffledAck:
            admission = await shuffled.admit(credential, batch)
            assert admission.admitted is not None
            ack = await harness.ingestor.commit(admission.admitted)
            return admission.ack(ack.accepted, ack.duplicates)
        return harness.run(go())

    try:
        assert send(mixer, 6).accepted == 6
        with pytest.raises(LdpsynthError) as info:
            send(mixer, 5)  # 11 > 10 reports of this shuffler: the whole batch refused
        assert status_of(info.value, "")[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "credential 'mixer'" in str(info.value)
        assert send(mixer, 4).accepted == 4
        assert send(other, 10).accepted == 10  # another shuffler has its own count
        assert harness.stored() == 20
    finally:
        shuffled.close()


def test_without_a_key_sealed_batches_are_refused(harness: Harness) -> None:
    shuffled = ShuffledIngest(harness.catalog, harness.ingestor, None)
    batch = pb.SealedBatch(collection="ratings", key_id=b"\x00" * 16, reports=b"\x00" * 84)
    with pytest.raises(LdpsynthError) as info:
        harness.run(shuffled.admit(Credential("mixer", frozenset({"shuffler"}), None), batch))
    assert status_of(info.value, "")[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert "takes no sealed reports" in str(info.value)
    shuffled.close()


def one_key(n: int, rng: np.random.Generator) -> Reports:
    """``n`` valid reports of one public key (pool key 0), as a shuffler forwards a pool."""
    reports = make_reports(RATINGS, n, rng)
    return Reports(reports.report_ids, reports.private_codes, np.zeros_like(reports.public_codes))


@pytest.mark.parametrize("processes", [0, 2])
def test_opening_on_a_thread_or_in_worker_processes_gives_the_same_counts_and_reports(
        tmp_path: Path, processes: int) -> None:
    harness = Harness(tmp_path)
    key = OpeningKey.generate()
    shuffled = ShuffledIngest(harness.catalog, harness.ingestor, key, processes=processes)
    rng = np.random.default_rng(9)
    reports = one_key(600, rng)
    sealed = seal_reports(key.public, "ratings", VERSION, reports).copy()
    sealed[::7, -3] ^= 1  # 86 reports tampered, spread over every process's part
    batch = pb.SealedBatch(collection="ratings", key_id=key.key_id, sequence=3, reports=sealed.tobytes())
    mixer = Credential("mixer", frozenset({"shuffler"}), None)
    try:
        admission = harness.run(shuffled.admit(mixer, batch))
        assert (admission.reports, admission.undecryptable, admission.invalid) == (600, 86, 0)
        kept = np.ones(600, bool)
        kept[::7] = False
        admitted = np.concatenate([segment.report_ids for _, segment in admission.admitted.parts])
        assert {bytes(i) for i in admitted} == {bytes(i) for i in reports.report_ids[kept]}
    finally:
        shuffled.close()
        harness.close()
