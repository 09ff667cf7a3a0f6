"""The language-neutral conformance vectors (conformance/*.json) against the Python SDK.

Every other SDK runs the same files (sdk/typescript: ``npm test``). Here the Python reference is
checked through its public entry points (``Schema.from_json``, ``encode_columns``,
``MechanismCard.from_json``, ``reports_to_proto``...), and the files are checked to be what
conformance/generate.py builds now, so a change of the reference's behaviour shows as a change
of the vectors. The sampler vectors feed their byte stream to ``MechanismE._perturb_exact``, the
test hook behind ``perturb_secure`` (which itself always reads ``os.urandom``).
"""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.protocol import CollectionInfo, reports_to_proto
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb

VECTORS = Path(__file__).resolve().parents[2] / "conformance"


def load(name: str) -> dict[str, Any]:
    doc = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    assert doc["format"] == "ldpsynth.conformance/1"
    return doc


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["id"] for c in cases]


def bits(x: float) -> str:
    return struct.pack(">d", x).hex()


ENCODING = load("encoding.json")["cases"]
ERRORS = load("errors.json")
CARDS = load("cards.json")
SAMPLER = load("sampler.json")["cases"]
WIRE = load("wire.json")


def test_vectors_are_what_the_generator_builds_now() -> None:
    spec = importlib.util.spec_from_file_location("conformance_generate", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(VECTORS))  # it imports its package conformance/vectors/ from its own folder
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(VECTORS))
    assert module.stale(module.build()) == [], "run python conformance/generate.py"


# ----- values → codes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ENCODING, ids=ids(ENCODING))
def test_encoding(case: dict[str, Any]) -> None:
    schema = Schema.from_json(json.dumps(case["schema"]))
    assert str(schema.private_domain_size) == case["private_domain_size"]
    assert str(schema.public_domain_size) == case["public_domain_size"]
    assert {a.name: str(a.size) for a in schema.attributes} == case["attribute_sizes"]
    assert [a.name for a in schema.private_attributes] == case["private_attributes"]
    assert [a.name for a in schema.public_attributes] == case["public_attributes"]
    rows = case["rows"]
    columns = {name: [row["values"][name] for row in rows] for name in rows[0]["values"]}
    encoded = encode_columns(schema, columns)
    assert [str(c) for c in encoded.private_codes.tolist()] == [r["private_code"] for r in rows]
    assert [[str(c) for c in r] for r in encoded.public_codes.tolist()] == [r["public_codes"] for r in rows]
    keys = Reports(np.zeros((len(rows), 16), np.uint8), encoded.private_codes, encoded.public_codes).public_keys(schema)
    assert [str(k) for k in keys.tolist()] == [r["public_key"] for r in rows]
    for item in rows + case["decodes"]:
        code = int(item["private_code"])
        digits = schema.private_digits([code])
        assert [str(digits[a.name][0]) for a in schema.private_attributes] == item["private_digits"]
        assert str(schema.private_codes_of({a: [int(d)] for a, d in zip(case["private_attributes"],
                                                                         item["private_digits"])})[0]) == str(code)
        decoded = schema.decode_private([code])
        for attr in schema.private_attributes:
            value = decoded[attr.name][0]
            shown = bits(float(value)) if attr.to_json()["type"] == "continuous" else str(value)
            assert shown == item["decoded"][attr.name], attr.name


