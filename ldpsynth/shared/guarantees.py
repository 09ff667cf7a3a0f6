"""Both guarantees of a release or a batch of answers, with the counts they come from.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.guarantees``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ldpsynth.shared.errors import LdpsynthError, Status, ValidationError
from ldpsynth.shared.schema import Schema, ShuffleSpec
from ldpsynth.shared.validation import check_int

__all__ = [
    "BelowMinimumBatch",
    "Guarantees",
    "key_names",
    "release_groups",
    "batch_groups",
    "check_min_batch",
    "releases_by_group",
    "ladder",
    "central_at",
    "accountant_available",
    "compute",
    "of_card",
    "local_epsilon_for",
]

#: Ratio of the ladder of counts at which groups other than the weakest are evaluated (module docstring).
LADDER_RATIO = 2.0**0.25
#: Accountant results kept per process (one per (ε0, k, n, δ, m)).
CACHE_SIZE = 4096
#: The accountant's bound used for every stated central guarantee.
BOUND = "blanket"
#: Scopes of a :class:`Guarantees`.
RELEASE, ANSWERS = "release", "answers"

_cache: OrderedDict[tuple[float, int, int, float, int], float] = OrderedDict()


class BelowMinimumBatch(LdpsynthError):
    """Fewer reports than the collection's minimum batch: nothing is released (FAILED_PRECONDITION).

    The aggregator raises it as its ``WrongState``; the message names the group, its count, the minimum
    and the field that sets it (``min_batch``, or ``shuffle.min_batch`` of a shuffled collection).
    """

    refused_as: ClassVar[Status | None] = Status.FAILED_PRECONDITION

    def __init__(self, what: str, group: str, count: int, minimum: int, groups: int, field: str = "min_batch"):
        self.group, self.count, self.minimum, self.field = group, count, minimum, field
        where = f"group {group!r}" if group else "the collection"
        others = f" ({groups} groups below it)" if groups > 1 else ""
        why = ("a shuffle of fewer reports amplifies too little" if field.startswith("shuffle.")
               else "answers from fewer reports describe too few devices")
        super().__init__(f"{what} refused: {where} holds {count} reports, below the collection's minimum batch of "
                         f"{minimum} reports ({field}){others}; {why}, so nothing is released from them")


@dataclass(frozen=True, eq=False)
class Guarantees:
    """The guarantees of a release (``scope`` :data:`RELEASE`) or of a batch of answers (:data:`ANSWERS`).

    ``local_epsilon`` is ε0 per report (δ = 0), against everyone. With a ``shuffle`` spec, per group
    ``labels[g]``: ``counts[g]`` reports, central ``(epsilon[g], delta[g])``, computed at n =
    ``evaluated[g]`` per round (module docstring; 0 where the group was too small to amplify); the
    weakest group's is ``(central_epsilon, central_delta)``. ``note`` says why a central guarantee is
    missing where one was expected (e.g. no scipy for the accountant).
    """

    scope: str
    local_epsilon: float
    domain_size: int
    rows_per_device: int
    shuffle: ShuffleSpec | None = None
    labels: tuple[str, ...] = ()
    counts: np.ndarray | None = None
    epsilon: np.ndarray | None = None
    delta: np.ndarray | None = None
    evaluated: np.ndarray | None = None
    note: str = ""

    @property
    def shuffled(self) -> bool:
        """Whether a central guarantee was computed."""
        return self.shuffle is not None and self.epsilon is not None

    @property
    def device_local_epsilon(self) -> float:
        """The local guarantee of a whole device: rows_per_device x ε0 (basic composition)."""
        return self.rows_per_device * self.local_epsilon

    def _weakest(self) -> int | None:
        """The group with the largest ε among those holding reports (an empty group protects no one)."""
        if not self.shuffled or self.epsilon is None or self.counts is None or not (self.counts > 0).any():
            return None
        eps = np.where(self.counts > 0, self.epsilon, -np.inf)
        top = np.flatnonzero(eps == eps.max())
        return int(top[np.argmin(self.counts[top])])

    @property
    def central_epsilon(self) -> float | None:
        """The weakest group's ε (0.0 when no private value is read; None when not shuffled)."""
        if not self.shuffled:
            return None
        weakest = self._weakest()
        return 0.0 if weakest is None else float(self.epsilon[weakest])  # type: ignore[index]

    @property
    def central_delta(self) -> float | None:
        """The largest δ over the groups (every group satisfies (central_epsilon, central_delta))."""
        if not self.shuffled:
            return None
        if self.delta is None or self.counts is None or not (self.counts > 0).any():
            return 0.0
        return float(self.delta[self.counts > 0].max())

    @property
    def weakest_group(self) -> str | None:
        weakest = self._weakest()
        return None if weakest is None else self.labels[weakest]

    def summary(self) -> dict[str, Any]:
        """What every answer record of a shuffled collection carries: both guarantees, without the
        per-group lists (nothing for an unshuffled one: its records' ``epsilon`` is the local ε0)."""
        if self.shuffle is None:
            return {}
        return {"local_epsilon": self.local_epsilon, "rows_per_device": self.rows_per_device,
                "central_epsilon": self.central_epsilon, "central_delta": self.central_delta}

    def to_json(self) -> dict[str, Any]:
        """The whole statement, JSON-ready (``guarantees.json`` of a release folder)."""
        out: dict[str, Any] = {
            "scope": self.scope,
            "local": {"epsilon": self.local_epsilon, "delta": 0.0, "per": "report",
                      "device_epsilon": self.device_local_epsilon, "rows_per_device": self.rows_per_device,
                      "against": "everyone: the aggregator's operator, the shuffler and analysts"},
            "domain_size": self.domain_size,
        }
        if self.shuffle is None:
            out["central"] = None
            return out
        central: dict[str, Any] = {"against": self.shuffle.against, "bound": BOUND,
                                   "min_batch": self.shuffle.min_batch, "shuffler": self.shuffle.shuffler,
                                   "rows_per_device": self.rows_per_device, "target_delta": self.shuffle.delta}
        if self.shuffled:
            assert self.counts is not None and self.epsilon is not None and self.delta is not None
            assert self.evaluated is not None
            central.update({
                "epsilon": self.central_epsilon, "delta": self.central_delta, "weakest_group": self.weakest_group,
                "reports": int(self.counts.sum()),
                "groups": [{"group": label, "reports": int(c), "epsilon": float(e), "delta": float(d),
                            "evaluated_at": int(v)}
                           for label, c, e, d, v in zip(self.labels, self.counts.tolist(), self.epsilon.tolist(),
                                                        self.delta.tolist(), self.evaluated.tolist())]})
        if self.note:
            central["note"] = self.note
        out["central"] = central
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], spec: ShuffleSpec | None) -> Guarantees:
        """Read :meth:`to_json`'s form back (``spec``: the card's shuffle spec)."""
        try:
            local, central = obj["local"], obj.get("central")
            kwargs: dict[str, Any] = {"scope": str(obj["scope"]), "local_epsilon": float(local["epsilon"]),
                                      "domain_size": int(obj["domain_size"]),
                                      "rows_per_device": int(local["rows_per_device"]), "shuffle": spec}
            if central is not None and "groups" in central:
                groups = central["groups"]
                kwargs.update(labels=tuple(str(g["group"]) for g in groups),
                              counts=np.array([int(g["reports"]) for g in groups], np.int64),
                              epsilon=np.array([float(g["epsilon"]) for g in groups]),
                              delta=np.array([float(g["delta"]) for g in groups]),
                              evaluated=np.array([int(g["evaluated_at"]) for g in groups], np.int64))
            if central is not None:
                kwargs["note"] = str(central.get("note", ""))
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


