"""A data directory proves it is the one the server wrote, or is refused (issue 16, item 1).

A data directory holds the log (the store of record, the embedded NATS server's JetStream store)
and each shard worker's snapshot (a view of the log). One populated directory is copied and
damaged in one way per case:

* damage to the log or to what ties the directory to it (``layout.json`` edited, deleted with
  another ``--shards``, garbage; the log deleted, replaced by another deployment's, a stream
  missing; a record flipped or cut off) is refused at start: one line naming the file or stream
  and what is wrong, exit 2;
* damage to a snapshot (a flipped byte, a truncated or missing file, two shards' snapshots
  swapped) is detected by its checksums and identity and the snapshot is rebuilt from the log:
  every acknowledged report is served, and resubmitting them stores none again.
"""

from __future__ import annotations

import glob
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, ServerThread, base_config, batch, make_reports, stored_rows, submit

StartServer = Callable[..., ServerThread]


@pytest.fixture(scope="module")
def populated(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Reports]]:
    """A stopped server's data directory (each case damages a copy of it): 2 shards, 6,000
    acknowledged reports, snapshots written."""
    data = tmp_path_factory.mktemp("populated") / "original"
    server = ServerThread(base_config(data, shards=2, snapshot_ids=1000))
    try:
        stub = pb_grpc.CollectionServiceStub(server.channel())
        rng = np.random.default_rng(1)
        sent = [make_reports(RATINGS, 1000, rng) for _ in range(6)]
        acks, code, _ = submit(stub, [batch(r) for r in sent])
        assert code == grpc.StatusCode.OK and sum(a.accepted for a in acks) == 6000
    finally:
        server.stop()
    assert list((data / "shards" / "shard-000").glob("ids-*.run")), "snapshots were written"
    return data, sent


def streams(data: Path) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(data / "log" / "jetstream" / "$G" / "streams" / "LDPSYNTH_*")))


