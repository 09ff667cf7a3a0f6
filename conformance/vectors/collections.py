"""collections.json: the device side of numeric, wide and discovery collections.

``numeric_cards``: HM and SW cards (``MechanismCard`` of a schema with a numeric attribute) as the reference
writes them, with their report domain and delivered ε; ``bad_numeric_cards``: one tampered field each, and the
field the refusal names; ``numeric_codes``: a numeric attribute's raw values and their fixed-point codes, or the
refusal, with and without declared levels (``step``). ``device_keys``: a ledger secret and a collection's name →
the view key and the round key (``ldpsynth.client.ledger.rules.device_key``).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

from ldpsynth.client.ledger.rules import device_key
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import ROUND_KEY_CONTEXT, DiscoveryCard, DiscoverySchema, device_turn
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding, prefix_bytes
from ldpsynth.shared.heavy_hitters.rounds import round_of
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wide.collection import VIEW_KEY_TAG, WideCard, WideSchema
from vectors.common import FORMAT, attribute, dec, exact_float, field_of, legal_of, schema_doc

#: (mechanism, ε, range): HM below the crossover ε* ≈ 0.61 (Duchi alone) and above it, SW small and large ε.
NUMERIC_CASES: list[tuple[str, float, list[float]]] = [
    ("HM", 0.5, [0.0, 1.0]), ("HM", 1.0, [0.0, 100.0]), ("HM", 4.0, [-5.5, 12.25]), ("HM", 8.0, [18.0, 90.0]),
    ("SW", 0.5, [0.0, 1.0]), ("SW", 1.0, [0.0, 100.0]), ("SW", 3.0, [-1000.0, 1000.0]),
]


#: (mechanism, ε, range, step): declared levels (docs/numeric.md, "Declared levels"), integral and decimal steps.
LEVEL_CASES: list[tuple[str, float, list[float], float]] = [
    ("SW", 1.0, [1.0, 5.0], 1.0), ("SW", 2.0, [0.0, 25.5], 0.1), ("HM", 1.0, [0.0, 100.0], 0.5),
    ("SW", 0.5, [-5.5, 12.25], 0.25),
]


def numeric_schema(mechanism: str, epsilon: float, bounds: list[float], *, public: bool = False,
                   step: float | None = None) -> dict[str, Any]:
    levels = {} if step is None else {"step": step}
    attrs = [attribute("x", "numeric", range=bounds, mechanism=mechanism, **levels)]
    if public:
        attrs.insert(0, attribute("region", "categorical", True, values=["north", "south"]))
    return schema_doc(f"numeric-{mechanism}", *attrs, epsilon=epsilon)


def _card(mechanism: str, epsilon: float, bounds: list[float], public: bool = False,
          step: float | None = None) -> MechanismCard:
    schema = numeric_schema(mechanism, epsilon, bounds, public=public, step=step)
    return MechanismCard.for_schema(Schema.from_json(schema))


def _numeric_card(mechanism: str, epsilon: float, bounds: list[float], public: bool,
                  step: float | None = None) -> dict[str, Any]:
    card = _card(mechanism, epsilon, bounds, public, step)
    m = card.mechanism
    levels = "" if step is None else f"-step={step!r}"
    return {"id": f"{mechanism}-eps={epsilon!r}-range={bounds}{levels}" + ("-public" if public else ""),
            "card_json": card.dumps(), "version": card.version, "domain_size": dec(m.domain_size),
            "epsilon": exact_float(m.epsilon), "epsilon_requested": exact_float(m.epsilon_requested)}


def _tampered() -> Iterator[tuple[str, str]]:
    hm = _card("HM", 1.0, [0.0, 100.0]).to_json()
    sw = _card("SW", 1.0, [0.0, 100.0]).to_json()

    def changed(base: dict[str, Any], **fields: Any) -> str:
        return json.dumps({**base, **fields}, indent=2, sort_keys=True)

    def sampler(base: dict[str, Any], path: list[str], value: Any) -> str:
        block = json.loads(json.dumps(base["sampler"]))
        inner = block
        for key in path[:-1]:
            inner = inner[key]
        inner[path[-1]] = value
        return changed(base, sampler=block)

    yield "hm-mechanism-e", changed(hm, mechanism="E")
    yield "hm-mechanism-sw", changed(hm, mechanism="SW")
    yield "hm-version-wrong", changed(hm, version="HM/2")
    yield "hm-version-of-e", changed(hm, version="E/1")
    yield "hm-epsilon-larger", changed(hm, epsilon=hm["epsilon"] * 2)
    yield "hm-epsilon-requested", changed(hm, epsilon_requested=2.0)
    yield "hm-domain-size", changed(hm, domain_size=hm["domain_size"] + 1)
    yield "hm-numeric-range", changed(hm, numeric={**hm["numeric"], "range": [0.0, 99.0]})
    yield "hm-numeric-attribute", changed(hm, numeric={**hm["numeric"], "attribute": "y"})
    yield "hm-numeric-missing", json.dumps({k: v for k, v in hm.items() if k != "numeric"})
    yield "hm-sampler-missing", json.dumps({k: v for k, v in hm.items() if k != "sampler"})
    yield "hm-alpha", sampler(hm, ["alpha"], "1/4294967296")
    yield "hm-pm-keep-plus-one", sampler(hm, ["pm", "keep_weight"], str(int(hm["sampler"]["pm"]["keep_weight"]) + 1))
    yield "hm-pm-window", sampler(hm, ["pm", "window"], hm["sampler"]["pm"]["window"] + 1)
    yield "hm-duchi-lie-minus-one", sampler(hm, ["duchi", "lie_weight"],
                                            str(int(hm["sampler"]["duchi"]["lie_weight"]) - 1))
    yield "hm-duchi-keep-number", sampler(hm, ["duchi", "keep_weight"], int(hm["sampler"]["duchi"]["keep_weight"]))
    yield "hm-input-points", sampler(hm, ["input_points"], 2048)
    yield "sw-buckets", sampler(sw, ["buckets"], 512)
    yield "sw-keep-of-larger-epsilon", sampler(sw, ["keep_weight"], _card("SW", 1.5, [0.0, 100.0]).to_json()[
        "sampler"]["keep_weight"])
    yield "sw-denominator", sampler(sw, ["denominator"], str(int(sw["sampler"]["denominator"]) - 1))
    yield "sw-schema-mechanism-hm", changed(sw, schema={**sw["schema"], "attributes": [
        {**sw["schema"]["attributes"][0], "mechanism": "HM"}]})
    stepped = _card("SW", 1.0, [1.0, 5.0], step=1.0).to_json()
    yield "sw-step-changed", changed(stepped, numeric={**stepped["numeric"], "step": 2.0})
    yield "sw-step-missing", changed(stepped, numeric={k: v for k, v in stepped["numeric"].items() if k != "step"})
    yield "sw-step-added", changed(sw, numeric={**sw["numeric"], "step": 1.0})
    yield "sw-step-schema-changed", changed(stepped, schema={**stepped["schema"], "attributes": [
        {**stepped["schema"]["attributes"][0], "step": 0.5}]})
    yield "sw-step-schema-not-dividing", changed(stepped, schema={**stepped["schema"], "attributes": [
        {**stepped["schema"]["attributes"][0], "step": 0.3}]})


def _bad_numeric_card(case_id: str, text: str) -> dict[str, Any]:
    field, _ = field_of(MechanismCard.from_json, text)
    return {"id": case_id, "card_json": text, "field": field}


#: Raw values of a numeric attribute on [lo, hi]: the ends, interior points, strings and integers as a device
#: passes them, and values next to lo and hi.
def _code_values(lo: float, hi: float, rng: random.Random) -> list[Any]:
    whole = [math.ceil(lo)] if math.ceil(lo) <= hi and abs(lo) < 2**53 else []
    return [lo, hi, (lo + hi) / 2, math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf), str(hi), *whole,
            *[rng.uniform(lo, hi) for _ in range(8)]]


def _numeric_codes(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for bounds in ([0.0, 1.0], [0.0, 100.0], [-5.5, 12.25], [-1e300, 1e300], [1e-9, 3e-9]):
        schema = Schema.from_json(numeric_schema("HM", 1.0, bounds))
        attr = schema.attributes[0]
        values = _code_values(bounds[0], bounds[1], rng)
        codes = encode_columns(schema, {"x": values}).private_codes
        out.append({"id": f"range={bounds}", "schema": schema.to_json(), "values": values, "codes": dec(codes)})
        for bad in (bounds[0] - abs(bounds[0]) - 1.0, bounds[1] + abs(bounds[1]) + 1.0, "nan", "inf", "abc", None):
            field, position = field_of(encode_columns, schema, {"x": [values[0], bad]})
            out.append({"id": f"range={bounds}-refused-{bad!r}", "schema": schema.to_json(),
                        "values": [values[0], bad], "field": field, "position": position})
        assert attr.name == "x"
    return out


def _level_codes() -> list[dict[str, Any]]:
    """Values of attributes with declared levels: on a level, within 1e-6 step of one (encoded as the level itself),
    decimal steps; and refusals (off the levels, beyond 1e-6 step, outside the range)."""
    tol = 1e-6
    cases: list[tuple[list[float], float, list[Any], list[Any]]] = [
        ([1.0, 5.0], 1.0, [1, 5, 3.0, "4", 2 + 0.9 * tol, 2 - 0.9 * tol, 4.9999999],
         [2.5, 3 + 1.1 * tol, 5 + 0.5 * tol, 1 - 0.5 * tol, 0, "nan", None]),
        ([0.0, 1.0], 0.1, [0.1, 0.2, 0.1 + 0.2, 0.7, 0.1 * 7, "0.3", 0.9999999, 1.0, 0.3 + 0.09 * tol],
         [0.35, 0.3 + 0.11 * tol, 1.0000001]),
        ([0.0, 25.5], 0.1, [0.0, 25.5, 12.3, 25.4, 0.1 * 123], [12.35, 25.6]),
        ([-5.5, 12.25], 0.25, [-5.5, -5.25, 12.25, 0, 12.0, -5.2500001], [-5.375, 3.1, 12.2500001]),
        ([0.0, 1.0], 1 / 3, [0.0, 1 / 3, 2 / 3, 1.0, 0.3333336], [0.5]),
    ]
    out = []
    for bounds, step, good, bad_values in cases:
        schema = Schema.from_json(numeric_schema("SW", 1.0, bounds, step=step))
        codes = encode_columns(schema, {"x": good}).private_codes
        case_id = f"range={bounds}-step={step!r}"
        out.append({"id": case_id, "schema": schema.to_json(), "values": good, "codes": dec(codes)})
        for bad in bad_values:
            field, position = field_of(encode_columns, schema, {"x": [good[0], bad]})
            out.append({"id": f"{case_id}-refused-{bad!r}", "schema": schema.to_json(), "values": [good[0], bad],
                        "field": field, "position": position,
                        "legal": legal_of(encode_columns, schema, {"x": [good[0], bad]})})
    return out


def _device_keys(rng: random.Random) -> list[dict[str, Any]]:
    names = ["survey", "wide-survey", "names/discovery", "é-ü-文", "a" * 128]
    secrets = [bytes(32), bytes(range(32)), rng.randbytes(32), rng.randbytes(32)]
    return [{"id": f"secret{s}-{name[:12]}", "secret": secret.hex(), "collection": name,
             "view_key": device_key(secret, VIEW_KEY_TAG, name).hex(),
             "round_key": device_key(secret, ROUND_KEY_CONTEXT, name).hex()}
            for s, secret in enumerate(secrets) for name in names]


#: Wide schemas: pairs, pairs with one-way views and a public attribute, a listed set, a shuffled one, and
#: views wide enough at a small ε that their best mechanism is an oracle (a device of such a view is refused).
def _wide_schemas(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    cat = attribute("colour", "categorical", values=["red", "green", "blue"])
    age = attribute("age", "integer", min=18, max=27)
    smoker = attribute("smoker", "binary")
    score = attribute("score", "continuous", lo=0.0, hi=1.0, bits=3)
    region = attribute("region", "categorical", True, values=["north", "south"])

    def wide(name: str, *attrs: dict[str, Any], epsilon: float = 2.0, **views: Any) -> dict[str, Any]:
        return {**schema_doc(name, *attrs, epsilon=epsilon), "views": {"salt": rng.randbytes(16).hex(), **views}}

    shuffled = wide("wide-shuffled", cat, age, smoker, kind="pairs")
    shuffled["shuffle"] = {"delta": 1e-6, "min_batch": 1000}
    return [("pairs", wide("wide-pairs", cat, age, smoker, score, kind="pairs")),
            ("pairs-one-way-public", wide("wide-one-way", region, cat, age, smoker, kind="pairs",
                                          attributes=["colour", "smoker"], one_way=True)),
            ("list", wide("wide-list", cat, age, smoker, score, kind="list", views=[["age"], ["score", "colour"],
                                                                                      ["smoker", "age", "colour"]])),
            ("shuffled", shuffled),
            ("oracle-views", wide("wide-oracles", attribute("a", "integer", min=0, max=199),
                                  attribute("b", "integer", min=0, max=199), smoker, epsilon=0.5, kind="pairs"))]


def _wide_case(case_id: str, schema: dict[str, Any], secrets: list[bytes]) -> dict[str, Any]:
    card = WideCard.for_schema(WideSchema.from_json(schema))
    routes = []
    for secret in secrets:
        key = device_key(secret, VIEW_KEY_TAG, card.schema.name)
        index, name = card.route(key)
        routes.append({"secret": secret.hex(), "view": index, "collection": name})
    return {"id": case_id, "card_json": card.dumps(), "names": list(card.names),
            "mechanisms": [c.to_json()["mechanism"] for c in card.cards], "routes": routes}


def _bad_wide_cards(base: dict[str, Any]) -> Iterator[tuple[str, str]]:
    def changed(**fields: Any) -> str:
        return json.dumps({**base, **fields}, indent=2, sort_keys=True)

    def view(i: int, **fields: Any) -> str:
        views = json.loads(json.dumps(base["views"]))
        views[i].update(fields)
        return changed(views=views)

    yield "format-of-a-mechanism-card", changed(format="ldpsynth.mechanism-card/1")
    yield "version-wrong", changed(version="views/2")
    yield "salt-changed", changed(assignment={**base["assignment"], "salt": "00" * 16})
    yield "views-count", changed(assignment={**base["assignment"], "views": base["assignment"]["views"] + 1})
    yield "rule-changed", changed(assignment={**base["assignment"], "rule": "view = 0"})
    yield "a-view-dropped", changed(views=base["views"][:-1])
    yield "view-collection", view(0, collection=base["views"][0]["collection"] + "x")
    yield "view-attributes", view(1, attributes=list(reversed(base["views"][1]["attributes"])))
    card = json.loads(json.dumps(base["views"][0]["card"]))
    card["schema"]["epsilon"] = 4.0
    yield "view-card-epsilon", view(0, card=card)
    yield "schema-numeric", changed(schema={**base["schema"], "attributes": [
        *base["schema"]["attributes"][:-1], {"name": "score", "type": "numeric", "range": [0.0, 1.0]}]})
    yield "schema-views-one-attribute", changed(schema={**base["schema"], "views": {
        **base["schema"]["views"], "attributes": ["colour"]}})


def _bad_wide_card(case_id: str, text: str) -> dict[str, Any]:
    field, _ = field_of(WideCard.from_json, text)
    return {"id": case_id, "card_json": text, "field": field}


#: (id, max_length, alphabet): UTF-8 and alphabets whose symbols are not whole bytes.
ENCODINGS: list[tuple[str, int, str | None]] = [("utf8-8", 8, None), ("utf8-3", 3, None), ("abc-5", 5, "abc"),
                                                ("hex-7", 7, "0123456789abcdef"), ("greek-4", 4, "αβγδεζη")]
STRINGS = ["", "a", "abc", "cab", "abcabcabc", "été", "日本語テキスト", "😀x", "0f9e", "deadbeef01", "αβγ", "ηηηηη",
           "bb", "c"]


def _string_codes() -> list[dict[str, Any]]:
    out = []
    for case_id, length, alphabet in ENCODINGS:
        enc = StringEncoding(length, alphabet)
        for i, value in enumerate(STRINGS):
            doc: dict[str, Any] = {"id": f"{case_id}-{i}", "max_length": length, "alphabet": alphabet, "value": value}
            try:
                doc["code"] = bytes(enc.encode([value])[0]).hex()
            except ValidationError as exc:  # the refusal is the vector
                doc["field"] = exc.field
            out.append(doc)
        if alphabet is None:   # U+0000 is the padding byte (a lone surrogate, refused too, has no JSON text here)
            field, _ = field_of(enc.encode, ["a\x00b"])
            out.append({"id": f"{case_id}-nul", "max_length": length, "alphabet": None, "value": "a\x00b",
                        "field": field})
    return out


def _discovery_schema(name: str, rng: random.Random, *, alphabet: str | None, length: int, first_bits: int,
                      fragment_bits: int, epsilon: float, public: bool = False,
                      shuffle: bool = False) -> dict[str, Any]:
    word: dict[str, Any] = {"name": "word", "type": "string", "max_length": length,
                            **({"alphabet": alphabet} if alphabet else {"encoding": "utf-8"})}
    attrs = [word]
    if public:
        attrs.insert(0, attribute("region", "categorical", True, values=["north", "south"]))
    out = {"name": name, "epsilon": epsilon, "attributes": attrs,
           "discovery": {"first_bits": first_bits, "fragment_bits": fragment_bits, "top_k": 3,
                         "salt": rng.randbytes(16).hex(), "min_reports_per_round": 10}}
    if shuffle:
        out["shuffle"] = {"delta": 1e-6, "min_batch": 1000}
    return out


def _discovery_cases(rng: random.Random, secrets: list[bytes]) -> list[dict[str, Any]]:
    specs = [("round0-abc", dict(alphabet="abc", length=5, first_bits=4, fragment_bits=2, epsilon=4.0), 0),
             ("round2-abc-public", dict(alphabet="abc", length=5, first_bits=4, fragment_bits=2, epsilon=4.0,
                                        public=True), 2),
             ("round1-utf8-shuffled", dict(alphabet=None, length=3, first_bits=8, fragment_bits=8, epsilon=1.0,
                                           shuffle=True), 1),
             ("round3-utf8-oracle", dict(alphabet=None, length=4, first_bits=12, fragment_bits=6, epsilon=1.0), 3),
             ("finished", dict(alphabet="abc", length=5, first_bits=4, fragment_bits=2, epsilon=4.0), None)]
    out = []
    for case_id, kwargs, r in specs:
        schema = DiscoverySchema.from_json(_discovery_schema(f"disc-{case_id}", rng, **kwargs))  # type: ignore[arg-type]
        enc = schema.encoding
        words = [w for w in STRINGS if _encodes(enc, w)]
        if r is None:
            card = DiscoveryCard.for_round(schema, None, np.zeros((0, 0), np.uint8))
        else:
            start = schema.schedule.start_bits(r)
            codes = enc.encode(words[::2])
            prefixes = np.unique(prefix_bytes(codes, start), axis=0) if start else np.zeros((1, 0), np.uint8)
            card = DiscoveryCard.for_round(schema, r, prefixes)
        routes = []
        for secret in secrets:
            key = device_key(secret, ROUND_KEY_CONTEXT, schema.name)
            turn = device_turn(card, key)
            routes.append({"secret": secret.hex(), "round": turn.round, "status": turn.status})
        cells = []
        if r is not None:
            spec = card.spec
            cells = [{"value": w, "cell": int(spec.cells_of(enc.encode([w]))[0])} for w in words]
        out.append({"id": case_id, "card_json": card.dumps(), "round": r,
                    "mechanism": None if card.card is None else card.card.to_json()["mechanism"],
                    "round_collection": None if r is None else f"{schema.name}/round-{r}",
                    "routes": routes, "cells": cells,
                    "rounds_of": [{"key": k.hex(), "round": round_of(k, schema.discovery.salt, schema.schedule.rounds)}
                                  for k in (b"d", rng.randbytes(32), rng.randbytes(16))]})
    return out


def _encodes(enc: StringEncoding, value: str) -> bool:
    try:
        enc.encode([value])
    except ValidationError:
        return False
    return True


def collection_vectors() -> dict[str, Any]:
    rng = random.Random(20261207)
    cards = [_numeric_card(m, eps, bounds, public) for m, eps, bounds in NUMERIC_CASES for public in (False, True)]
    cards += [_numeric_card(m, eps, bounds, public, step) for m, eps, bounds, step in LEVEL_CASES
              for public in (False, True)]
    secrets = [bytes(32), *[rng.randbytes(32) for _ in range(7)]]
    wide = [_wide_case(case_id, schema, secrets) for case_id, schema in _wide_schemas(rng)]
    return {"format": FORMAT, "file": "collections.json", "numeric_cards": cards,
            "bad_numeric_cards": [_bad_numeric_card(i, t) for i, t in _tampered()],
            "numeric_codes": _numeric_codes(rng) + _level_codes(), "device_keys": _device_keys(rng),
            "string_codes": _string_codes(), "discovery_cards": _discovery_cases(rng, secrets),
            "wide_cards": wide, "bad_wide_cards": [_bad_wide_card(i, t) for i, t in _bad_wide_cards(
                json.loads(wide[0]["card_json"]))],
            "view_key_tag": VIEW_KEY_TAG.decode(), "round_key_context": ROUND_KEY_CONTEXT.decode()}
