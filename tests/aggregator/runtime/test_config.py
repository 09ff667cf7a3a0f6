"""Server configuration: collection files and the checks that name the offending flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpsynth.aggregator.runtime.config import ConfigError, ServerConfig, load_collection
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.protocol import Limits

from ..conftest import GRAPH_CARD, RATINGS, RATINGS_CARD


def test_collection_file_is_a_schema_or_a_card(collection_files: list[Path], tmp_path: Path) -> None:
    ratings, graph = collection_files
    assert load_collection(ratings).dumps() == RATINGS_CARD.dumps()
    assert load_collection(graph).dumps() == GRAPH_CARD.dumps()
    tampered = tmp_path / "tampered.json"
    tampered.write_text(GRAPH_CARD.dumps().replace('"domain_size": 2', '"domain_size": 3'))
    with pytest.raises(ConfigError, match=r"card\.domain_size"):
        load_collection(tampered)
    broken = tmp_path / "broken.json"
    broken.write_text("{\n")
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_collection(broken)
    with pytest.raises(ConfigError, match="cannot read"):
        load_collection(tmp_path / "missing.json")
    bad_schema = tmp_path / "bad.json"
    bad_schema.write_text('{"name": "x", "epsilon": -1, "attributes": []}')
    with pytest.raises(ConfigError, match="attributes"):
        load_collection(bad_schema)


@pytest.mark.parametrize("changes, message", [
    ({"collections": ()}, "at least one collection"),
    ({"collections": (RATINGS_CARD, RATINGS_CARD)}, "distinct collection names"),
    ({"port": 70000}, "--port"),
    ({"shards": 0}, "--shards"),
    ({"limits": Limits(max_batch_reports=0)}, "--max-batch-reports"),
    ({"limits": Limits(max_message_bytes=2**31)}, "--max-message-bytes"),
    ({"limits": Limits(max_rows_per_client=-1)}, "--max-rows-per-client"),
    ({"grace_seconds": float("nan")}, "--grace"),
    ({"max_commit_interval": -0.1}, "--max-commit-interval"),
    ({"max_commit_interval": 11.0}, "--max-commit-interval: seconds from 0 to 10, got 11.0"),
])
def test_invalid_settings_name_the_flag(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"data_dir": tmp_path, "collections": (RATINGS_CARD,)}
    settings.update(changes)
    with pytest.raises(ConfigError, match=message):
        ServerConfig(**settings)  # type: ignore[arg-type]


def test_defaults(tmp_path: Path) -> None:
    config = ServerConfig(data_dir=tmp_path, collections=(RATINGS_CARD,))
    assert (config.host, config.port, config.shards, config.reflection) == ("127.0.0.1", 0, None, False)
    assert config.limits == Limits()
    assert config.collections[0].schema == RATINGS


@pytest.mark.parametrize("content, problem", [
    (b'{"name": "x", "epsilon": 1.0, "attributes": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nested 1001 deep"),
    (b'{"name": "x", "epsilon": ' + b"1" * 5000 + b', "attributes": []}', "5000 digits"),
    (b'{"name": "caf\xe9", "epsilon": 1.0, "attributes": []}', "not UTF-8"),
])
def test_collection_files_past_the_json_limits_or_not_utf8_are_one_config_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, problem: str) -> None:
    """Today: RecursionError, ValueError, UnicodeDecodeError (tracebacks from ``serve --collection``)."""
    path = tmp_path / "collection.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=problem) as info:
        load_collection(path)
    assert str(info.value).startswith(f"--collection: {path}: ")
    # The command stops at the collection file (before the data directory and Ray): one line, exit 2.
    assert aggregator_main(["serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
                            "--collection", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err and str(path) in err, err
    assert not (tmp_path / "data").exists()
