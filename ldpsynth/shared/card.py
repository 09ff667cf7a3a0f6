"""The mechanism card: everything needed to debias a release, published with the data.

A card of mechanism E holds the schema, the ε asked for and the ε delivered, :math:`|D|`, and the
exact keep/lie probabilities as integer weights over one space (``keep_weight / total_weight`` and
``lie_weight / total_weight``) plus their float values. A frequency oracle's card
(:func:`oracle_fields`) holds the same schema and ε, the exact support probabilities of its pure
protocol as rationals (``protocol``), the integers its device samples from (``sampler``: OLH's hash
family and its parameters, HR's size, SS's subset size) and the size of a report. Every reader
recomputes all of it from the schema and refuses a card that differs in any field. Anyone holding an
export and its card can reproduce every answer offline.

A shuffled collection's card also has a top-level ``"shuffle"`` block (:func:`shuffle_block`): the
schema's :class:`~ldpsynth.shared.shuffle_spec.ShuffleSpec` and whom each guarantee protects against.
The central ε itself depends on the counts of a release or an answer, which are stated with them
(:mod:`ldpsynth.shared.guarantees`); the card says how it is computed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.hadamard import HadamardResponse
from ldpsynth.shared.mechanisms.olh import OLH
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.oue import OUE
from ldpsynth.shared.mechanisms.pure import DYADIC
from ldpsynth.shared.mechanisms.registry import Mechanism, make_mechanism, name_of, shuffle_bound, version_of
from ldpsynth.shared.mechanisms.subset import SubsetSelection
from ldpsynth.shared.numeric.collection import NumericMechanism
from ldpsynth.shared.schema import Schema, ShuffleSpec

__all__ = [
    "CARD_FORMAT",
    "REFERENCES",
    "oracle_fields",
    "numeric_fields",
    "MechanismCard",
]

CARD_FORMAT = "ldpsynth.mechanism-card/1"
#: Whom the local guarantee protects against (every card of a shuffled collection says it).
LOCAL_AGAINST = "everyone: the aggregator's operator, the shuffler and analysts"


#: The paper (and section) of each mechanism, the card's informational ``reference``.
REFERENCES = {
    "E": "Wang, Ying, Zhang: A Minimax Distortion View of Differentially Private Query Release, eq. 16",
    "OUE": "Wang, Blocki, Li, Jha: Locally Differentially Private Protocols for Frequency Estimation (USENIX "
           "Security 2017), section 4.3 (optimized unary encoding)",
    "OLH": "Wang, Blocki, Li, Jha: Locally Differentially Private Protocols for Frequency Estimation (USENIX "
           "Security 2017), section 4.4 (optimized local hashing), with the GF(2^t)-linear hash family of the card's "
           "sampler",
    "HR": "The Hadamard mechanism: one coefficient of the value's Hadamard row, randomized (the binary case of "
          "local hashing with the hash v -> <j, v>; compared with Acharya, Sun, Zhang, AISTATS 2019)",
    "SS": "Ye, Barg: Optimal Schemes for Discrete Distribution Estimation Under Locally Differential Privacy (IEEE "
          "Trans. Inf. Theory 2018); Wang et al.: Mutual Information Optimally Local Private Discrete Distribution "
          "Estimation (arXiv:1607.08025): subset selection",
    "HM": "Wang et al.: Collecting and Analyzing Multidimensional Data with Local Differential Privacy (ICDE 2019), "
          "section III-C (Hybrid Mechanism), on an exact grid (docs/numeric.md)",
    "SW": "Li et al.: Estimating Numerical Distributions under Local Differential Privacy (SIGMOD 2020), Square Wave, "
          "on an exact grid (docs/numeric.md)",
}
#: What OLH's hash is, on its card.
OLH_HASH_FAMILY = ("seed = (alpha << field_bits) | beta, alpha and beta in GF(2^field_bits) = GF(2)[x]/(field_modulus) "
                   "(bits = coefficients); bucket bit j of value v (j < hash_bits) = Tr(x^j (alpha v + (beta v)^2)), "
                   "Tr the trace to GF(2); docs/contract.md section 5")


def _rational(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _sampler(oracle: FrequencyOracle) -> dict[str, Any]:
    """The integers a device samples ``oracle`` from (docs/contract.md §5)."""
    if isinstance(oracle, OUE):
        return {"true_bit": "1/2", "other_bit": f"{oracle.small}/{DYADIC}"}
    if isinstance(oracle, OLH):
        return {"hash_family": OLH_HASH_FAMILY, "field_bits": oracle.field_bits, "field_modulus": oracle.modulus,
                "seed_bits": 2 * oracle.field_bits, "hash_bits": oracle.hash_bits, "hash_range": oracle.hash_range,
                "keep_weight": str(oracle.keep_weight), "lie_weight": str(oracle.lie_weight),
                "total_weight": str(oracle.total_weight)}
    if isinstance(oracle, HadamardResponse):
        return {"size": oracle.size, "bits": oracle.bits, "keep_bit": f"{oracle.big}/{DYADIC}"}
    assert isinstance(oracle, SubsetSelection)
    k, d = oracle.domain_size, oracle.subset_size
    return {"subset_size": d, "keep_weight": str(oracle.keep_weight), "lie_weight": str(oracle.lie_weight),
            "include_true": f"{d * oracle.keep_weight}/{d * oracle.keep_weight + (k - d) * oracle.lie_weight}"}


def oracle_fields(oracle: FrequencyOracle) -> dict[str, Any]:
    """The mechanism fields of a frequency oracle's card: ε, |D|, the pure protocol's exact support
    probabilities (``protocol``: :math:`p^*, q^*, \\pi_1, \\pi_2` as ``"numerator/denominator"``), the
    sampler's integers and the bytes of a report."""
    pure = oracle.protocol
    return {"epsilon_requested": oracle.epsilon_requested, "epsilon": oracle.epsilon,
            "domain_size": oracle.domain_size,
            "protocol": {"p": _rational(pure.p), "q": _rational(pure.q), "pair_true": _rational(pure.pair_true),
                         "pair_other": _rational(pure.pair_other)},
            "sampler": _sampler(oracle), "report_bytes": oracle.report_bytes}


