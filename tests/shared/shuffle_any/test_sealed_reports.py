"""Every mechanism's reports travel sealed (docs/contract.md §16): a plaintext's private part holds the report in
its layout (8 bytes for a number, ceil(|D|/8) for OUE's and SS's bit sets), and the replicas keep exactly the
reports a batch in clear would be allowed to hold, each plaintext checked on its own."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import (
    OpeningKey,
    decode_plaintexts,
    encode_plaintexts,
    plaintext_bytes,
    seal_reports,
)

REGION = {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}


def schema_of(mechanism: str) -> Schema:
    if mechanism in ("HM", "SW"):
        private = {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}
        return Schema.from_json({"name": "s", "epsilon": 1.0, "attributes": [private, REGION]})
    return Schema.from_json({"name": "s", "epsilon": 1.0, "mechanism": mechanism,
                             "attributes": [{"name": "item", "type": "integer", "min": 0, "max": 20}, REGION]})


def reports_of(card: MechanismCard, n: int, seed: int) -> Reports:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, card.schema.private_domain_size, n)
    return Reports(new_report_ids(n), card.mechanism.perturb(codes, rng), rng.integers(0, 2, (n, 1)))


@pytest.mark.parametrize("mechanism", ["E", "OUE", "OLH", "HR", "SS", "HM", "SW"])
def test_every_mechanisms_reports_round_trip_through_plaintexts(mechanism: str) -> None:
    card = MechanismCard.for_schema(schema_of(mechanism))
    reports = reports_of(card, 50, 1)
    plain = encode_plaintexts(reports, card.version)
    layout = layout_of(card.mechanism)
    assert plain.shape == (50, plaintext_bytes(card.schema, card.version))
    assert plain.shape[1] == 1 + len(card.version) + 16 + (layout.width if layout.bitmap else 8) + 8
    decoded = decode_plaintexts(plain, card.schema, card.version)
    assert decoded.valid.all()
    assert np.array_equal(decoded.reports.private_codes, reports.private_codes)
    assert np.array_equal(decoded.reports.public_codes, reports.public_codes)
    assert np.array_equal(decoded.reports.report_ids, reports.report_ids)


def test_e_keeps_its_plaintext_layout() -> None:
    card = MechanismCard.for_schema(schema_of("E"))
    assert plaintext_bytes(card.schema, "E/1") == 36     # docs/contract.md §16's worked example


def test_sealed_bit_sets_open_as_sent() -> None:
    card = MechanismCard.for_schema(schema_of("OUE"))
    reports = reports_of(card, 5, 2)
    key = OpeningKey.generate()
    sealed = seal_reports(key.public, "s", card.version, reports)
    width = plaintext_bytes(card.schema, card.version)
    plain, opened = key.open_all(sealed, "s", width)
    assert opened.all()
    assert np.array_equal(decode_plaintexts(plain, card.schema, card.version).reports.private_codes,
                          reports.private_codes)


@pytest.mark.parametrize("mechanism", ["OUE", "SS", "HR", "OLH", "HM"])
def test_a_malformed_private_part_is_dropped_on_its_own(mechanism: str) -> None:
    card = MechanismCard.for_schema(schema_of(mechanism))
    reports = reports_of(card, 6, 3)
    private = reports.private_codes.copy()
    layout = layout_of(card.mechanism)
    if mechanism == "OUE":
        private[1, -1] |= 0x80            # 21 values in 3 bytes: bit 23 is beyond the domain
        private[4, -1] |= 0x40
    elif mechanism == "SS":
        private[1] = 0                    # no value at all: not a subset of the oracle's size
        private[4, 0] ^= 1                # one bit more or less
    else:
        private[1] = layout.bound         # one past the layout's range
        private[4] = layout.low - 1 if layout.low else np.iinfo(np.int64).max
    plain = encode_plaintexts(Reports(reports.report_ids, private, reports.public_codes), card.version)
    decoded = decode_plaintexts(plain, card.schema, card.version)
    assert decoded.valid.tolist() == [True, False, True, True, False, True]
    assert np.array_equal(decoded.reports.private_codes, reports.private_codes[decoded.valid])