# ----- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ERRORS["schema_errors"], ids=ids(ERRORS["schema_errors"]))
def test_bad_schema_names_its_field(case: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        Schema.from_json(case["schema_json"])
    assert info.value.field == case["field"]
    if "legal" in case:                             # stated for the declared levels' step (issue 42)
        assert info.value.legal == case["legal"]


@pytest.mark.parametrize("case", ERRORS["row_errors"], ids=ids(ERRORS["row_errors"]))
def test_bad_row_names_its_field_and_position(case: dict[str, Any]) -> None:
    schema = Schema.from_json(ERRORS["rows_schema"])
    with pytest.raises(ValidationError) as info:
        encode_columns(schema, case["columns"])
    assert (info.value.field, info.value.position) == (case["field"], case["position"])
    assert not [s for s in case["must_not_contain"] if s in str(info.value)]


# ----- cards ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CARDS["cases"], ids=ids(CARDS["cases"]))
def test_card(case: dict[str, Any]) -> None:
    card = MechanismCard.from_json(case["card_json"])
    m = card.mechanism
    eps = case["epsilon_requested"]
    assert bits(eps["value"]) == eps["bits"] and float.fromhex(eps["hex"]) == eps["value"]
    assert m.epsilon_requested == eps["value"] and str(m.domain_size) == case["domain_size"]
    assert (str(m.keep_weight), str(m.lie_weight), str(m.total_weight)) == \
        (case["keep_weight"], case["lie_weight"], case["total_weight"])
    for key in ("epsilon", "keep_probability", "lie_probability"):
        assert bits(getattr(m, key)) == case[key]["bits"], key
        assert float.fromhex(case[key]["hex"]) == case[key]["value"] == getattr(m, key)
    assert m.total_weight == m.keep_weight + (m.domain_size - 1) * m.lie_weight
    rebuilt = MechanismE(eps["value"], int(case["domain_size"]))
    assert rebuilt == m
    assert str((1 << 64) - ((1 << 64) % m.total_weight)) == case["accept_below"]


@pytest.mark.parametrize("case", CARDS["refused"], ids=[c["epsilon_requested"]["hex"] for c in CARDS["refused"]])
def test_card_refused_below_the_sampler_resolution(case: dict[str, Any]) -> None:
    schema = Schema.from_json(case["schema"])
    with pytest.raises(ValidationError) as info:
        MechanismCard.for_schema(schema)
    assert info.value.field == case["field"]


@pytest.mark.parametrize("case", CARDS["bad_cards"], ids=ids(CARDS["bad_cards"]))
def test_inconsistent_card_names_its_field(case: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json(case["card_json"])
    assert info.value.field == case["field"]


@pytest.mark.parametrize("case", CARDS["accepted_variants"], ids=ids(CARDS["accepted_variants"]))
def test_card_variants_are_accepted(case: dict[str, Any]) -> None:
    assert MechanismCard.from_json(case["card_json"]).mechanism.domain_size == 24


@pytest.mark.parametrize("case", CARDS["shuffled"], ids=ids(CARDS["shuffled"]))
def test_shuffled_card_states_the_pool_floor_of_its_block(case: dict[str, Any]) -> None:
    card = MechanismCard.from_json(case["card_json"])
    spec = card.schema.shuffle
    assert spec is not None and spec.to_json() == {"rows_per_device": 1, "shuffler": "aggregator-operator",
                                                   **case["shuffle"]}
    assert (spec.injected, spec.honest_per_pool, spec.independent) == (
        case["assume_injected"], case["honest_reports_per_pool"], case["independent"])
    central = card.to_json()["shuffle"]["central"]
    assert (central["assume_injected"], central["honest_reports_per_pool"]) == (
        case["assume_injected"], case["honest_reports_per_pool"])


@pytest.mark.parametrize("case", CARDS["shuffled_variants"], ids=ids(CARDS["shuffled_variants"]))
def test_shuffled_card_variants_are_accepted(case: dict[str, Any]) -> None:
    assert MechanismCard.from_json(case["card_json"]).schema.shuffle is not None


# ----- the sampler ------------------------------------------------------------------------------------


class Stream:
    def __init__(self, data: bytes):
        self.data, self.read, self.rounds = data, 0, []

    def __call__(self, n: int) -> bytes:
        assert self.read + n <= len(self.data), "read past the end of the vector's stream"
        self.read += n
        self.rounds.append(n // 8)
        return self.data[self.read - n:self.read]


@pytest.mark.parametrize("case", SAMPLER, ids=ids(SAMPLER))
def test_sampler_stream(case: dict[str, Any]) -> None:
    m = MechanismE.__new__(MechanismE)  # the weights as given, whatever ε produced them
    m.keep_weight, m.lie_weight = int(case["keep_weight"]), int(case["lie_weight"])
    m.domain_size, m.total_weight = int(case["domain_size"]), int(case["total_weight"])
    m._accept_below = (1 << 64) - ((1 << 64) % m.total_weight)
    assert str(m._accept_below) == case["accept_below"]
    stream = Stream(bytes.fromhex(case["random_hex"]))
    out = m._perturb_exact(np.asarray([int(c) for c in case["codes"]], np.int64), stream)
    assert [str(c) for c in out.tolist()] == case["outputs"]
    assert stream.read == len(stream.data) == 8 * case["words_read"]
    assert stream.rounds == case["rounds"]


def test_sampler_vectors_reject_and_use_every_branch() -> None:
    """The vectors are worth running: rejections, several rounds, keeps and lies on both sides of x."""
    assert sum(c["rejections"] for c in SAMPLER) >= 50
    assert any(len(c["rounds"]) >= 3 for c in SAMPLER)
    outcomes = set()
    for c in SAMPLER:
        for x, y in zip(c["codes"], c["outputs"]):
            outcomes.add((int(y) > int(x)) - (int(y) < int(x)))
    assert outcomes == {-1, 0, 1}


# ----- the wire ---------------------------------------------------------------------------------------


def _reports(batch: dict[str, Any]) -> Reports:
    n = len(batch["report_ids"])
    public = [[int(c) for c in col] for col in batch["public_codes"]]
    return Reports(np.frombuffer(b"".join(bytes.fromhex(i) for i in batch["report_ids"]), np.uint8).reshape(n, 16),
                   np.asarray([int(c) for c in batch["private_codes"]], np.int64),
                   np.asarray(public, np.int64).T.reshape(n, len(public)))


@pytest.mark.parametrize("case", WIRE["report_batches"], ids=ids(WIRE["report_batches"]))
def test_report_batch_bytes(case: dict[str, Any]) -> None:
    msg = reports_to_proto(_reports(case), case["collection"], case["mechanism_version"], int(case["sequence"]))
    assert msg.SerializeToString().hex() == case["hex"]
    back = pb.ReportBatch.FromString(bytes.fromhex(case["hex"]))
    assert back.collection == case["collection"] and str(back.sequence) == case["sequence"]


def test_worked_example_batch_is_the_contracts() -> None:
    contract = (Path(__file__).resolve().parents[2] / "docs" / "contract.md").read_text(encoding="utf-8")
    shown = contract.split("The `ReportBatch` is 51 bytes:", 1)[1].split("|", 1)[0]
    assert "".join(shown.split()) == WIRE["report_batches"][0]["hex"]


def test_get_collection_request_and_ack_bytes() -> None:
    for req in WIRE["get_collection_requests"]:
        assert pb.GetCollectionRequest(collection=req["collection"]).SerializeToString().hex() == req["hex"]
    for ack in WIRE["batch_acks"]:
        msg = pb.BatchAck.FromString(bytes.fromhex(ack["hex"]))
        assert (str(msg.sequence), msg.accepted, msg.duplicates) == (ack["sequence"], ack["accepted"],
                                                                     ack["duplicates"])


def test_collection_message_decodes_and_verifies() -> None:
    for case in WIRE["collections"]:
        msg = pb.Collection.FromString(bytes.fromhex(case["hex"]))
        info = CollectionInfo.from_proto(msg)
        assert (msg.name, msg.schema_json, msg.card_json) == (case["name"], case["schema_json"], case["card_json"])
        assert info.limits.max_batch_reports == case["limits"]["max_batch_reports"]
        assert str(info.limits.max_rows_per_client) == case["limits"]["max_rows_per_client"]


@pytest.mark.parametrize("case", WIRE["device"], ids=ids(WIRE["device"]))
def test_device_path(case: dict[str, Any]) -> None:
    card = MechanismCard.from_json(case["card_json"])
    encoded = encode_columns(card.schema, case["columns"])
    assert [str(c) for c in encoded.private_codes.tolist()] == case["private_codes"]
    stream = Stream(bytes.fromhex(case["random_hex"]))
    perturbed = card.mechanism._perturb_exact(encoded.private_codes, stream)
    assert [str(c) for c in perturbed.tolist()] == case["perturbed"] == case["batch"]["private_codes"]
    assert stream.read == len(stream.data)
    batch = case["batch"]
    assert [[str(c) for c in col] for col in encoded.public_codes.T.tolist()] == batch["public_codes"]
    msg = reports_to_proto(_reports(batch), card.schema.name, card.version, int(batch["sequence"]))
    assert msg.SerializeToString().hex() == batch["hex"]


# ----- sealed reports (sealed.json, docs/contract.md §16) --------------------------------------------

SEALED = load("sealed.json")


def _opening_key() -> Any:
    from ldpsynth.shared.sealing import OpeningKey
    return OpeningKey(bytes.fromhex(SEALED["key"]["private_key"]))


def test_sealed_suite_key_id_and_info_constants() -> None:
    from ldpsynth.shared import sealing
    suite, key = SEALED["suite"], SEALED["key"]
    assert (suite["kem_id"], suite["kdf_id"], suite["aead_id"]) == (sealing.KEM_ID, sealing.KDF_ID, sealing.AEAD_ID)
    assert bytes.fromhex(suite["suite_id"]) == sealing.SUITE_ID and suite["name"] == sealing.SUITE_NAME
    assert bytes.fromhex(suite["info_prefix"]) == sealing.INFO_PREFIX
    opening = _opening_key()
    assert opening.public.public_key.hex() == key["public_key"]  # the public key of the private key
    assert sealing.key_id(bytes.fromhex(key["public_key"])).hex() == key["key_id"]


@pytest.mark.parametrize("case", SEALED["cases"], ids=ids(SEALED["cases"]))
def test_sealed_case_plaintext_info_and_opening(case: dict[str, Any]) -> None:
    from ldpsynth.shared import sealing
    publics = [int(c) for c in case["public_codes"]]
    reports = Reports(np.frombuffer(bytes.fromhex(case["report_id"]), np.uint8).reshape(1, 16),
                      np.asarray([int(case["private_code"])], np.uint64),
                      np.asarray([publics], np.uint64).reshape(1, len(publics)))
    plaintext = sealing.encode_plaintexts(reports, case["mechanism_version"])[0].tobytes()
    assert plaintext.hex() == case["plaintext"]
    assert sealing.info(case["collection"]).hex() == case["info"]
    sealed = bytes.fromhex(case["sealed"])
    assert sealed.hex() == case["enc"] + case["ct"] and len(sealed) == 32 + len(plaintext) + 16
    opened, ok = _opening_key().open_all(np.frombuffer(sealed, np.uint8).reshape(1, -1), case["collection"],
                                         len(plaintext))
    assert ok.all() and opened[0].tobytes() == plaintext


def test_sealed_reports_that_must_not_open_do_not() -> None:
    key = _opening_key()
    for case in SEALED["must_not_open"]:
        sealed = np.frombuffer(bytes.fromhex(case["sealed"]), np.uint8).reshape(1, -1)
        assert not key.open_all(sealed, "demo", sealed.shape[1] - 48)[1].any(), case["id"]


def test_sealed_reports_that_open_invalid_are_invalid() -> None:
    from ldpsynth.shared.sealing import decode_plaintexts
    key, schema = _opening_key(), Schema.from_json(CollectionInfo.from_proto(
        pb.Collection.FromString(bytes.fromhex(SEALED["collection"]["hex"]))).card.schema.to_json())
    for case in SEALED["invalid"]:
        sealed = np.frombuffer(bytes.fromhex(case["sealed"]), np.uint8).reshape(1, -1)
        plaintexts, ok = key.open_all(sealed, "demo", sealed.shape[1] - 48)
        assert ok.all() and plaintexts[0].tobytes().hex() == case["plaintext"], case["id"]
        assert decode_plaintexts(plaintexts, schema, "E/1").invalid == 1, case["id"]


@pytest.mark.parametrize("case", SEALED["batch_parts"], ids=ids(SEALED["batch_parts"]))
def test_sealed_reports_are_cut_into_batches_of_one_public_key(case: dict[str, Any]) -> None:
    from ldpsynth.client.submit import sealed_parts
    keys = np.asarray([int(k) for k in case["public_keys"]], np.int64)
    rows = np.arange(len(keys), dtype=np.int64).reshape(-1, 1)
    parts = sealed_parts(rows, keys, case["capacity"])
    assert [{"pool_key": str(k), "reports": part[:, 0].tolist()} for k, part in parts] == case["batches"]


def test_sealed_batch_collection_and_acks_on_the_wire() -> None:
    from ldpsynth.shared.wire import shuffler_pb2 as spb
    by_id = {c["id"]: c for c in SEALED["cases"]}
    for case in SEALED["sealed_batches"]:
        batch = pb.SealedBatch.FromString(bytes.fromhex(case["hex"]))
        assert (batch.collection, str(batch.sequence), batch.key_id.hex(), str(batch.pool_key)) == (
            case["collection"], case["sequence"], SEALED["key"]["key_id"], case["pool_key"])
        assert batch.reports.hex() == "".join(by_id[i]["sealed"] for i in case["reports"])
        assert batch.SerializeToString().hex() == case["hex"]
        codes = [int(c) for i in case["reports"] for c in by_id[i]["public_codes"]]  # one public attribute or none
        assert batch.pool_key == (codes[0] if codes else 0), case["id"]
    demo = SEALED["sealed_batches"][0]
    assert demo["id"] == "worked-example-contract-16" and len(demo["hex"]) == 2 * 114
    schema = MechanismCard.from_json(SEALED["collection"]["card_json"]).schema  # demo: region, one public attribute
    assert schema.fold_public_codes(np.asarray([[1]], np.int64)).tolist() == [int(demo["pool_key"])]
    info = CollectionInfo.from_proto(pb.Collection.FromString(bytes.fromhex(SEALED["collection"]["hex"])))
    assert info.sealing is not None and info.sealing.public_key.hex() == SEALED["key"]["public_key"]
    message = pb.Collection.FromString(bytes.fromhex(SEALED["collection"]["hex"]))
    for field, value in SEALED["collection"]["sealing"].items():
        found = getattr(message.sealing, field)
        assert (found.hex() if isinstance(found, bytes) else found) == value, field
    for ack in SEALED["shuffled_acks"]:
        got = pb.ShuffledAck.FromString(bytes.fromhex(ack["hex"]))
        assert (str(got.sequence), got.accepted, got.duplicates, got.undecryptable, got.invalid) == (
            ack["sequence"], ack["accepted"], ack["duplicates"], ack["undecryptable"], ack["invalid"])
    for ack in SEALED["sealed_acks"]:
        got = spb.SealedAck.FromString(bytes.fromhex(ack["hex"]))
        assert (str(got.sequence), got.accepted) == (ack["sequence"], ack["accepted"])
