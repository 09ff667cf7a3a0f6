"""The guarantees of a release or a batch of answers, per party, with the counts they come from.

The rule and its proof: docs/shuffle-accountant.md §6; the reasoning in short: docs/internals.md,
``ldpsynth.shared.guarantees``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ldpsynth.shared.errors import LdpsynthError, Status, ValidationError
from ldpsynth.shared.mechanisms.registry import SHUFFLE_BOUNDS, shuffle_bound
from ldpsynth.shared.schema import Schema, ShuffleSpec
from ldpsynth.shared.validation import check_choice, check_int

__all__ = [
    "PARTIES",
    "BelowMinimumBatch",
    "PartyGuarantee",
    "Guarantees",
    "Withheld",
    "key_names",
    "keys_read",
    "withhold",
    "refuse_withheld",
    "central_at",
    "certified",
    "accountant_available",
    "compute",
    "of_card",
]

#: Accountant results kept per process (one per (ε0, k, n, δ, m, bound)).
CACHE_SIZE = 4096
#: The accountant's bound of mechanism E's guarantees (every other mechanism's: ``shuffle_bound``).
BLANKET = SHUFFLE_BOUNDS[0]
#: Scopes of a :class:`Guarantees`.
RELEASE, ANSWERS = "release", "answers"
#: The parties a guarantee is against (docs/shuffle-accountant.md §6).
SHUFFLER, OPERATOR, ANALYSTS = "shuffler", "operator", "analysts"
PARTIES = (SHUFFLER, OPERATOR, ANALYSTS)

_cache: OrderedDict[tuple[float, int, int, float, int, str], float] = OrderedDict()


class BelowMinimumBatch(LdpsynthError):
    """Every group a request reads holds fewer reports than the collection's minimum batch (or a cut or
    dense query reads such a group): nothing is released (FAILED_PRECONDITION).

    The aggregator raises it as its ``WrongState``; the message names the group, its count, the minimum
    and the field that sets it (``min_batch``, or ``shuffle.min_batch`` of a shuffled collection).
    """

    refused_as: ClassVar[Status | None] = Status.FAILED_PRECONDITION

    def __init__(self, what: str, group: str, count: int, minimum: int, groups: int, field: str = "min_batch"):
        self.group, self.count, self.minimum, self.field = group, count, minimum, field
        where = f"group {group!r}" if group else "the collection"
        others = f" ({groups} groups below it)" if groups > 1 else ""
        super().__init__(f"{what} refused: {where} holds {count} reports, below the collection's minimum batch of "
                         f"{minimum} reports ({field}){others}; a group below it is never released nor counted")


@dataclass(frozen=True)
class PartyGuarantee:
    """(ε, δ) per device against one party.

    ``central``: amplified by the shuffle (else the local guarantee, m·ε0 with δ = 0, per device);
    ``honest_reports``: the fewest honest reports of one public key the bound counts per pool (0 when
    local); ``basis``: one sentence saying why this is what that party gets.
    """

    party: str
    epsilon: float
    delta: float
    central: bool
    honest_reports: int
    basis: str

    def to_json(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "per": "device", "central": self.central,
                "honest_reports_per_pool": self.honest_reports, "basis": self.basis}


@dataclass(frozen=True, eq=False)
class Guarantees:
    """The guarantees of a release (``scope`` :data:`RELEASE`) or of a batch of answers (:data:`ANSWERS`).

    ``local_epsilon`` is ε0 per report (δ = 0), against everyone. ``labels``/``counts``: the public-key
    groups read (at or above the minimum batch) and their reports; ``withheld_groups``/``withheld_reports``:
    the groups below it, never released nor counted. With a ``shuffle`` spec, ``central`` is the central
    (ε, δ) per device at the pool floor (``shuffle.honest_per_pool``), evaluated at n = ``evaluated_at`` per
    round (0: too few to amplify, the local guarantee); ``None`` with a ``note`` when it was not computed.
    ``bound``: the accountant's bound it was computed with (:func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound`
    of the collection's mechanism). Per party: :meth:`against`.
    """

    scope: str
    local_epsilon: float
    domain_size: int
    rows_per_device: int
    shuffle: ShuffleSpec | None = None
    labels: tuple[str, ...] = ()
    counts: np.ndarray | None = None
    central: tuple[float, float] | None = None
    evaluated_at: int = 0
    withheld_groups: int = 0
    withheld_reports: int = 0
    note: str = ""
    bound: str = BLANKET

    @property
    def shuffled(self) -> bool:
        """Whether a central guarantee was computed."""
        return self.shuffle is not None and self.central is not None

    @property
    def device_local_epsilon(self) -> float:
        """The local guarantee of a whole device: rows_per_device x ε0 (basic composition)."""
        return self.rows_per_device * self.local_epsilon

    def against(self, party: str) -> PartyGuarantee:
        """What ``party`` (:data:`SHUFFLER`, :data:`OPERATOR` or :data:`ANALYSTS`) gets, per device.

        The shuffler sees who sends what sealed bytes: the local guarantee. The aggregator's operator
        sees every forwarded pool opened: the central guarantee at the pool floor, with an independent
        shuffler only. Analysts see answers and releases, at any time: the same pool floor, since
        answers asked before and after one pool lands differ by that pool (docs/shuffle-accountant.md §6).
        """
        local = PartyGuarantee(party, self.device_local_epsilon, 0.0, False, 0,
                               "the local guarantee: each report is eps0-LDP against everyone")
        if party == SHUFFLER:
            return PartyGuarantee(party, self.device_local_epsilon, 0.0, False, 0,
                                  "the shuffler sees who sends each sealed report: the local guarantee")
        if party not in PARTIES:
            raise ValidationError("party", f"one of {', '.join(PARTIES)}", f"got {party!r}")
        if not self.shuffled or self.central is None or not self.evaluated_at:
            return local
        if party == OPERATOR and self.shuffle is not None and self.shuffle.shuffler != "independent":
            return PartyGuarantee(party, self.device_local_epsilon, 0.0, False, 0,
                                  "the aggregator's operator runs the shuffler too (shuffle.shuffler): it sees who "
                                  "sent each report, so only the local guarantee holds against it")
        assert self.shuffle is not None
        honest = self.shuffle.honest_per_pool
        return PartyGuarantee(party, self.central[0], self.central[1], True, honest,
                              f"every forwarded pool holds at least {honest} honest reports of one public key "
                              f"(shuffle.min_batch {self.shuffle.min_batch} less shuffle.assume_injected "
                              f"{self.shuffle.injected}), and a report hides only among those of its pool")

    @property
    def analysts(self) -> PartyGuarantee:
        """:meth:`against` analysts."""
        return self.against(ANALYSTS)

    @property
    def operator(self) -> PartyGuarantee:
        """:meth:`against` the aggregator's operator."""
        return self.against(OPERATOR)

    def summary(self) -> dict[str, Any]:
        """What every answer record of a shuffled collection (or one with withheld groups) carries: the
        guarantees per party and what was withheld, without the per-group lists."""
        out: dict[str, Any] = {}
        if self.shuffle is not None:
            analysts, operator = self.analysts, self.operator
            out.update({"local_epsilon": self.local_epsilon, "rows_per_device": self.rows_per_device,
                        "analysts_epsilon": analysts.epsilon, "analysts_delta": analysts.delta,
                        "operator_epsilon": operator.epsilon, "operator_delta": operator.delta})
        if self.withheld_groups:
            out.update({"withheld_groups": self.withheld_groups, "withheld_reports": self.withheld_reports})
        return out

    def to_json(self) -> dict[str, Any]:
        """The whole statement, JSON-ready (``guarantees.json`` of a release folder)."""
        out: dict[str, Any] = {
            "scope": self.scope,
            "local": {"epsilon": self.local_epsilon, "delta": 0.0, "per": "report",
                      "device_epsilon": self.device_local_epsilon, "rows_per_device": self.rows_per_device,
                      "against": "everyone: the shuffler, the aggregator's operator and analysts"},
            "domain_size": self.domain_size,
            "withheld": {"groups": self.withheld_groups, "reports": self.withheld_reports},
            "groups": [{"group": label, "reports": int(c)} for label, c in
                       zip(self.labels, (self.counts if self.counts is not None else np.zeros(0, np.int64)).tolist())],
        }
        if self.shuffle is None:
            out["central"] = None
            return out
        central: dict[str, Any] = {"bound": self.bound, "min_batch": self.shuffle.min_batch,
                                   "assume_injected": self.shuffle.injected,
                                   "shuffler": self.shuffle.shuffler, "rows_per_device": self.rows_per_device,
                                   "target_delta": self.shuffle.delta}
        if self.central is not None:
            central.update({"epsilon": self.central[0], "delta": self.central[1], "evaluated_at": self.evaluated_at,
                            "against": {party: self.against(party).to_json() for party in PARTIES}})
        if self.note:
            central["note"] = self.note
        out["central"] = central
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], spec: ShuffleSpec | None) -> Guarantees:
        """Read :meth:`to_json`'s form back (``spec``: the card's shuffle spec)."""
        try:
            local, central, groups = obj["local"], obj.get("central"), obj["groups"]
            kwargs: dict[str, Any] = {
                "scope": str(obj["scope"]), "local_epsilon": float(local["epsilon"]),
                "domain_size": int(obj["domain_size"]), "rows_per_device": int(local["rows_per_device"]),
                "shuffle": spec, "labels": tuple(str(g["group"]) for g in groups),
                "counts": np.array([int(g["reports"]) for g in groups], np.int64),
                "withheld_groups": int(obj["withheld"]["groups"]), "withheld_reports": int(obj["withheld"]["reports"])}
            if central is not None and "epsilon" in central:
                kwargs.update(central=(float(central["epsilon"]), float(central["delta"])),
                              evaluated_at=int(central["evaluated_at"]))
            if central is not None:
                kwargs["note"] = str(central.get("note", ""))
                kwargs["bound"] = check_choice(central.get("bound", BLANKET), "guarantees.central.bound",
                                               SHUFFLE_BOUNDS)
        except (KeyError, TypeError, ValueError):
            raise ValidationError("guarantees", "the JSON of Guarantees.to_json", "malformed") from None
        return cls(**kwargs)


