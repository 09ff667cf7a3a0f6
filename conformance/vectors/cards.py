"""cards.json: mechanism cards for (ε, |D|) pairs, refused pairs, tampered and accepted variants, shuffled cards
(of E, and of the oracles and numeric mechanisms with FMT21's clone bound)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from decimal import Decimal, localcontext
from typing import Any

from ldpsynth.shared.card import MechanismCard, shuffle_block
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import shuffle_bound
from ldpsynth.shared.schema import Schema, ShuffleSpec
from vectors.common import FORMAT, attribute, dec, exact_float, field_of, schema_doc


def card_schema(epsilon: float, domain_size: int) -> dict[str, Any]:
    return schema_doc("card", attribute("x", "integer", min=0, max=domain_size - 1), epsilon=epsilon)


CARD_PAIRS: list[tuple[float, int]] = [
    (1.0, 24), (1.0, 2), (0.5, 2), (3.0, 2), (0.1, 5), (1.0, 5), (2.0, 1000), (0.5, 2**20), (4.0, 64),
    (math.log(3), 3), (0.01, 2), (1e-6, 2), (1e-12, 2), (1e-9, 1000), (0.001, 2**28), (8.0, 2**28),
    (5.66, 10), (13.08, 100), (22.08, 7),  # the platform's exp is not correctly rounded at these ε
    (20.0, 2), (30.0, 3), (40.0, 2), (42.5, 2), (43.0, 2), (43.0, 2**28), (44.0, 2), (45.0, 2), (46.0, 2),
    (100.0, 2), (700.0, 5), (1e300, 2), (1.7976931348623157e308, 2**28), (2.220446049250313e-16 * 64, 2),
    (1e-15, 2), (1e-10, 2**28),  # barely above the sampler's resolution (A - L = 256, and 1)
]
#: (ε, |D|) pairs the exact sampler cannot resolve: the card is refused, naming ``epsilon``.
REFUSED_PAIRS: list[tuple[float, int]] = [(1e-16, 2), (5e-324, 2), (1e-11, 2**28), (2.220446049250313e-16, 2)]


def correctly_rounded_exp(x: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 120
        return float(Decimal(x).exp())


def _card_case(epsilon: float, domain_size: int) -> dict[str, Any]:
    card = MechanismCard.for_schema(Schema.from_json(card_schema(epsilon, domain_size)))
    m = card.mechanism
    growth = math.exp(min(epsilon, 45.0))
    limit = m._accept_below
    return {
        "id": f"eps={epsilon!r},D={domain_size}",
        "epsilon_requested": exact_float(epsilon),
        "domain_size": dec(domain_size),
        "exp_used": {**exact_float(growth), "correctly_rounded": growth == correctly_rounded_exp(min(epsilon, 45.0))},
        "keep_weight": str(m.keep_weight), "lie_weight": str(m.lie_weight), "total_weight": str(m.total_weight),
        "epsilon": exact_float(m.epsilon),
        "keep_probability": exact_float(m.keep_probability),
        "lie_probability": exact_float(m.lie_probability),
        "accept_below": str(limit), "rejection_probability": ((1 << 64) - limit) / 2**64,
        "card_json": card.dumps(),
    }


def _tampered_cards() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    stronger = MechanismCard.for_schema(Schema.from_json(card_schema(1.5, 24))).to_json()

    def changed(**fields: Any) -> str:
        return json.dumps({**base, **fields}, indent=2, sort_keys=True)

    yield "not-an-object", "[]"
    yield "format-wrong", changed(format="ldpsynth.mechanism-card/2")
    yield "format-missing", json.dumps({k: v for k, v in base.items() if k != "format"})
    yield "version-wrong", changed(version="E/2")
    yield "mechanism-wrong", changed(mechanism="RR")
    yield "schema-missing", json.dumps({k: v for k, v in base.items() if k != "schema"})
    yield "schema-invalid", changed(schema={**base["schema"], "epsilon": -1})
    yield "domain-size-wrong", changed(domain_size=25)
    yield "domain-size-string", changed(domain_size="24")
    yield "keep-weight-plus-one", changed(keep_weight=str(int(base["keep_weight"]) + 1))
    yield "keep-weight-minus-one", changed(keep_weight=str(int(base["keep_weight"]) - 1))
    yield "keep-weight-number", changed(keep_weight=int(base["keep_weight"]))
    yield "keep-weight-leading-zero", changed(keep_weight="0" + base["keep_weight"])
    yield "weights-of-a-larger-epsilon", changed(keep_weight=stronger["keep_weight"], lie_weight=stronger["lie_weight"],
                                                 total_weight=stronger["total_weight"])
    yield "lie-weight-wrong", changed(lie_weight=str(int(base["lie_weight"]) - 1))
    yield "total-weight-wrong", changed(total_weight=str(int(base["total_weight"]) + 1))
    yield "epsilon-is-requested", changed(epsilon=1.0)
    yield "epsilon-one-ulp-down", changed(epsilon=math.nextafter(base["epsilon"], 0.0))
    yield "epsilon-requested-differs-from-schema", changed(epsilon_requested=2.0)
    yield "keep-probability-one-ulp-up", changed(keep_probability=math.nextafter(base["keep_probability"], 1.0))
    yield "lie-probability-wrong", changed(lie_probability=0.5)
    yield "epsilon-too-small-for-domain", json.dumps(
        {**base, "schema": card_schema(1e-17, 24), "epsilon_requested": 1e-17})


def _accepted_variants() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    yield "unknown-top-level-field", json.dumps({**base, "comment": "ignored"})
    yield "compact-json", json.dumps(base, separators=(",", ":"))
    yield "domain-size-as-float-literal", json.dumps(base).replace('"domain_size": 24', '"domain_size": 24.0')
    yield "epsilon-requested-as-integer-literal", json.dumps(base).replace('"epsilon_requested": 1.0',
                                                                           '"epsilon_requested": 1')


def shuffled_schema(**shuffle: Any) -> dict[str, Any]:
    """A shuffled collection (docs/contract.md §2): one public and one private attribute, ``shuffle`` its block."""
    return {**schema_doc("ratings", attribute("movie", "integer", True, min=1, max=1682),
                         attribute("rating", "integer", min=1, max=5), epsilon=4.0), "shuffle": shuffle}


#: (id, the schema's shuffle block) of the cards of shuffled collections: with and without assume_injected.
SHUFFLED_BLOCKS: list[tuple[str, dict[str, Any]]] = [
    ("contract-example", {"delta": 1e-9, "min_batch": 10000, "rows_per_device": 1, "shuffler": "independent"}),
    ("defaults-only", {"delta": 1e-6, "min_batch": 20}),
    ("assume-injected-0", {"delta": 1e-9, "min_batch": 500, "shuffler": "independent", "assume_injected": 0}),
    ("assume-injected-min-batch-minus-1", {"delta": 1e-9, "min_batch": 500, "assume_injected": 499}),
    ("assume-injected-above-rows-per-device", {"delta": 1e-9, "min_batch": 1000, "rows_per_device": 3,
                                               "shuffler": "independent", "assume_injected": 50}),
    ("rows-per-device-above-min-batch", {"delta": 1e-9, "min_batch": 2, "rows_per_device": 3}),
    ("min-batch-1", {"delta": 0.5, "min_batch": 1, "rows_per_device": 1000000}),
]


def _shuffled_card_case(case_id: str, block: dict[str, Any]) -> dict[str, Any]:
    card = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**block)))
    spec = card.schema.shuffle
    assert spec is not None
    return {"id": case_id, "shuffle": block, "assume_injected": spec.injected,
            "honest_reports_per_pool": spec.honest_per_pool, "independent": spec.independent,
            "card_json": card.dumps()}


def _tampered_shuffled_cards() -> Iterator[tuple[str, str]]:
    spec = {"delta": 1e-9, "min_batch": 500, "shuffler": "independent"}
    base = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**spec))).to_json()
    block = base["shuffle"]

    def changed(**fields: Any) -> str:
        return json.dumps({**base, "shuffle": {**block, **fields}}, indent=2, sort_keys=True)

    def central(**fields: Any) -> str:
        return changed(central={**block["central"], **fields})

    plain = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    yield "shuffle-block-on-a-collection-not-shuffled", json.dumps({**plain, "shuffle": block})
    yield "shuffle-block-missing", json.dumps({k: v for k, v in base.items() if k != "shuffle"})
    yield "shuffle-block-not-an-object", json.dumps({**base, "shuffle": [block]})
    yield "shuffle-min-batch-differs-from-schema", changed(min_batch=501)
    yield "shuffle-shuffler-differs-from-schema", changed(shuffler="aggregator-operator")
    yield "shuffle-assume-injected-not-in-schema", changed(assume_injected=1)
    yield "shuffle-unknown-field", changed(threshold=500)
    yield "shuffle-local-epsilon-is-requested", changed(local={**block["local"], "epsilon": 4.0})
    yield "shuffle-central-assume-injected-wrong", central(assume_injected=0)
    yield "shuffle-central-honest-reports-wrong", central(honest_reports_per_pool=500)
    yield "shuffle-central-operator-claims-central", central(
        against={**block["central"]["against"], "shuffler": block["central"]["against"]["operator"]})
    yield "shuffle-central-of-the-previous-card-format", changed(central={
        "delta": spec["delta"], "against": ShuffleSpec.from_json(spec).against,
        "epsilon": "per release and per answer, from the counts of reports of each public-key group "
                   "(ldpsynth.shared.amplification, blanket bound; docs/shuffle-accountant.md)"})
    with_injected = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**spec, assume_injected=7))).to_json()
    yield "shuffle-assume-injected-missing-from-the-block", json.dumps(
        {**with_injected, "shuffle": {k: v for k, v in with_injected["shuffle"].items() if k != "assume_injected"}})


def _accepted_shuffled_variants() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(shuffled_schema(delta=1e-9, min_batch=500))).to_json()
    block = base["shuffle"]
    yield "shuffle-min-batch-as-float-literal", json.dumps({**base, "shuffle": {**block, "min_batch": "@"}}).replace(
        '"@"', "500.0")
    yield "shuffle-local-delta-as-integer-literal", json.dumps({**base, "shuffle": {**block, "local": {
        **block["local"], "delta": 0}}})
    yield "shuffle-compact-json", json.dumps(base, separators=(",", ":"))


def shuffled_mechanism_schema(mechanism: str, shuffle: dict[str, Any]) -> dict[str, Any]:
    """A shuffled collection of another mechanism than E (docs/shuffle-accountant.md §9): an oracle's (OUE, OLH,
    HR) over one private integer attribute, or a numeric attribute's (HM, SW); one public attribute each."""
    region = attribute("region", "categorical", True, values=["north", "south"])
    if mechanism in ("HM", "SW"):
        return {**schema_doc(f"shuffled-{mechanism.lower()}", attribute("x", "numeric", range=[0.0, 10.0],
                                                                          mechanism=mechanism), region, epsilon=2.0),
                "shuffle": shuffle}
    return {**schema_doc(f"shuffled-{mechanism.lower()}", attribute("value", "integer", min=0, max=99), region,
                         epsilon=2.0), "mechanism": mechanism, "shuffle": shuffle}