def numeric_fields(mechanism: NumericMechanism, schema: Schema) -> dict[str, Any]:
    """The mechanism fields of a numeric collection's card: the attribute, its range and mechanism, and the
    mechanism's ε, report domain and exact sampler (:meth:`NumericMechanism.card_fields`); the declared ``step``
    when the attribute has one (docs/numeric.md, "Declared levels")."""
    attribute = schema.numeric
    assert attribute is not None
    numeric: dict[str, Any] = {"attribute": attribute.name, "range": [attribute.lo, attribute.hi],
                               "mechanism": mechanism.name}
    if attribute.step is not None:                  # absent without levels: such cards are unchanged
        numeric["step"] = attribute.step
    return {"numeric": numeric, **mechanism.card_fields()}


def mechanism_fields(mechanism: Mechanism, schema: Schema) -> dict[str, Any]:
    """The mechanism fields of a frequency oracle's or a numeric collection's card (not E's)."""
    if isinstance(mechanism, NumericMechanism):
        return numeric_fields(mechanism, schema)
    assert isinstance(mechanism, FrequencyOracle)
    return oracle_fields(mechanism)


def _central_rule(mechanism: str) -> str:
    """How the card's central ε is computed: E's words are those of every card before other mechanisms could be
    shuffled (its bytes unchanged); the others name the clone bound they get (``shuffle_bound``)."""
    if shuffle_bound(mechanism) == "blanket":
        return ("composed_epsilon(epsilon0, |D|, honest_reports_per_pool // rows_per_device, delta, rows_per_device) "
                "(ldpsynth.shared.amplification, blanket bound; docs/shuffle-accountant.md §6), stated with every "
                "answer and release")
    return (f"composed_epsilon(epsilon0, |D|, honest_reports_per_pool // rows_per_device, delta, rows_per_device, "
            f"bound={shuffle_bound(mechanism)!r}) (ldpsynth.shared.amplification, FMT21's clone bound for any "
            f"epsilon0-LDP mechanism, here {mechanism}; docs/shuffle-accountant.md §6 and §9), stated with every "
            "answer and release")


def shuffle_block(spec: ShuffleSpec, epsilon0: float, mechanism: str = "E") -> dict[str, Any]:
    """The card's ``"shuffle"`` block: the spec, the guarantee against each party and what it rests on
    (docs/shuffle-accountant.md §6), with the accountant's bound of ``mechanism``. The central ε is a function
    of the card alone (the pool floor), which every answer and release states, computed."""
    return {**spec.to_json(),
            "local": {"epsilon": epsilon0, "delta": 0.0, "per": "report", "against": LOCAL_AGAINST},
            "central": {"delta": spec.delta, "honest_reports_per_pool": spec.honest_per_pool,
                        "assume_injected": spec.injected, "per": "device",
                        "epsilon": _central_rule(mechanism),
                        "against": {"shuffler": "the local guarantee only: the shuffler sees who sends each report",
                                    "operator": ("the central guarantee: the shuffler is run by an independent party"
                                                 if spec.independent else "the local guarantee only: the aggregator's "
                                                 "operator runs the shuffler too"),
                                    "analysts": "the central guarantee, whenever they ask: answers asked before and "
                                                "after one pool lands differ by that pool"}}}


