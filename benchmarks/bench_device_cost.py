"""Device cost per report in the Python SDK, beside the TypeScript SDK's (sdk/typescript/bench/device-cost.ts).

One report = what a device does for one row between its raw values and the bytes of a ReportBatch, without the
ledger or the network: encode the row (``encode_columns``), perturb its private code on the OS CSPRNG
(``perturb_secure``), a fresh report id, the ReportBatch serialized (``private_to_wire`` for an oracle). A wide
view's report first routes the device (HMAC-SHA256 of its view key) and projects the row; a discovery round's
first computes the device's turn (HMAC-SHA256 of its round key) and the string's cell. The collections:

* E, OUE, OLH, HR: one private integer of 100 values and a public region, ε = 1;
* HM (income in [0, 200000], ε = 2) and SW (minutes in [0, 60], ε = 1): one numeric value;
* wide: the views of ``age`` (40 values) with ``colour`` or ``smoker`` use OLH at ε = 2 (a device of view
  ``wideo/age+colour``);
* discovery: round 0 of a 5-letter string over "abc" (2^8 cells, OLH at ε = 2).

Usage::

    python benchmarks/bench_device_cost.py              # print the Python table
    python benchmarks/bench_device_cost.py --json       # the cards and the Python timings as JSON (the TS bench)

µs per report: wall time of ``--reports`` reports one per call, the best of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import hmac
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard, DiscoverySchema, device_turn, round_rows
from ldpsynth.shared.protocol import private_to_wire
from ldpsynth.shared.reports import new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wire import collection_pb2 as pb

REGION = {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}


def _ordinary(mechanism: str) -> dict[str, Any]:
    return {"name": f"bench-{mechanism.lower()}", "epsilon": 1.0, "mechanism": mechanism,
            "attributes": [REGION, {"name": "score", "type": "integer", "min": 0, "max": 99}]}


SCHEMAS: dict[str, dict[str, Any]] = {
    **{m: _ordinary(m) for m in ("E", "OUE", "OLH", "HR")},
    "HM": {"name": "bench-hm", "epsilon": 2.0,
           "attributes": [REGION, {"name": "income", "type": "numeric", "range": [0, 200000], "mechanism": "HM"}]},
    "SW": {"name": "bench-sw", "epsilon": 1.0,
           "attributes": [{"name": "minutes", "type": "numeric", "range": [0, 60], "mechanism": "SW"}]},
}
ROWS: dict[str, dict[str, list[Any]]] = {
    **{m: {"region": ["south"], "score": [42]} for m in ("E", "OUE", "OLH", "HR")},
    "HM": {"region": ["north"], "income": [52000.5]},
    "SW": {"minutes": [12.5]},
}
WIDE = {"name": "wideo", "epsilon": 2.0,
        "attributes": [REGION, {"name": "colour", "type": "categorical", "values": ["red", "green", "blue"]},
                       {"name": "age", "type": "integer", "min": 18, "max": 57}, {"name": "smoker", "type": "binary"}],
        "views": {"kind": "pairs", "salt": "000102030405060708090a0b0c0d0e0f",
                  "attributes": ["age", "colour", "smoker"], "one_way": True}}
WIDE_ROW = {"region": ["north"], "colour": ["blue"], "age": [33], "smoker": [1]}
DISCOVERY = {"name": "wordso", "epsilon": 2.0,
             "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abc"}],
             "discovery": {"first_bits": 8, "fragment_bits": 2, "top_k": 3, "salt": "0f0e0d0c0b0a09080706050403020100",
                           "min_reports_per_round": 10}}
DISCOVERY_ROW = {"word": ["cab"]}


def _batch(card: MechanismCard, columns: dict[str, list[Any]]) -> bytes:
    """One ReportBatch of ``columns`` (one row) under ``card``: encode, perturb (OS CSPRNG), serialize."""
    rows = encode_columns(card.schema, columns)
    reports = card.mechanism.perturb_secure(rows.private_codes)
    private = private_to_wire(card.mechanism, reports) if card.is_oracle or card.has_reports else \
        {"private_codes": np.asarray(reports, "<u8").tobytes()}
    message = pb.ReportBatch(collection=card.schema.name, mechanism_version=card.version, sequence=0,
                             report_ids=new_report_ids(len(reports)).tobytes(), **private,
                             public_codes=[np.asarray(c, "<u8").tobytes() for c in rows.public_codes.T])
    return message.SerializeToString()


def _wide_view_key(wide: WideCard, index: int) -> bytes:
    """A device key that the wide card routes to view ``index`` (found by counting keys)."""
    for i in range(10_000):
        key = hmac.new(b"bench", i.to_bytes(4, "big"), "sha256").digest()
        if wide.route(key)[0] == index:
            return key
    raise AssertionError("no key routes to the view")


def tasks() -> tuple[dict[str, Any], dict[str, Callable[[], bytes]]]:
    """The cards (JSON, for the TS bench) and one report's work per row of the table."""
    cards = {m: MechanismCard.for_schema(Schema.from_json(s)) for m, s in SCHEMAS.items()}
    work: dict[str, Callable[[], bytes]] = {m: (lambda c=c, m=m: _batch(c, ROWS[m])) for m, c in cards.items()}
    wide = WideCard.for_schema(WideSchema.from_json(WIDE))
    view = wide.names.index("wideo/age+colour")
    key = _wide_view_key(wide, view)

    def wide_report() -> bytes:
        index, _ = wide.route(key)
        return _batch(wide.cards[index], wide.project(WIDE_ROW, index))

    schema = DiscoverySchema.from_json(DISCOVERY)
    discovery = DiscoveryCard.for_round(schema, 0, np.zeros((1, 0), np.uint8))
    round_key = next(k for k in (hmac.new(b"bench-round", i.to_bytes(4, "big"), "sha256").digest()
                                 for i in range(10_000)) if device_turn(discovery, k).status == "report")
    assert discovery.card is not None
    round_card = discovery.card

    def discovery_report() -> bytes:
        assert device_turn(discovery, round_key).status == "report"
        return _batch(round_card, round_rows(discovery, DISCOVERY_ROW))

    work["wide view (OLH)"] = wide_report
    work["discovery round (OLH)"] = discovery_report
    out = {m: c.to_json() for m, c in cards.items()}
    out["wide"] = wide.to_json()
    out["discovery"] = discovery.to_json()
    out["wide_view_key"] = key.hex()
    out["round_key"] = round_key.hex()
    return out, work


def measure(run: Callable[[], bytes], reports: int, repeats: int) -> float:
    """µs per report: the best of ``repeats`` runs of ``reports`` calls."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(reports):
            run()
        best = min(best, (time.perf_counter() - start) / reports * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the cards and the timings as JSON")
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    cards, work = tasks()
    timings = {}
    for name, run in work.items():
        timings[name] = measure(run, args.reports, args.repeats)
        print(f"python {name}: {timings[name]:.1f} µs per report", file=sys.stderr)
    if args.json:
        print(json.dumps({"cards": cards, "python_us": timings, "python": sys.version.split()[0]}))
    else:
        for name, us in timings.items():
            print(f"{name:24} {us:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