#: (mechanism, the schema's shuffle block) of the shuffled cards of other mechanisms than E (FMT21's clone bound).
SHUFFLED_MECHANISMS: list[tuple[str, dict[str, Any]]] = [
    ("OLH", {"delta": 1e-6, "min_batch": 200, "shuffler": "independent"}),
    ("OUE", {"delta": 1e-6, "min_batch": 100, "rows_per_device": 2, "assume_injected": 5}),
    ("HR", {"delta": 1e-9, "min_batch": 1000}),
    ("HM", {"delta": 1e-6, "min_batch": 200, "shuffler": "independent"}),
    ("SW", {"delta": 1e-6, "min_batch": 50}),
]


def _shuffled_mechanism_case(mechanism: str, block: dict[str, Any]) -> dict[str, Any]:
    card = MechanismCard.for_schema(Schema.from_json(shuffled_mechanism_schema(mechanism, block)))
    spec = card.schema.shuffle
    assert spec is not None
    return {"id": f"shuffled-{mechanism}", "mechanism": mechanism, "bound": shuffle_bound(mechanism),
            "shuffle": block, "assume_injected": spec.injected, "honest_reports_per_pool": spec.honest_per_pool,
            "independent": spec.independent, "card_json": card.dumps()}


def _tampered_shuffled_mechanism_cards() -> Iterator[tuple[str, str]]:
    """Shuffled oracle and numeric cards that must be refused, each naming the field that differs."""
    for mechanism, spec in SHUFFLED_MECHANISMS[:1] + SHUFFLED_MECHANISMS[3:4]:
        base = MechanismCard.for_schema(Schema.from_json(shuffled_mechanism_schema(mechanism, spec))).to_json()
        block = base["shuffle"]
        e_block = shuffle_block(ShuffleSpec.from_json(spec), block["local"]["epsilon"], "E")
        tag = mechanism.lower()
        yield f"shuffled-{tag}-states-the-blanket-bound", json.dumps(
            {**base, "shuffle": {**block, "central": {**block["central"], "epsilon": e_block["central"]["epsilon"]}}})
        yield f"shuffled-{tag}-min-batch-differs-from-schema", json.dumps(
            {**base, "shuffle": {**block, "min_batch": spec["min_batch"] + 1}})
        yield f"shuffled-{tag}-shuffle-block-missing", json.dumps({k: v for k, v in base.items() if k != "shuffle"})
        yield f"shuffled-{tag}-local-epsilon-is-requested", json.dumps(
            {**base, "shuffle": {**block, "local": {**block["local"], "epsilon": 2.0}}})
        plain = {**shuffled_mechanism_schema(mechanism, spec)}
        del plain["shuffle"]
        unshuffled = MechanismCard.for_schema(Schema.from_json(plain)).to_json()
        yield f"{tag}-shuffle-block-on-a-collection-not-shuffled", json.dumps({**unshuffled, "shuffle": block})