@dataclass(frozen=True)
class MechanismCard:
    """Schema + its mechanism (E or a frequency oracle), serialisable to JSON and back without loss.

    Attributes
    ----------
    schema : Schema
        The collection's schema.
    mechanism : Mechanism
        The schema's mechanism (``schema.mechanism``: E, or a frequency oracle of
        :mod:`ldpsynth.shared.mechanisms`) over its private domain at its ε (:meth:`for_schema`
        builds it; the constructor does not check that the two agree, :meth:`from_json` does).
    """

    schema: Schema
    mechanism: Mechanism

    @classmethod
    def for_schema(cls, schema: Schema) -> MechanismCard:
        """The card of the schema's mechanism, releasing its private domain at its ε.

        Parameters
        ----------
        schema : Schema
            The collection's schema.

        Returns
        -------
        MechanismCard

        Raises
        ------
        ValidationError
            Naming ``epsilon``: the schema's ε is below the exact sampler's resolution for its
            :math:`|D|`.
        """
        return cls(schema, make_mechanism(schema.mechanism, schema.epsilon, schema.private_domain_size))

    @property
    def version(self) -> str:
        return version_of(name_of(self.mechanism))

    @property
    def is_oracle(self) -> bool:
        """Whether the mechanism is a frequency oracle (not E)."""
        return isinstance(self.mechanism, FrequencyOracle)

    @property
    def has_reports(self) -> bool:
        """Whether a release holds the devices' reports rather than E's codes per private attribute (a frequency
        oracle's or a numeric collection's)."""
        return not isinstance(self.mechanism, MechanismE)

    @property
    def is_numeric(self) -> bool:
        """Whether the mechanism is a numeric attribute's (HM or SW)."""
        return isinstance(self.mechanism, NumericMechanism)

    @property
    def mechanism_e(self) -> MechanismE:
        """The card's mechanism E (for what only E has, e.g. the comparison with central mechanisms);
        :class:`~ldpsynth.shared.errors.ValidationError` naming the mechanism for a frequency oracle's card."""
        if not isinstance(self.mechanism, MechanismE):
            raise ValidationError("mechanism", "E (this needs mechanism E's collection)",
                                  f"got {name_of(self.mechanism)!r}")
        return self.mechanism

    def to_json(self) -> dict[str, Any]:
        """The card as its JSON object (what :meth:`from_json` reads and verifies).

        Returns
        -------
        dict
            ``format``, ``mechanism``, ``version``, ``reference``, ``schema``, the ε asked for and
            delivered, ``domain_size``, the keep/lie probabilities, the integer weights (as decimal
            strings) and, for a shuffled collection, the ``shuffle`` block.
        """
        m = self.mechanism
        if not isinstance(m, MechanismE):
            name = name_of(m)
            fields = {"format": CARD_FORMAT, "mechanism": name, "version": self.version, "reference": REFERENCES[name],
                      "schema": self.schema.to_json(), **mechanism_fields(m, self.schema)}
            if self.schema.shuffle is not None:
                fields["shuffle"] = shuffle_block(self.schema.shuffle, m.epsilon, name)
            return fields
        out = {
            "format": CARD_FORMAT,
            "mechanism": "E",
            "version": m.VERSION,
            "reference": "Wang, Ying, Zhang: A Minimax Distortion View of Differentially Private Query Release, eq. 16",
            "schema": self.schema.to_json(),
            "epsilon_requested": m.epsilon_requested,
            "epsilon": m.epsilon,
            "domain_size": m.domain_size,
            "keep_probability": m.keep_probability,
            "lie_probability": m.lie_probability,
            "keep_weight": str(m.keep_weight),
            "lie_weight": str(m.lie_weight),
            "total_weight": str(m.total_weight),
        }
        if self.schema.shuffle is not None:
            out["shuffle"] = shuffle_block(self.schema.shuffle, m.epsilon)
        return out

    def dumps(self) -> str:
        """The card as indented JSON text with sorted keys (the ``card.json`` of a release).

        Returns
        -------
        str
        """
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def save(self, path: str | Path) -> None:
        """Write :meth:`dumps` and a newline to the file ``path`` (UTF-8), replacing it.

        Parameters
        ----------
        path : str or pathlib.Path
            The file to write; its folder must exist.

        Raises
        ------
        OSError
            The file cannot be written.
        """
        Path(path).write_text(self.dumps() + "\n", encoding="utf-8")

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> MechanismCard:
        """Parse and *verify* a card, so that a tampered or inconsistent card is rejected.

        The stored probabilities must be exactly those of E at the stored ε and |D|.

        Parameters
        ----------
        obj : mapping or str
            A card's JSON object (as :meth:`to_json` makes it), or its JSON text.

        Returns
        -------
        MechanismCard

        Raises
        ------
        ValidationError
            Naming ``card`` (text that is not JSON), ``card.format``, ``card.version``,
            ``card.mechanism``, the stored number that does not match (``card.<key>``) or
            ``card.shuffle...``; a :class:`~ldpsynth.shared.errors.SchemaError` for the schema in it.
        """
        if isinstance(obj, str):
            obj = jsonio.loads(obj, "card", "a JSON mechanism card")
        if not isinstance(obj, Mapping) or obj.get("format") != CARD_FORMAT:
            raise ValidationError("card.format", repr(CARD_FORMAT), "not a mechanism card of this format")
        schema = Schema.from_json(cast(Mapping[str, Any], obj.get("schema")))  # checked by from_json
        if obj.get("mechanism") != schema.mechanism:
            raise ValidationError("card.mechanism", f"{schema.mechanism!r} (the schema's mechanism)",
                                  f"got {obj.get('mechanism')!r}")
        if obj.get("version") != version_of(schema.mechanism):
            raise ValidationError("card.version", repr(version_of(schema.mechanism)), f"got {obj.get('version')!r}")
        # The mechanism is rebuilt from the schema's ε, and every stored number (also the float
        # probabilities and the ε asked for, which readers of the JSON may use directly) must match it:
        # previously epsilon_requested silently replaced the schema's ε and the floats were not checked.
        card = cls.for_schema(schema)
        m = card.mechanism
        if not isinstance(m, MechanismE):
            for key, value in mechanism_fields(m, schema).items():  # field by field (the blocks whole)
                if obj.get(key) != value:
                    raise ValidationError(f"card.{key}", f"{value!r} ({schema.mechanism} at the card's epsilon and "
                                          "domain)", "inconsistent")
            _check_shuffle_block(obj, schema, m.epsilon)
            return card
        expected = {"domain_size": m.domain_size, "keep_weight": str(m.keep_weight), "lie_weight": str(m.lie_weight),
                    "total_weight": str(m.total_weight), "epsilon": m.epsilon,
                    "epsilon_requested": m.epsilon_requested, "keep_probability": m.keep_probability,
                    "lie_probability": m.lie_probability}
        for key, value in expected.items():
            if obj.get(key) != value:
                raise ValidationError(f"card.{key}", f"{value!r} (E at the card's epsilon and domain)", "inconsistent")
        _check_shuffle_block(obj, schema, m.epsilon)
        return card

    @classmethod
    def load(cls, path: str | Path) -> MechanismCard:
        """The card in the JSON file at ``path`` (:meth:`from_json`).

        Parameters
        ----------
        path : str or pathlib.Path
            A readable UTF-8 JSON file, e.g. a release's ``card.json``.

        Returns
        -------
        MechanismCard

        Raises
        ------
        ValidationError
            Naming ``card``: the file cannot be read or is not UTF-8; else as :meth:`from_json`.
        """
        return cls.from_json(jsonio.read_text(path, "card"))


def _check_shuffle_block(obj: Mapping[str, Any], schema: Schema, epsilon0: float) -> None:
    """The card's ``"shuffle"`` block is :func:`shuffle_block`'s for the schema's spec and mechanism, field by
    field (absent when the schema has no shuffle block)."""
    spec = schema.shuffle
    if spec is None:
        if "shuffle" in obj:
            raise ValidationError("card.shuffle", "absent (the card's schema has no shuffle block)", "present")
        return
    block = obj.get("shuffle")
    if not isinstance(block, Mapping):
        raise ValidationError("card.shuffle", "the shuffle block of the schema's shuffle spec",
                              "missing" if block is None else f"got {type(block).__name__}")
    expected = shuffle_block(spec, epsilon0, schema.mechanism)
    for key, value in expected.items():  # field by field, as the numbers of the card
        if block.get(key) != value:
            raise ValidationError(f"card.shuffle.{key}", f"{value!r} (from the schema's shuffle block)",
                                  "inconsistent")
    if set(block) != set(expected):
        raise ValidationError("card.shuffle", f"the fields {sorted(expected)}",
                              f"unknown fields {sorted(set(block) - set(expected))}")
