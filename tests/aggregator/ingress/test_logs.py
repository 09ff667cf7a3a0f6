"""``--log-format json``: every line the server writes is a JSON object with an event name; the log holds
none of what the test sent that is private (tokens, report ids, codes, peer addresses); ``text`` keeps
the lines people read."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.serving.observe import events
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import ServerProcess

from ..conftest import RATINGS, batch, make_reports, submit
from .test_auth import write_tokens

StartProcess = Callable[..., ServerProcess]
TOKEN = "log-test-token-d41d8cd98f00"
CODE = 987654321


def test_json_lines_with_events_and_nothing_private(start_process: StartProcess, collection_files: list[Path],
                                                   tmp_path: Path, rng: np.random.Generator) -> None:
    tokens = write_tokens(tmp_path, [{"id": "device-l", "token": TOKEN, "collections": "*", "roles": ["submit"]}])
    args = ["--data-dir", str(tmp_path / "data"), "--port", "0", "--shards", "2", "--tokens", str(tokens),
            "--log-format", "json", "--metrics-port", "0", "--grace", "2"]
    for path in collection_files:
        args += ["--collection", str(path)]
    proc = start_process(*args)
    listening = json.loads(proc.stdout[-1])
    assert listening["metrics"].startswith("http://127.0.0.1:")
    stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(proc.address))
    metadata = [("authorization", f"Bearer {TOKEN}")]
    sent = [make_reports(RATINGS, 200, rng) for _ in range(3)]
    assert submit(stub, [batch(r, sequence=i) for i, r in enumerate(sent)], metadata=metadata)[1] == grpc.StatusCode.OK
    bad = make_reports(RATINGS, 20, rng)
    bad.private_codes[3] = CODE
    sent.append(bad)
    assert submit(stub, [batch(bad)], metadata=metadata)[1] == grpc.StatusCode.INVALID_ARGUMENT
    assert submit(stub, [batch(make_reports(RATINGS, 5, rng))],
                  metadata=[("authorization", "Bearer wrong-token-5e6f")])[1] == grpc.StatusCode.UNAUTHENTICATED
    assert proc.terminate() == 0

    lines = [line for line in proc.log().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert all({"time", "level", "logger", "event", "message"} <= set(r) for r in records)
    named = {r["event"] for r in records}
    assert {"replica.serving", "rpc.refused", "replica.stopping", "replica.stopped"} <= named, named
    serving = next(r for r in records if r["event"] == "replica.serving")
    assert serving["collections"] == ["graph", "ratings"] and serving["shards"] == 2 and serving["metrics"] is True
    refused = [r for r in records if r["event"] == "rpc.refused"]
    assert {(r["method"], r["code"]) for r in refused} == {("SubmitReports", "INVALID_ARGUMENT"),
                                                          ("SubmitReports", "UNAUTHENTICATED")}
    text = proc.log()
    for secret in (TOKEN, "wrong-token-5e6f", str(CODE), "ipv4:", "ipv6:",
                   *(bytes(i).hex() for r in sent for i in r.report_ids)):
        assert secret not in text, secret


def test_text_format_and_fields_that_may_not_be_logged() -> None:
    out = StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level  # pytest's own, put back below
    events.configure("text", stream=out, force=True)
    try:
        events.get("ldpsynth.test").info("replica.serving", "serving ['ratings'] on 127.0.0.1:1", shards=2)
        with pytest.raises(ValueError, match="token"):
            events.get("ldpsynth.test").info("x", "y", token="secret")
        events.configure("json", stream=StringIO())  # the root logger has handlers: nothing changes
        events.configure("json", stream=out, force=True)
        logging.getLogger("nats.aio.client").warning("a library's line")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    first, second = out.getvalue().splitlines()
    assert first.endswith("INFO ldpsynth.test: serving ['ratings'] on 127.0.0.1:1")
    assert json.loads(second) | {"time": None} == {"time": None, "level": "warning", "logger": "nats.aio.client",
                                                   "event": "log", "message": "a library's line"}
    with pytest.raises(ValueError, match="--log-format"):
        events.configure("yaml")