# ----- groups ------------------------------------------------------------------------------------
def key_names(schema: Schema, keys: np.ndarray) -> list[str]:
    """``"movie=50, genre=x"`` per public key (``"all rows"`` without public attributes)."""
    if not schema.public_attributes:
        return ["all rows"] * len(keys)
    values = schema.decode_public(keys)
    columns = [[f"{name}={v}" for v in column.tolist()] for name, column in values.items()]
    return [", ".join(parts) for parts in zip(*columns)]


def _table_reads(block: Any, schema: Schema, present: np.ndarray) -> np.ndarray:
    """Per present key, whether a table block's weights for it vary over the private values (a constant
    row function reads nothing of the reports)."""
    def varies(w: np.ndarray) -> np.ndarray:
        return np.ptp(w, axis=-1) > 0

    if block.attribute is None:
        return np.full(len(present), bool(varies(block.weights[:, 0, :]).any()))
    codes = schema.public_digits(present)[block.attribute]
    values = np.asarray(block.values, np.int64)
    read = np.full(len(present), bool(varies(block.default).any()))
    if len(values):
        listed_read = np.asarray(varies(block.weights).any(axis=0))
        order = np.argsort(values, kind="stable")
        at = np.minimum(np.searchsorted(values[order], codes), len(values) - 1)
        found = values[order][at] == codes
        read = np.where(found, listed_read[order[at]], read)
    return read


