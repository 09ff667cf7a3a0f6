"""``aggregator verify`` answers what ``aggregator serve`` does, and an index is bound to its log.

* **verify = serve.** Each damaged data directory is given to ``serve`` and to ``verify``: a
  store that ``serve`` refuses (one line on stderr, exit 2) is one that ``verify`` reports with
  the same words (JSON on stdout, exit 1), whatever the damage, including a log that cannot be
  opened; the refusal says what the operator does next. A log shorter than what was
  acknowledged is never served silently, not even after ``DIR/shards`` was deleted; it is served
  only with ``--accept-lost-records``, which records the loss in the data directory, where later
  starts and ``verify`` report it.
* **An index bound to its log.** A run file from another data directory put under a name the
  MANIFEST lists, a whole snapshot from another data directory, a run file of an earlier
  snapshot: the shard worker refuses them and rebuilds its index from the log, and says so in
  the aggregator's own log; a whole earlier snapshot of the same directory is still a true view
  of the log's prefix and is used. Re-sending every acknowledged report then stores none again.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.storage.checked_file import read_checked, write_checked
from ldpsynth.aggregator.storage.idstore import RUN_KIND
from ldpsynth.aggregator.storage.snapshot import MANIFEST, MANIFEST_KIND, STATE_KIND
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, ServerThread, base_config, batch, make_reports, stored_rows, submit
from ..storage.test_store_identity import copy_of, streams

StartServer = Callable[..., ServerThread]


@pytest.fixture(scope="module")
def history(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A data directory served twice: 3,000 reports, stopped, copied whole (``backup``: an older
    log and older snapshots), then 3,000 more and stopped. Also another data directory of the same
    collections (``other``, another deployment) with 500 reports."""
    root = tmp_path_factory.mktemp("history")
    data, backup, other = root / "data", root / "backup", root / "other"
    rng = np.random.default_rng(12)
    sent: list[Reports] = []
    for round_ in range(2):
        server = ServerThread(base_config(data, shards=2, snapshot_ids=1000))
        try:
            stub = pb_grpc.CollectionServiceStub(server.channel())
            reports = [make_reports(RATINGS, 1000, rng) for _ in range(3)]
            acks, code, _ = submit(stub, [batch(r) for r in reports])
            assert code == grpc.StatusCode.OK and sum(a.accepted for a in acks) == 3000
            sent += reports
        finally:
            server.stop()
        if round_ == 0:
            shutil.copytree(data, backup)
    server = ServerThread(base_config(other, shards=2, snapshot_ids=100))
    try:
        acks, code, _ = submit(pb_grpc.CollectionServiceStub(server.channel()),
                               [batch(make_reports(RATINGS, 500, rng))])
        assert code == grpc.StatusCode.OK
    finally:
        server.stop()
    return {"data": data, "backup": backup, "other": other, "sent": sent}


