"""The mechanism card: everything needed to debias a release, published with the data.

A card holds the schema, the ε asked for and the ε delivered, :math:`|D|`, and the exact
keep/lie probabilities as integer weights over one space (``keep_weight / total_weight`` and
``lie_weight / total_weight``) plus their float values. Anyone holding an export of the
synthetic database and its card can reproduce every answer offline.

A shuffled collection's card also has a top-level ``"shuffle"`` block (:func:`shuffle_block`): the
schema's :class:`~ldpsynth.shared.schema.ShuffleSpec` and whom each guarantee protects against.
The central ε itself depends on the counts of a release or an answer, which are stated with them
(:mod:`ldpsynth.shared.guarantees`); the card says how it is computed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.schema import Schema, ShuffleSpec

__all__ = [
    "CARD_FORMAT",
    "MechanismCard",
]

CARD_FORMAT = "ldpsynth.mechanism-card/1"
#: Whom the local guarantee protects against (every card of a shuffled collection says it).
LOCAL_AGAINST = "everyone: the aggregator's operator, the shuffler and analysts"


def shuffle_block(spec: ShuffleSpec, epsilon0: float) -> dict[str, Any]:
    """The card's ``"shuffle"`` block: the spec, both guarantees and whom they protect against."""
    return {**spec.to_json(),
            "local": {"epsilon": epsilon0, "delta": 0.0, "per": "report", "against": LOCAL_AGAINST},
            "central": {"delta": spec.delta, "against": spec.against,
                        "epsilon": "per release and per answer, from the counts of reports of each public-key "
                                   "group (ldpsynth.shared.amplification, blanket bound; docs/shuffle-accountant.md)"}}


@dataclass(frozen=True)
class MechanismCard:
    """Schema + mechanism E, serialisable to JSON and back without loss.

    Attributes
    ----------
    schema : Schema
        The collection's schema.
    mechanism : MechanismE
        Mechanism E over the schema's private domain at its ε (:meth:`for_schema` builds it; the
        constructor does not check that the two agree, :meth:`from_json` does).
    """

    schema: Schema
    mechanism: MechanismE

    @classmethod
    def for_schema(cls, schema: Schema) -> MechanismCard:
        """The card of the mechanism E that releases ``schema``'s private domain at its ε.

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
            :math:`|D|` (:class:`~ldpsynth.shared.mechanism.MechanismE`).
        """
        return cls(schema, MechanismE(schema.epsilon, schema.private_domain_size))

    @property
    def version(self) -> str:
        return self.mechanism.VERSION

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
        if obj.get("version") != MechanismE.VERSION:
            raise ValidationError("card.version", repr(MechanismE.VERSION), f"got {obj.get('version')!r}")
        if obj.get("mechanism") != "E":
            raise ValidationError("card.mechanism", "'E'", f"got {obj.get('mechanism')!r}")
        schema = Schema.from_json(cast(Mapping[str, Any], obj.get("schema")))  # checked by from_json
        # The mechanism is rebuilt from the schema's ε, and every stored number (also the float
        # probabilities and the ε asked for, which readers of the JSON may use directly) must match it:
        # previously epsilon_requested silently replaced the schema's ε and the floats were not checked.
        card = cls.for_schema(schema)
        m = card.mechanism
        expected = {"domain_size": m.domain_size, "keep_weight": str(m.keep_weight), "lie_weight": str(m.lie_weight),
                    "total_weight": str(m.total_weight), "epsilon": m.epsilon,
                    "epsilon_requested": m.epsilon_requested, "keep_probability": m.keep_probability,
                    "lie_probability": m.lie_probability}
        for key, value in expected.items():
            if obj.get(key) != value:
                raise ValidationError(f"card.{key}", f"{value!r} (E at the card's epsilon and domain)", "inconsistent")
        spec = schema.shuffle
        if spec is None:
            if "shuffle" in obj:
                raise ValidationError("card.shuffle", "absent (the card's schema has no shuffle block)", "present")
            return card
        block = obj.get("shuffle")
        if not isinstance(block, Mapping):
            raise ValidationError("card.shuffle", "the shuffle block of the schema's shuffle spec",
                                  "missing" if block is None else f"got {type(block).__name__}")
        for key, value in shuffle_block(spec, m.epsilon).items():  # field by field, as the numbers above
            if block.get(key) != value:
                raise ValidationError(f"card.shuffle.{key}", f"{value!r} (from the schema's shuffle block)",
                                      "inconsistent")
        if set(block) != set(shuffle_block(spec, m.epsilon)):
            raise ValidationError("card.shuffle", f"the fields {sorted(shuffle_block(spec, m.epsilon))}",
                                  f"unknown fields {sorted(set(block) - set(shuffle_block(spec, m.epsilon)))}")
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
