"""A collection of a frequency oracle: its schema, its card, its reports on the wire, its tallies, its release."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.estimators.engine import estimate
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanisms.registry import layout_of, private_wire, version_of
from ldpsynth.shared.protocol import report_bytes, reports_from_proto, reports_to_proto
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.json_form import queries_from_json
from ldpsynth.shared.release import Release
from ldpsynth.shared.reports import Reports, mechanism_of, new_report_ids
from ldpsynth.shared.schema import Schema

ORACLES = ("OUE", "OLH", "HR", "SS")


def schema(mechanism: str = "E", k: int = 40, **extra: object) -> Schema:
    return Schema.from_json({"name": "c", "epsilon": 1.0, "mechanism": mechanism, **extra, "attributes": [
        {"name": "g", "type": "integer", "min": 0, "max": 2, "public": True},
        {"name": "r", "type": "integer", "min": 1, "max": k}]})


def sample(name: str, n: int, seed: int = 1, k: int = 40) -> tuple[Schema, Reports]:
    s = schema(name, k)
    rng = np.random.default_rng(seed)
    reports = mechanism_of(s).perturb(rng.integers(0, k, n), rng)
    reports = reports if reports.ndim == 2 else reports.astype(np.int64)
    return s, Reports(new_report_ids(n), reports, rng.integers(0, 3, (n, 1)))


# ----- the schema and the card ---------------------------------------------------------------------------
def test_e_is_the_default_and_its_json_is_unchanged() -> None:
    plain = Schema.from_json({"name": "c", "epsilon": 1.0, "attributes": [{"name": "r", "type": "binary"}]})
    assert plain.mechanism == "E" and "mechanism" not in plain.to_json()
    assert schema("E") == plain.__class__.from_json(schema("E").to_json())
    assert "mechanism" not in MechanismCard.for_schema(plain).to_json()["schema"]


@pytest.mark.parametrize("name", ORACLES)
def test_an_oracle_schema_and_card_round_trip(name: str) -> None:
    s = schema(name)
    assert s.to_json()["mechanism"] == name and Schema.from_json(s.dumps()) == s
    card = MechanismCard.for_schema(s)
    text = card.dumps()
    back = MechanismCard.from_json(text)
    assert back.mechanism == card.mechanism and back.version == version_of(name) == f"{name}/1"
    obj = json.loads(text)
    assert obj["mechanism"] == name and obj["report_bytes"] == card.mechanism.report_bytes
    assert obj["protocol"]["p"] == f"{card.mechanism.protocol.p.numerator}/{card.mechanism.protocol.p.denominator}"
    assert obj["epsilon"] <= obj["epsilon_requested"] == 1.0


def test_each_card_states_what_a_device_samples_from() -> None:
    sampler = {name: json.loads(MechanismCard.for_schema(schema(name)).dumps())["sampler"] for name in ORACLES}
    assert sampler["OUE"]["true_bit"] == "1/2" and sampler["OUE"]["other_bit"].endswith("/18446744073709551616")
    assert {"field_bits", "field_modulus", "seed_bits", "hash_bits", "hash_range", "keep_weight", "lie_weight",
            "total_weight", "hash_family"} <= set(sampler["OLH"])
    assert sampler["HR"]["size"] == 64 and sampler["HR"]["bits"] == 6
    assert sampler["SS"]["subset_size"] == mechanism_of(schema("SS")).subset_size


@pytest.mark.parametrize("name, key, value", [
    ("OUE", "protocol", {"p": "1/2", "q": "1/4", "pair_true": "1/8", "pair_other": "1/16"}),
    ("OLH", "sampler", None), ("HR", "report_bytes", 3), ("SS", "epsilon", 0.5), ("OUE", "domain_size", 41)])
def test_a_tampered_oracle_card_is_refused_naming_the_field(name: str, key: str, value: object) -> None:
    obj = MechanismCard.for_schema(schema(name)).to_json()
    if value is None:
        obj[key] = {**obj[key], "hash_bits": obj[key]["hash_bits"] + 1}
    else:
        obj[key] = value
    with pytest.raises(ValidationError, match=f"card.{key}"):
        MechanismCard.from_json(obj)


def test_a_card_of_another_mechanism_than_its_schema_is_refused() -> None:
    obj = MechanismCard.for_schema(schema("OUE")).to_json()
    with pytest.raises(ValidationError, match="card.mechanism"):
        MechanismCard.from_json({**obj, "mechanism": "OLH"})
    with pytest.raises(ValidationError, match="card.version"):
        MechanismCard.from_json({**obj, "version": "E/1"})


def test_bad_mechanisms_are_refused_naming_the_fields() -> None:
    with pytest.raises(SchemaError, match="mechanism.*one of E, OUE, OLH, HR, SS"):
        schema("RAPPOR")
    assert schema("OLH", shuffle={"delta": 1e-9, "min_batch": 10}).shuffle is not None  # any mechanism is shuffled
    with pytest.raises(SchemaError, match=r"mechanism: got \|D\| = 16777217; legal range: E, or OUE .* 16777216"):
        Schema.from_json({"name": "c", "epsilon": 1.0, "mechanism": "OUE", "attributes": [
            {"name": "r", "type": "integer", "min": 0, "max": 16777216}]})


# ----- reports on the wire ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ("E", *ORACLES))
def test_reports_round_trip_in_the_mechanisms_fields(name: str) -> None:
    s, reports = sample(name, 50) if name != "E" else (schema(), Reports(new_report_ids(50),
                                                                         np.arange(50) % 40, np.zeros((50, 1), int)))
    mechanism = mechanism_of(s)
    message = reports_to_proto(reports, "c", version_of(name), 3, mechanism)
    back = reports_from_proto(message, s)
    assert np.array_equal(back.private_codes, reports.private_codes)
    width, columns = private_wire(mechanism)
    used = {"E": ["private_codes"], "OUE": ["report_bitmaps"], "SS": ["report_bitmaps"],
            "OLH": ["olh_seeds", "olh_buckets"], "HR": ["hadamard_reports"]}[name]
    assert sum(len(getattr(message, f)) for f in used) == 50 * width and columns == len(used)
    assert report_bytes(1, width) == 16 + 8 + width


def _bad(name: str, change: dict[str, bytes]) -> str:
    s, reports = sample(name, 20, k=37)
    message = reports_to_proto(reports, "c", version_of(name), 0, mechanism_of(s))
    for field, data in change.items():
        setattr(message, field, data)
    with pytest.raises(ValidationError) as caught:
        reports_from_proto(message, s)
    return str(caught.value)


def test_bad_reports_of_each_kind_are_refused_naming_the_field() -> None:
    # k = 37: OUE/SS bitmaps of 5 bytes (byte 4's 3 high bits are beyond the domain); OLH: t = 6, seeds below
    # 2^12, g = 4; HR: K = 64, indices in [2, 128)
    assert "report_bitmaps" in _bad("OUE", {"report_bitmaps": bytes([0, 0, 0, 0, 0x80]) * 20})
    assert "report_bitmaps" in _bad("OUE", {"report_bitmaps": b"\0" * 99})
    assert "exactly" in _bad("SS", {"report_bitmaps": bytes(5 * 20)})
    assert "olh_seeds" in _bad("OLH", {"olh_seeds": np.full(20, 1 << 12, "<u8").tobytes()})
    assert "olh_buckets" in _bad("OLH", {"olh_buckets": np.full(20, 1 << 14, "<u2").tobytes()})
    assert "olh_buckets" in _bad("OLH", {"olh_buckets": b"\0" * 39})
    assert "hadamard_reports" in _bad("HR", {"hadamard_reports": np.full(20, 1, "<u4").tobytes()})
    assert "hadamard_reports" in _bad("HR", {"hadamard_reports": np.full(20, 128, "<u4").tobytes()})
    assert "private_codes: got 160 bytes" in _bad("HR", {"private_codes": b"\0" * 160})
    assert "empty for a collection of mechanism OUE" in _bad("OUE", {"olh_seeds": b"\0" * 160})


# ----- tallies, estimates, releases --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ORACLES)
def test_keyed_tallies_are_the_oracles_statistics_per_key_and_merge(name: str) -> None:
    s, reports = sample(name, 400)
    oracle = mechanism_of(s)
    keys = reports.public_keys(s)
    stats = KeyedTallies.from_rows(oracle, keys, reports.private_codes, public_domain_size=3)
    for g, key in enumerate(stats.present_keys):
        own = oracle.statistics(reports.private_codes[keys == key])
        assert np.array_equal(stats.table[g], own.tally) and stats.group_sizes[g] == own.n
        assert np.allclose(stats.count_estimates()[g], own.count_estimates())
    halves = [KeyedTallies.from_rows(oracle, keys[part], reports.private_codes[part], public_domain_size=3)
              for part in (slice(0, 150), slice(150, None))]
    merged = KeyedTallies.merge(halves)
    assert np.array_equal(merged.present_keys, stats.present_keys) and np.array_equal(merged.table, stats.table)
    assert np.array_equal(merged.group_sizes, stats.group_sizes)
    restored = KeyedTallies.restore(oracle, 3, stats.present_keys, stats.group_sizes, stats.table)
    assert np.array_equal(restored.table, stats.table)
    with pytest.raises(ValidationError, match="tallies"):
        KeyedTallies.restore(oracle, 3, stats.present_keys, stats.group_sizes, stats.table[:, :-1])


@pytest.mark.parametrize("name", ORACLES)
def test_a_release_round_trips_and_answers_offline_as_the_engine(name: str, tmp_path) -> None:
    s, reports = sample(name, 300)
    card = MechanismCard.for_schema(s)
    release = Release(card, {"g": reports.public_codes[:, 0]}, None, reports.private_codes)
    release.write(tmp_path, parquet=False)
    back = Release.read(tmp_path)
    assert np.array_equal(back.reports, reports.private_codes) and np.array_equal(back.codes["g"], release.codes["g"])
    queries = [{"kind": "marginal", "attributes": ["r"]},
               {"kind": "grouped", "attribute": "g", "tables": [{"value": 1, "weights": [1.0] * 10 + [0.0] * 30}],
                "normalization": "sum"},
               {"kind": "dense", "table": np.eye(40)[np.arange(300) % 40].tolist(), "normalization": "sum"}]
    offline = estimate_release(tmp_path, queries)
    stats = KeyedTallies.from_rows(card.mechanism, reports.public_keys(s), reports.private_codes,
                                   public_domain_size=3)
    direct = estimate(compile_queries(queries_from_json(queries), s), stats, card.mechanism,
                      codes=reports.private_codes)
    assert offline.records() == direct.records()
    assert {r["proper_kind"] for r in offline.records()} == {"clipped"}
    for r in offline.records():
        assert r["ci_low"] < r["estimate"] < r["ci_high"] and r["bound"] == r["bound_proper"] > 0


def test_a_release_with_a_damaged_report_column_is_refused(tmp_path) -> None:
    s, reports = sample("OLH", 10)
    Release(MechanismCard.for_schema(s), {"g": reports.public_codes[:, 0]}, None, reports.private_codes).write(
        tmp_path, parquet=False)
    text = (tmp_path / "synthetic.csv").read_text().splitlines()
    text[3] = text[3].rsplit(",", 1)[0] + ",99"
    (tmp_path / "synthetic.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(ValidationError, match=r"synthetic.report.bucket at position 2.*\[0, 3\]"):
        Release.read(tmp_path)
    assert layout_of(mechanism_of(s)).mechanism == "OLH"