def card_vectors() -> dict[str, Any]:
    cases = [_card_case(eps, k) for eps, k in CARD_PAIRS]
    refused = []
    for eps, k in REFUSED_PAIRS:
        field, _ = field_of(MechanismE, eps, k)
        refused.append({"epsilon_requested": exact_float(eps), "domain_size": dec(k), "field": field,
                        "schema": card_schema(eps, k)})
    bad = []
    for case_id, text in _tampered_cards():
        field, _ = field_of(MechanismCard.from_json, text)
        bad.append({"id": case_id, "card_json": text, "field": field})
    for case_id, text in _tampered_shuffled_cards():
        field, _ = field_of(MechanismCard.from_json, text)
        bad.append({"id": case_id, "card_json": text, "field": field})
    for case_id, text in _tampered_shuffled_mechanism_cards():
        field, _ = field_of(MechanismCard.from_json, text)
        bad.append({"id": case_id, "card_json": text, "field": field})
    accepted = []
    for case_id, text in _accepted_variants():
        MechanismCard.from_json(text)
        accepted.append({"id": case_id, "card_json": text})
    shuffled = [_shuffled_card_case(case_id, block) for case_id, block in SHUFFLED_BLOCKS]
    shuffled_variants = []
    for case_id, text in _accepted_shuffled_variants():
        MechanismCard.from_json(text)
        shuffled_variants.append({"id": case_id, "card_json": text})
    shuffled_mechanisms = [_shuffled_mechanism_case(mechanism, block) for mechanism, block in SHUFFLED_MECHANISMS]
    return {"format": FORMAT, "file": "cards", "cases": cases, "refused": refused, "bad_cards": bad,
            "accepted_variants": accepted, "shuffled": shuffled, "shuffled_variants": shuffled_variants,
            "shuffled_mechanisms": shuffled_mechanisms}