def keys_read(batch: Any, present_keys: np.ndarray) -> np.ndarray:
    """Per present public key, whether the answers of ``batch`` (a
    :class:`~ldpsynth.shared.queries.batch.QueryBatch`) depend on its reports: a table block whose row
    function varies for that key, a cut block whose S x T holds it, any dense block."""
    from ldpsynth.shared.queries.batch import CutBlock, TableBlock

    schema: Schema = batch.schema
    present = np.asarray(present_keys, np.int64)
    read = np.zeros(len(present), bool)
    for block in batch.blocks:
        if isinstance(block, TableBlock):
            read |= _table_reads(block, schema, present)
        elif isinstance(block, CutBlock):
            digits = schema.public_digits(present)
            s, t = digits[block.source], digits[block.target]
            for j in range(len(block.positions)):
                read |= np.asarray(block.sources[j, s] & block.targets[j, t])
        else:  # dense: one weight list per row, every row read
            read[:] = True
    return read


@dataclass(frozen=True)
class Withheld:
    """The public-key groups at or above the minimum batch (``kept``, a mask over the present keys) and
    the number and reports of those below it."""

    kept: np.ndarray
    groups: int
    reports: int


def withhold(minimum: int, sizes: np.ndarray) -> Withheld:
    """The minimum-batch rule (docs/shuffle-accountant.md §6): a public-key group of fewer reports than
    the collection's minimum batch (:attr:`~ldpsynth.shared.schema.Schema.minimum_batch`) is never released
    nor counted, in any answer, export or marginal, whatever the query; the others are released whole.

    Parameters
    ----------
    minimum : int
        The minimum batch.
    sizes : numpy.ndarray
        Reports per public-key group.

    Returns
    -------
    Withheld
        Which groups are kept, and what is withheld.
    """
    sizes = np.asarray(sizes, np.int64)
    kept = sizes >= minimum
    return Withheld(kept, int((~kept).sum()), int(sizes[~kept].sum()))


def refuse_withheld(schema: Schema, names: Sequence[str], sizes: np.ndarray, what: str) -> None:
    """Raise :class:`BelowMinimumBatch` naming the smallest of ``sizes`` (groups that would be read whole
    but are below the minimum batch: a cut or dense query, or a request with no group left)."""
    minimum, field = schema.minimum_batch
    sizes = np.asarray(sizes, np.int64)
    if not len(sizes):
        raise BelowMinimumBatch(what, "", 0, minimum, 1, field)
    first = int(np.argmin(sizes))
    group = names[first] if names[first] != "all rows" else ""
    raise BelowMinimumBatch(what, group, int(sizes[first]), minimum, len(sizes), field)