def release_groups(schema: Schema, present_keys: np.ndarray, sizes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The groups of a release: every public key that holds reports, with its count."""
    return key_names(schema, present_keys), np.asarray(sizes, np.int64)


def _table_classes(block: Any, schema: Schema, present: np.ndarray) -> tuple[np.ndarray, Callable[[int], str]]:
    """Per present key, the class of a table block that reads it (-1: not read), and the classes' names."""
    def varies(w: np.ndarray) -> np.ndarray:
        return np.ptp(w, axis=-1) > 0

    if block.attribute is None:
        read = bool(varies(block.weights[:, 0, :]).any())
        return np.full(len(present), 0 if read else -1, np.int64), lambda c: "all rows" if c >= 0 else ""
    attr = schema.attribute(block.attribute)
    codes = schema.public_digits(present)[block.attribute]
    values = np.asarray(block.values, np.int64)
    listed_read: np.ndarray = np.asarray(varies(block.weights).any(axis=0)) if len(values) else np.zeros(0, bool)
    default_read = bool(varies(block.default).any())
    order = np.argsort(values, kind="stable")
    at = np.minimum(np.searchsorted(values[order], codes), max(len(values) - 1, 0))
    found = (values[order][at] == codes) if len(values) else np.zeros(len(codes), bool)
    listed = order[at] if len(values) else np.zeros(len(codes), np.int64)
    classes = np.where(found, np.where(listed_read[listed] if len(values) else False, listed, -1),
                       len(values) if default_read else -1)
    names = attr.decode(values) if len(values) else np.zeros(0)

    def name(c: int) -> str:
        if c < 0:
            return f"{block.attribute}: other values"
        return f"{block.attribute}={names[c]}" if c < len(values) else f"{block.attribute}: the unlisted values"

    return classes.astype(np.int64), name


def batch_groups(batch: Any, present_keys: np.ndarray, sizes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The groups of rows the answers of ``batch`` (a :class:`~ldpsynth.shared.queries.batch.QueryBatch`)
    depend on, named, with their counts (module docstring). Present keys: those holding reports."""
    from ldpsynth.shared.queries.batch import CutBlock, TableBlock

    schema: Schema = batch.schema
    present = np.asarray(present_keys, np.int64)
    sizes = np.asarray(sizes, np.int64)
    columns: list[np.ndarray] = []
    namers: list[Callable[[int], str]] = []
    full = key_names(schema, present) if any(not isinstance(b, TableBlock) for b in batch.blocks) else None
    for block in batch.blocks:
        if isinstance(block, TableBlock):
            classes, namer = _table_classes(block, schema, present)
        elif isinstance(block, CutBlock):
            digits = schema.public_digits(present)
            s, t = digits[block.source], digits[block.target]
            read: np.ndarray = np.zeros(len(present), bool)
            for j in range(len(block.positions)):
                read |= np.asarray(block.sources[j, s] & block.targets[j, t])
            classes = np.where(read, np.arange(len(present)), -1)
            namer = _cut_namer(full)  # type: ignore[arg-type]
        else:  # dense: one weight list per row, every row read
            classes = np.arange(len(present), dtype=np.int64)
            namer = _cut_namer(full)  # type: ignore[arg-type]
        columns.append(classes)
        namers.append(namer)
    if not columns:
        return [], np.zeros(0, np.int64)
    matrix = np.stack(columns, axis=1)
    used = np.asarray((matrix >= 0).any(axis=1))
    if not used.any():
        return [], np.zeros(0, np.int64)
    unique, inverse = np.unique(matrix[used], axis=0, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=sizes[used], minlength=len(unique)).astype(np.int64)
    labels = []
    for row in unique:
        parts = [part for part in dict.fromkeys(namers[b](int(c)) for b, c in enumerate(row)) if part]
        if len(parts) > 1 and "all rows" in parts:
            parts.remove("all rows")
        labels.append("; ".join(parts))
    return labels, counts


def _cut_namer(full: list[str]) -> Callable[[int], str]:
    return lambda c: full[c] if c >= 0 else "outside every cut's S x T"


def check_min_batch(schema: Schema, labels: Sequence[str], counts: np.ndarray, what: str) -> None:
    """Raise :class:`BelowMinimumBatch` (naming the smallest group) when a group holds fewer reports than
    the schema's minimum batch (:attr:`~ldpsynth.shared.schema.Schema.minimum_batch`: ``min_batch``, or a
    shuffled collection's ``shuffle.min_batch`` when larger); nothing to check for a minimum of 1."""
    minimum, field = schema.minimum_batch
    if minimum <= 1 or not len(counts):
        return
    low = np.flatnonzero(np.asarray(counts) < minimum)
    if low.size:
        first = int(low[np.argmin(np.asarray(counts)[low])])
        group = labels[first] if labels[first] != "all rows" else ""
        raise BelowMinimumBatch(what, group, int(counts[first]), minimum, int(low.size), field)


def releases_by_group(schema: Schema) -> bool:
    """Whether a release of ``schema`` is checked or stated per group of rows: a shuffled collection
    (its central guarantee is per group) or one with a minimum batch."""
    return schema.shuffle is not None or schema.minimum_batch[0] > 1


# ----- the accountant, grouped -------------------------------------------------------------------
def ladder(n: np.ndarray) -> np.ndarray:
    """Per per-round count n (int64, > 0), the n it is evaluated at: itself for the smallest, else the
    largest ⌊LADDER_RATIO^j⌋ at or below it, but not below the smallest (module docstring)."""
    n = np.asarray(n, np.int64)
    if not n.size:
        return n.copy()
    smallest = int(n.min())
    j = np.floor(np.log(np.maximum(n, 1)) / math.log(LADDER_RATIO))
    point = np.floor(LADDER_RATIO**j).astype(np.int64)
    over = point > n
    point[over] = np.floor(LADDER_RATIO ** (j[over] - 1)).astype(np.int64)
    up = np.floor(LADDER_RATIO ** (j + 1)).astype(np.int64) <= n  # the float log may land one step low
    point[up] = np.floor(LADDER_RATIO ** (j[up] + 1)).astype(np.int64)
    return np.where(n == smallest, n, np.maximum(point, smallest))


def central_at(epsilon0: float, domain_size: int, n: int, delta: float, rows_per_device: int) -> float:
    """The central ε at n reports per round (cached): ``central_epsilon`` (m = 1) or ``composed_epsilon``,
    never above the local m·ε0."""
    key = (epsilon0, domain_size, n, delta, rows_per_device)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    from ldpsynth.shared import amplification  # scipy: only where a central ε is computed

    if rows_per_device == 1:
        value = amplification.central_epsilon(epsilon0, domain_size, n, delta, bound=BOUND)
    else:
        value = amplification.composed_epsilon(epsilon0, domain_size, n, delta, rows_per_device, bound=BOUND)
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
            counts: np.ndarray, *, rows_per_device: int | None = None, central: bool = True) -> Guarantees:
    """The guarantees of groups ``labels`` with ``counts`` reports (module docstring).

    ``rows_per_device`` overrides the spec's (a release's own statement). Without a spec: the local
    guarantee only. ``central`` False, or scipy missing: the central part is left out with a note.
    """
    m = spec.rows_per_device if spec is not None else 1
    if rows_per_device is not None:
        m = check_int(rows_per_device, "rows_per_device", 1, 10**6)
    base = Guarantees(scope, float(epsilon0), int(domain_size), m, spec)
    if spec is None:
        return base
    if not central or not accountant_available():
        why = "not computed" if not central else \
            "not computed: the accountant needs scipy (pip install 'ldpsynth[aggregator]')"
        return Guarantees(scope, float(epsilon0), int(domain_size), m, spec, tuple(labels),
                          np.asarray(counts, np.int64), note=why)
    counts = np.asarray(counts, np.int64)
    per_round = counts // m
    evaluated = np.zeros(len(counts), np.int64)
    live = per_round >= 1
    evaluated[live] = ladder(per_round[live])
    cap = m * float(epsilon0)
    eps = np.full(len(counts), cap)
    dlt = np.zeros(len(counts))
    for n in np.unique(evaluated[live]):
        value = central_at(float(epsilon0), int(domain_size), int(n), spec.delta, m)
        if value < cap:
            sel = evaluated == n
            eps[sel], dlt[sel] = value, spec.delta
    evaluated[eps >= cap] = 0
    return Guarantees(scope, float(epsilon0), int(domain_size), m, spec, tuple(labels), counts, eps, dlt, evaluated)


def of_card(card: Any, scope: str, labels: Sequence[str], counts: np.ndarray, *,
            rows_per_device: int | None = None, central: bool = True) -> Guarantees:
    """:func:`compute` for a :class:`~ldpsynth.shared.card.MechanismCard`'s ε0, |D| and shuffle spec."""
    m = card.mechanism
    return compute(scope, m.epsilon, m.domain_size, card.schema.shuffle, labels, counts,
                   rows_per_device=rows_per_device, central=central)


def local_epsilon_for(central_epsilon: float, domain_size: int, reports: int, delta: float,
                      rows_per_device: int = 1) -> float:
    """The largest local ε0 whose central ε at ``reports`` reports of a group (``rows_per_device`` m per
    device) is at most ``central_epsilon``: the accountant's ``local_epsilon_for`` at n = reports for m = 1;
    for m > 1 a bisection on ``composed_epsilon`` at n = ⌊reports/m⌋ (relative precision 1e-4, rounded
    down; at least central_epsilon/m, which basic composition of the local guarantee certifies)."""
    from ldpsynth.shared import amplification

    m = check_int(rows_per_device, "rows_per_device", 1, 10**6)
    n = check_int(reports, "reports", m) // m
    if m == 1:
        return amplification.local_epsilon_for(central_epsilon, domain_size, n, delta, bound=BOUND)
    lo, hi = central_epsilon / m, amplification.MAX_EPSILON0
    if amplification.composed_epsilon(hi, domain_size, n, delta, m, bound=BOUND) <= central_epsilon:
        return hi
    while hi - lo > 1e-4 * hi:
        mid = (lo + hi) / 2.0
        if amplification.composed_epsilon(mid, domain_size, n, delta, m, bound=BOUND) <= central_epsilon:
            lo = mid
        else:
            hi = mid
    return lo
