"""A full disk is named as a full disk (issue 16, item 2): the data directory on a small tmpfs.

When the log's storage runs out, a batch is refused RESOURCE_EXHAUSTED (nothing of it is
acknowledged), the server's log names the cause, and the reports acknowledged before stay stored.
A new data directory on a full disk is refused at start with one line saying so.
Needs root to mount the tmpfs (the CI machine runs as root); without it the test is skipped, saying why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from .conftest import RATINGS, ServerThread, batch, make_reports, stored_rows, submit

pytestmark = pytest.mark.ray


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted in the test's directory."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_log_storage_is_resource_exhausted_and_named(small_disk: Path, start_server: Callable[..., ServerThread],
                                                         rng: np.random.Generator,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    server = start_server(data_dir=small_disk / "data", shards=1)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    acknowledged = 0
    with caplog.at_level("ERROR"):
        for _ in range(400):
            acks, code, details = submit(stub, [batch(make_reports(RATINGS, 2000, rng))])
            if code != grpc.StatusCode.OK:
                break
            acknowledged += acks[0].accepted
        else:
            pytest.fail("the 4 MiB disk never filled")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and acks == [], (code, details)
    assert "storage is full" in details
    assert acknowledged > 0 and stored_rows(server, "ratings") == acknowledged
    assert "storage is full" in caplog.text


def test_a_new_data_dir_on_a_full_disk_is_one_line(small_disk: Path, collection_files: list[Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (small_disk / "filler").write_bytes(b"\0" * (4 * 1024 * 1024 - 8192))  # leave less than a block or two
    with pytest.raises(OSError):
        (small_disk / "more").write_bytes(b"\0" * 65536)
    args = ["serve", "--data-dir", str(small_disk / "data"), "--port", "0"]
    for f in collection_files:
        args += ["--collection", str(f)]
    assert aggregator_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "no space left" in err.lower(), err