# ----- the accountant ----------------------------------------------------------------------------
def central_at(epsilon0: float, domain_size: int, n: int, delta: float, rows_per_device: int, *,
               bound: str = BLANKET) -> float:
    """The central ε at n reports per round (cached): ``central_epsilon`` (m = 1) or ``composed_epsilon``
    with ``bound`` (one of :data:`~ldpsynth.shared.mechanisms.registry.SHUFFLE_BOUNDS`), never above the
    local m·ε0."""
    bound = check_choice(bound, "bound", SHUFFLE_BOUNDS)
    key = (epsilon0, domain_size, n, delta, rows_per_device, bound)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    from ldpsynth.shared import amplification  # scipy: only where a central ε is computed

    value = amplification.composed_epsilon(epsilon0, domain_size, n, delta, rows_per_device, bound=bound)
    _cache[key] = value
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return value


def accountant_available() -> bool:
    """Whether the accountant's dependency (scipy) can be imported."""
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        return False
    return True


def compute(scope: str, epsilon0: float, domain_size: int, spec: ShuffleSpec | None, labels: Sequence[str],
            counts: np.ndarray, *, rows_per_device: int | None = None, withheld: Withheld | None = None,
            central: bool = True, mechanism: str = "E") -> Guarantees:
    """The guarantees of groups ``labels`` with ``counts`` reports (module docstring).

    ``rows_per_device`` overrides the spec's (a release's own statement, or a device's own reports). Without
    a spec: the local guarantee only. ``central`` False, or scipy missing: the central part is left out
    with a note. ``mechanism`` (the collection's, ε0-LDP at ``epsilon0``) picks the accountant's bound
    (:func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound`); ``domain_size`` is its report domain (the
    blanket bound's k; the clone bound does not use it).
    """
    m = spec.rows_per_device if spec is not None else 1
    if rows_per_device is not None:  # fewer than the spec's would overstate the guarantee
        m = check_int(rows_per_device, "rows_per_device", m, 10**6)
    kept = withheld or Withheld(np.ones(len(counts), bool), 0, 0)
    stated = Guarantees(scope, float(epsilon0), int(domain_size), m, spec, tuple(labels), np.asarray(counts, np.int64),
                        withheld_groups=kept.groups, withheld_reports=kept.reports, bound=shuffle_bound(mechanism))
    if spec is None:
        return stated
    if not central or not accountant_available():
        return replace(stated, note="not computed" if not central else
                       "not computed: the accountant needs scipy (pip install 'ldpsynth[aggregator]')")
    local = (m * float(epsilon0), 0.0)
    per_round = spec.honest_per_pool // m
    if per_round < 1:
        return replace(stated, central=local)
    value = central_at(float(epsilon0), int(domain_size), per_round, spec.delta, m, bound=stated.bound)
    if value >= local[0]:
        return replace(stated, central=local)
    return replace(stated, central=(value, spec.delta), evaluated_at=per_round)


def of_card(card: Any, scope: str, labels: Sequence[str], counts: np.ndarray, *,
            rows_per_device: int | None = None, withheld: Withheld | None = None, central: bool = True) -> Guarantees:
    """:func:`compute` for a :class:`~ldpsynth.shared.card.MechanismCard`'s mechanism, its ε0, |D| and shuffle spec."""
    m = card.mechanism
    return compute(scope, m.epsilon, m.domain_size, card.schema.shuffle, labels, counts,
                   rows_per_device=rows_per_device, withheld=withheld, central=central, mechanism=card.schema.mechanism)


def certified(g: Guarantees, mechanism: str) -> bool:
    """Whether the central (ε, δ) ``g`` states for a collection of ``mechanism`` is one the accountant certifies.

    Checked from the card's terms alone (ε0, |D|, m and the spec's pool floor, not ``g.evaluated_at``), with
    the bound :func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound` gives ``mechanism``: ``g.bound`` must
    be that one, ``g.central[1]`` in [the spec's δ, 1), and ``g.central[0]`` at least the local m·ε0 or an ε
    whose δ(ε) under that bound is at most the spec's δ (``ldpsynth.shared.amplification.certifies``). Nothing
    central stated: True. Needs scipy.
    """
    if g.shuffle is None or g.central is None:
        return True
    epsilon, delta = g.central
    m = g.rows_per_device
    if epsilon >= m * g.local_epsilon and delta >= 0.0:
        return True  # the local guarantee, δ = 0
    per_round = g.shuffle.honest_per_pool // m
    if g.bound != shuffle_bound(mechanism) or per_round < 1 or not g.shuffle.delta <= delta < 1.0:
        return False
    from ldpsynth.shared import amplification

    return amplification.certifies(g.local_epsilon, g.domain_size, per_round, epsilon, g.shuffle.delta,
                                   bound=g.bound, reports_per_device=m)
