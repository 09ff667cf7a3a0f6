"""The wide model's fit options: ``--wide-*`` on ``aggregator serve``, plain on ``estimate`` and ``export``; a bad
value is refused naming the option before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.cli.main import main as cli_main
from ldpsynth.shared.wide.collection import WideCard, WideSchema


def test_a_bad_fit_option_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({"name": "w", "epsilon": 1.0, "attributes": [
        {"name": "a", "type": "binary"}, {"name": "b", "type": "binary"}],
        "views": {"kind": "pairs", "salt": "ab" * 16}}))
    assert aggregator_main(["serve", "--data-dir", str(tmp_path / "data"), "--port", "0", "--collection", str(wide),
                            "--wide-replicates", "1"]) == 2
    err = capsys.readouterr().err
    assert "--wide-replicates" in err and not (tmp_path / "data").exists(), err
    queries = tmp_path / "q.json"
    queries.write_text("[]")
    card = tmp_path / "card.json"
    card.write_text(WideCard.for_schema(WideSchema.from_json(wide.read_text())).dumps())
    assert cli_main(["estimate", "--synthetic", str(tmp_path), "--card", str(card), "--queries", str(queries),
                     "--iterations", "0"]) == 2
    assert "--iterations" in capsys.readouterr().err
