"""The Python examples of README.md (the tour) and docs/user-guide.md run against a real aggregator,
and print what they show.

Each document's ``pycon`` blocks run in order as one session that each block continues, with
``target`` the address of an in-process server (the session's Ray cluster, an embedded log): for
the README, a server of ``docker/collections/ratings.json`` that starts empty (the tour's devices fill
it); for the user guide, one of its ``ratings`` collection (movie 1..1682) holding 1,000 perturbed
reports. The served answers the documents compare with the offline ones of the export are the real
server's, so "served equals offline" is checked, not assumed.
"""

from __future__ import annotations

import doctest
import io
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.aggregator.runtime.config import expand_collections, load_collection
from ldpsynth.aggregator.runtime.discovery import expand
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from tests.shuffler.conftest import ShufflerThread

from ..conftest import ServerThread, batch, submit

ROOT = Path(__file__).resolve().parents[3]
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
GUIDE_RATINGS = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 1682, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}]})


def session(document: Path) -> str:
    """The document's ``pycon`` blocks, in order."""
    blocks = re.findall(r"^```pycon\n(.*?)^```$", document.read_text(encoding="utf-8"), re.M | re.S)
    return "\n".join(blocks)


def run_session(document: Path, target: str, **names: str) -> None:
    text = session(document)
    assert text.count(">>>") >= 8, document
    test = doctest.DocTestParser().get_doctest(text, {"target": target, **names}, document.name, str(document), 0)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = io.StringIO()
    runner.run(test, out=report.write)
    assert runner.failures == 0 and runner.tries == text.count(">>>"), report.getvalue()


def test_the_readme_tour_runs_against_a_real_server(start_server: Callable[..., ServerThread], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With the shuffler the tour starts: ``ldpsynth shuffler serve --threshold 500 --max-wait 5
    --anonymous-devices`` in front of the server, which serves every collection of the tour, read as
    ``aggregator serve`` reads them."""
    names = ("ratings.json", "survey-shuffled.json", "lifestyle-wide.json", "hours.json", "words.json")
    loaded = [load_collection(ROOT / "docker" / "collections" / name) for name in names]
    ordinary, wide = expand_collections(item for item in loaded if not isinstance(item, DiscoverySchema))
    store = tmp_path / "ldp-store"
    cards, discoveries = expand([*ordinary, *(item for item in loaded if isinstance(item, DiscoverySchema))], store)
    server = start_server(collections=cards, wide=wide, discoveries=discoveries, data_dir=store)
    shutil.copytree(ROOT / "docker" / "collections", tmp_path / "docker" / "collections")
    monkeypatch.chdir(tmp_path)  # the tour reads docker/collections/ and writes release/ where it runs
    shuffler = ShufflerThread(server, threshold=500, max_wait=5.0, anonymous_devices=True,
                              max_reports_per_device=None)  # as the README starts it: --anonymous-devices
    try:
        run_session(ROOT / "README.md", server.address, shuffler=shuffler.address)
    finally:
        shuffler.stop()


def test_the_user_guides_examples_run_against_a_real_server(start_server: Callable[..., ServerThread],
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_server(collections=(MechanismCard.for_schema(GUIDE_RATINGS),))
    rng = np.random.default_rng(11)
    reports = Reports(new_report_ids(1000), rng.integers(0, 5, 1000), rng.integers(0, 1682, 1000)[:, None])
    acks, code, details = submit(pb_grpc.CollectionServiceStub(server.channel()), [batch(reports, GUIDE_RATINGS)])
    assert acks[0].accepted == 1000, (code, details)
    monkeypatch.chdir(tmp_path)
    run_session(ROOT / "docs" / "user-guide.md", server.address)
