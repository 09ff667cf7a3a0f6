"""README's Python examples run, and print what they show.

README's ``pycon`` blocks run in order, as one session each block continues. (The package's own
docstring examples are collected by pytest itself: ``--doctest-modules`` in pyproject.toml.)
"""

from __future__ import annotations

import doctest
import io
import re
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.schema import Schema
from tests.client.client_fakes import FakeCollectionService, FakeQueryService, ServerThread

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def readme_sessions() -> str:
    """README's ``pycon`` code blocks, in order (each continues the session of the ones before)."""
    blocks = re.findall(r"^```pycon\n(.*?)^```$", (ROOT / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    return "\n".join(blocks)


def readme_collection() -> CollectionInfo:
    """README's ``ratings`` collection (movie 1..1682 public, rating 1..5 private, ε = 1)."""
    schema = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
        {"name": "movie", "type": "integer", "min": 1, "max": 1682, "public": True},
        {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
    return CollectionInfo(MechanismCard.for_schema(schema), Limits())


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README's Python examples, in a temporary working folder, with ``target`` (the aggregator's
    address in the README) a fake query service on 127.0.0.1 holding 1,000 perturbed rows (seed 11)."""
    text = readme_sessions()
    assert text.count(">>>") >= 10
    info = readme_collection()
    rng = np.random.default_rng(11)
    service = FakeQueryService(info, rng.integers(0, 1682, 1000), rng.integers(0, 5, 1000))
    monkeypatch.chdir(tmp_path)
    report = io.StringIO()
    with ServerThread(FakeCollectionService(info), queries=service) as server:
        test = doctest.DocTestParser().get_doctest(text, {"target": server.target}, "README.md",
                                                   str(ROOT / "README.md"), 0)
        runner = doctest.DocTestRunner(optionflags=OPTIONS)
        runner.run(test, out=report.write)
    assert runner.failures == 0 and runner.tries == text.count(">>>"), report.getvalue()