def refused(data: Path, files: list[Path], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """Serve ``data``: it must be refused with one line on stderr and exit 2; return that line."""
    args = ["serve", "--data-dir", str(data), "--port", "0"]
    for f in files:
        args += ["--collection", str(f)]
    assert aggregator_main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def copy_of(data: Path, target: Path) -> Path:
    shutil.copytree(data, target)
    return target


def flip(path: Path, at: int) -> None:
    content = bytearray(path.read_bytes())
    content[at] ^= 0x01
    path.write_bytes(bytes(content))


LOG_DAMAGE: dict[str, tuple[Callable[[Path], None], str, tuple[str, ...]]] = {
    "layout.json edited to 3 shards": (
        lambda d: (d / "layout.json").write_text((d / "layout.json").read_text().replace('"shards": 2', '"shards": 3')),
        "layout.json: says 3 shards, the log holds 2", ()),
    "layout.json deleted, --shards 3": (lambda d: (d / "layout.json").unlink(), "holds 2 shards", ("--shards", "3")),
    "layout.json garbage": (lambda d: (d / "layout.json").write_bytes(b"\xff\xfe garbage"), "layout.json", ()),
    "log deleted": (lambda d: shutil.rmtree(d / "log"), "the log has no layout, but this data directory belongs", ()),
    "a stream deleted": (lambda d: shutil.rmtree(streams(d)[1]), "_001 (shard 1 of 2) is missing", ()),
    "a record flipped": (lambda d: _flip_record(d, 3), "log of shard 0", ()),
    "records cut off": (lambda d: _cut_records(d), "_000 has lost records", ()),
}


def _blocks(data: Path, shard: int) -> Path:
    (block,) = glob.glob(str(streams(data)[shard] / "msgs" / "*.blk"))
    return Path(block)


def _flip_record(data: Path, which: int) -> None:
    """Flip a byte inside the ``which``-th record of shard 0, and drop the snapshots (so the
    restart reads it: a damaged old record is otherwise found when it is read, by export or verify)."""
    block = _blocks(data, 0)
    content = block.read_bytes()
    at = [i for i in range(len(content)) if content.startswith(b"LDPSLOG1", i)][which]
    flip(block, at + 200)
    shutil.rmtree(data / "shards")


def _cut_records(data: Path) -> None:
    """Cut shard 0's log in half: acknowledged records lost behind the snapshot's sequence."""
    block = _blocks(data, 0)
    block.write_bytes(block.read_bytes()[:block.stat().st_size // 2])


@pytest.mark.parametrize("case", sorted(LOG_DAMAGE))
def test_damaged_log_or_layout_is_refused_at_start(populated: tuple[Path, list[Reports]], case: str,
                                                   collection_files: list[Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = populated
    damage, fragment, extra = LOG_DAMAGE[case]
    copy = copy_of(data, tmp_path / "damaged")
    damage(copy)
    line = refused(copy, collection_files, capsys, *extra)
    assert fragment in line, line
    assert "Traceback" not in line


def test_another_deployments_log_is_refused(populated: tuple[Path, list[Reports]], start_server: StartServer,
                                            collection_files: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = populated
    other = start_server(shards=2)
    other.stop()
    copy = copy_of(data, other.config.data_dir.parent / "mixed")
    shutil.rmtree(copy / "log")
    shutil.copytree(other.config.data_dir / "log", copy / "log")
    assert "they are from different deployments" in refused(copy, collection_files, capsys)


SNAPSHOT_DAMAGE: dict[str, Callable[[Path], None]] = {
    "a run file flipped": lambda d: flip(sorted((d / "shards" / "shard-000").glob("ids-*.run"))[0], 700),
    "the state truncated": lambda d: [p.write_bytes(p.read_bytes()[:64])
                                      for p in (d / "shards" / "shard-001").glob("state-*.bin")],
    "a run file missing": lambda d: sorted((d / "shards" / "shard-001").glob("ids-*.run"))[0].unlink(),
    "the shards' snapshots swapped": lambda d: _swap(d / "shards" / "shard-000", d / "shards" / "shard-001"),
    "garbage manifest": lambda d: (d / "shards" / "shard-000" / "MANIFEST").write_bytes(b"garbage"),
}


def _swap(a: Path, b: Path) -> None:
    a.rename(a.with_name("tmp"))
    b.rename(a)
    a.with_name("tmp").rename(b)


@pytest.mark.parametrize("case", sorted(SNAPSHOT_DAMAGE))
def test_damaged_snapshot_is_rebuilt_and_nothing_is_stored_twice(populated: tuple[Path, list[Reports]], case: str,
                                                                 start_server: StartServer, tmp_path: Path) -> None:
    data, sent = populated
    copy = copy_of(data, tmp_path / "snapshot-damaged")
    SNAPSHOT_DAMAGE[case](copy)
    server = start_server(data_dir=copy, shards=2)
    assert stored_rows(server, "ratings") == 6000
    acks, code, _ = submit(pb_grpc.CollectionServiceStub(server.channel()), [batch(r) for r in sent])
    assert code == grpc.StatusCode.OK
    assert [a.duplicates for a in acks] == [1000] * 6
    assert stored_rows(server, "ratings") == 6000


def test_verify_command_reads_every_record(populated: tuple[Path, list[Reports]], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``ldpsynth aggregator verify``: exit 0 and the rows on a sound log; exit 1 naming the record
    on a damaged one (an old record, before the snapshots: found by reading, as export would)."""
    data, _ = populated
    assert aggregator_main(["verify", "--data-dir", str(data)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["rows"] == {"ratings": 6000} and report["shards"] == 2
    copy = copy_of(data, tmp_path / "verify-damaged")
    block = _blocks(copy, 1)
    content = block.read_bytes()
    flip(block, [i for i in range(len(content)) if content.startswith(b"LDPSLOG1", i)][2] + 200)
    assert aggregator_main(["verify", "--data-dir", str(copy)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and "log of shard 1" in report["problems"][0]