def serve_refusal(data: Path, files: list[Path], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """``serve`` on ``data``: refused with one line on stderr and exit 2; the line."""
    args = ["serve", "--data-dir", str(data), "--port", "0"]
    for f in files:
        args += ["--collection", str(f)]
    assert aggregator_main([*args, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def verify_report(data: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = aggregator_main(["verify", "--data-dir", str(data)])
    captured = capsys.readouterr()
    return status, json.loads(captured.out)


def _cut_log(data: Path, shard: int = 0) -> None:
    """Cut shard ``shard``'s log file in half with NATS's stream index gone: the log is shorter
    than what was acknowledged (and than the shard's snapshot)."""
    (block,) = (streams(data)[shard] / "msgs").glob("*.blk")
    block.write_bytes(block.read_bytes()[:block.stat().st_size // 2])
    for index in (streams(data)[shard] / "msgs").glob("index.db"):
        index.unlink()


def _older_log(data: Path, backup: Path) -> None:
    shutil.rmtree(data / "log")
    shutil.copytree(backup / "log", data / "log")


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _flip_record(data: Path) -> None:
    """Flip a byte inside the third reports record of shard 0 and delete the snapshots (a start
    replays it, as verify reads it)."""
    (block,) = (streams(data)[0] / "msgs").glob("*.blk")
    content = block.read_bytes()
    _flip(block, [i for i in range(len(content)) if content.startswith(b"LDPSLOG1", i)][3] + 200)
    shutil.rmtree(data / "shards")


def _edit_layout(data: Path) -> None:
    layout = data / "layout.json"
    layout.write_text(layout.read_text().replace('"shards": 2', '"shards": 3'))


def _to_main_format(data: Path) -> None:
    """Rewrite a data directory as main 5612345 wrote it: ``layout.json`` format 2, no
    ``DIR/acknowledged``, files without identities (a run says its count, the manifest lists
    files by name)."""
    layout = json.loads((data / "layout.json").read_text())
    layout["format"] = "ldpsynth.data-dir/2"
    (data / "layout.json").write_text(json.dumps(layout, indent=2) + "\n")
    shutil.rmtree(data / "acknowledged")
    for shard_dir in sorted((data / "shards").glob("shard-*")):
        meta, _ = read_checked(shard_dir / MANIFEST, MANIFEST_KIND)
        runs: dict[str, list[str]] = {}
        for name, c in meta["collections"].items():
            runs[name] = [r["file"] for r in c["runs"]]
            for run in runs[name]:
                run_meta, arrays = read_checked(shard_dir / run, RUN_KIND, mmap=False)
                write_checked(shard_dir / run, "ldpsynth.id-run/1", {"count": run_meta["count"]}, arrays)
        state_file = meta["state"]["file"]
        state, arrays = read_checked(shard_dir / state_file, STATE_KIND, mmap=False)
        write_checked(shard_dir / state_file, "ldpsynth.shard-state/1",
                      {k: state[k] for k in ("layout", "shard", "offset", "collections", "quota")}, arrays)
        write_checked(shard_dir / MANIFEST, "ldpsynth.shard-manifest/1", {
            "layout": meta["layout"], "shard": meta["shard"], "offset": meta["offset"], "total": meta["total"],
            "state": state_file,
            "collections": {n: {"card": c["card"], "runs": runs[n]} for n, c in meta["collections"].items()}})


DAMAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "log cut behind the snapshot": (lambda d, b: _cut_log(d), "acknowledged records were lost"),
    "log cut, DIR/shards deleted": (lambda d, b: (_cut_log(d), shutil.rmtree(d / "shards")),
                                    "acknowledged records were lost"),
    "older log restored": (_older_log, "acknowledged records were lost"),
    "older log restored, DIR/shards deleted": (lambda d, b: (_older_log(d, b), shutil.rmtree(d / "shards")),
                                               "acknowledged records were lost"),
    "layout.json edited": (lambda d, b: _edit_layout(d), "says 3 shards, the log holds 2"),
    "log deleted": (lambda d, b: shutil.rmtree(d / "log"), "the log has no layout"),
    "a stream deleted": (lambda d, b: shutil.rmtree(streams(d)[1]), "is missing"),
    "a store of main 5612345, older log restored": (lambda d, b: (_to_main_format(d), _older_log(d, b)),
                                                    "acknowledged records were lost"),
    "DIR/acknowledged deleted": (lambda d, b: shutil.rmtree(d / "acknowledged"), "acknowledged/shard-000: missing"),
    "a record flipped, DIR/shards deleted": (lambda d, b: _flip_record(d), "restore the log from a backup"),
    "an acknowledged file damaged": (lambda d, b: _flip(d / "acknowledged" / "shard-001", 20), "checksum mismatch"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_serve_and_verify_answer_alike(history: dict[str, Any], case: str, collection_files: list[Path],
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    damage, fragment = DAMAGE[case]
    copy = copy_of(history["data"], tmp_path / "damaged")
    damage(copy, history["backup"])
    line = serve_refusal(copy, collection_files, capsys)
    status, report = verify_report(copy, capsys)
    assert status == 1 and report["ok"] is False, report
    assert line.startswith("ldpsynth aggregator: error: ")
    assert line[len("ldpsynth aggregator: error: "):] in report["problems"], (line, report["problems"])
    assert fragment in line
    if fragment == "acknowledged records were lost":
        assert "--accept-lost-records" in line  # what the operator does next
    # Refused again: the refusal left nothing behind that would let a second start through.
    assert serve_refusal(copy, collection_files, capsys) == line


def test_a_sound_store_verifies_and_serves(history: dict[str, Any], start_server: StartServer,
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = copy_of(history["data"], tmp_path / "sound")
    status, report = verify_report(copy, capsys)
    assert status == 0 and report["ok"] and report["problems"] == [] and report["rows"] == {"ratings": 6000}
    server = start_server(data_dir=copy, shards=2)
    assert stored_rows(server, "ratings") == 6000


def test_a_store_of_main_5612345_is_upgraded_from_its_log(
        history: dict[str, Any], start_server: StartServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """Files without identities cannot be checked against the log: the snapshots are rebuilt from
    it (verify says so first), the acknowledged files are written and ``layout.json`` says they are kept."""
    copy = copy_of(history["data"], tmp_path / "old")
    _to_main_format(copy)
    status, report = verify_report(copy, capsys)
    assert status == 0 and report["ok"], report
    assert len([n for n in report["notes"] if "written by an earlier ldpsynth" in n]) == 2
    assert json.loads((copy / "layout.json").read_text())["format"] == "ldpsynth.data-dir/2"  # verify wrote nothing
    with caplog.at_level(logging.WARNING, logger="ldpsynth.aggregator.runtime.backend"):
        server = start_server(data_dir=copy, shards=2)
    assert [n for n in report["notes"]] == [r.getMessage() for r in caplog.records if "earlier ldpsynth" in
                                             r.getMessage()]
    acks, code, _ = submit(pb_grpc.CollectionServiceStub(server.channel()), [batch(r) for r in history["sent"]])
    assert code == grpc.StatusCode.OK and sum(a.duplicates for a in acks) == 6000
    assert stored_rows(server, "ratings") == 6000
    server.stop()
    assert json.loads((copy / "layout.json").read_text())["format"] == "ldpsynth.data-dir/3"
    assert sorted(p.name for p in (copy / "acknowledged").iterdir()) == ["shard-000", "shard-001"]
    status, report = verify_report(copy, capsys)
    assert status == 0 and report["notes"] == [], report


def test_verify_never_creates_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing data directory is a usage error (exit 2, one line), and verify creates nothing;
    an empty one is not a store (JSON, exit 1)."""
    assert aggregator_main(["verify", "--data-dir", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    (tmp_path / "empty").mkdir()
    status, report = verify_report(tmp_path / "empty", capsys)
    assert status == 1 and not report["ok"] and report["problems"]
    assert not (tmp_path / "empty" / "layout.json").exists()


def test_lost_records_are_served_only_when_the_operator_accepts_them(
        history: dict[str, Any], start_server: StartServer, collection_files: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    copy = copy_of(history["data"], tmp_path / "restored")
    _older_log(copy, history["backup"])
    shutil.rmtree(copy / "shards")
    serve_refusal(copy, collection_files, capsys)
    with caplog.at_level(logging.WARNING):
        server = start_server(data_dir=copy, shards=2, accept_lost_records=True)
    assert stored_rows(server, "ratings") == 3000  # what the older log holds
    assert "acknowledged records given up" in caplog.text
    server.stop()
    status, report = verify_report(copy, capsys)
    assert status == 0 and report["ok"], report
    assert report["losses"] and all("--accept-lost-records" in loss for loss in report["losses"])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = start_server(data_dir=copy, shards=2)  # accepted once: later starts serve, and say so
    assert stored_rows(again, "ratings") == 3000
    assert "acknowledged records given up" in caplog.text


# ----- an index bound to its log ---------------------------------------------------------------
def _listed_runs(shard_dir: Path) -> list[Path]:
    return sorted(shard_dir.glob("ids-*.run"))  # unlisted runs are deleted after each snapshot


def _foreign_run(data: Path, h: dict[str, Any]) -> None:
    target = _listed_runs(data / "shards" / "shard-000")[0]
    target.write_bytes(_listed_runs(h["other"] / "shards" / "shard-000")[0].read_bytes())


def _foreign_snapshot(data: Path, h: dict[str, Any]) -> None:
    shutil.rmtree(data / "shards" / "shard-000")
    shutil.copytree(h["other"] / "shards" / "shard-000", data / "shards" / "shard-000")


def _earlier_run(data: Path, h: dict[str, Any]) -> None:
    target = _listed_runs(data / "shards" / "shard-000")[0]
    target.write_bytes(_listed_runs(h["backup"] / "shards" / "shard-000")[0].read_bytes())


def _earlier_snapshot(data: Path, h: dict[str, Any]) -> None:
    shutil.rmtree(data / "shards")
    shutil.copytree(h["backup"] / "shards", data / "shards")


INDEX_SWAPS: dict[str, tuple[Callable[[Path, dict[str, Any]], None], str]] = {
    "a run file from another data directory under a listed name": (_foreign_run, "rebuilding it from the log"),
    "a whole snapshot from another data directory": (_foreign_snapshot, "rebuilding it from the log"),
    "a run file of an earlier snapshot under a listed name": (_earlier_run, "rebuilding it from the log"),
    "a whole earlier snapshot of the same directory": (_earlier_snapshot, "records replayed after it"),
}


@pytest.mark.parametrize("case", list(INDEX_SWAPS))
def test_an_index_not_of_this_log_is_never_used(history: dict[str, Any], case: str, start_server: StartServer,
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                caplog: pytest.LogCaptureFixture) -> None:
    swap, said = INDEX_SWAPS[case]
    copy = copy_of(history["data"], tmp_path / "swapped")
    swap(copy, history)
    status, report = verify_report(copy, capsys)
    assert status == 0 and report["ok"], report  # serve repairs it: verify says how, with serve's words
    with caplog.at_level(logging.INFO, logger="ldpsynth.aggregator.runtime.backend"):
        server = start_server(data_dir=copy, shards=2)
    acks, code, _ = submit(pb_grpc.CollectionServiceStub(server.channel()), [batch(r) for r in history["sent"]])
    assert code == grpc.StatusCode.OK
    assert sum(a.accepted for a in acks) == 0 and sum(a.duplicates for a in acks) == 6000
    assert stored_rows(server, "ratings") == 6000
    shard0 = [r.getMessage() for r in caplog.records
              if r.name == "ldpsynth.aggregator.runtime.backend" and r.getMessage().startswith("shard 0:")]
    assert any(said in message for message in shard0), shard0  # in the aggregator's own log
    if said == "rebuilding it from the log":
        assert [m for m in shard0 if said in m][0] in report["notes"]
