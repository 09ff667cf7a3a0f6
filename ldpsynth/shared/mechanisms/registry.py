"""A collection's mechanism by name: E, one of the four frequency oracles or a numeric attribute's mechanism
(HM, SW: :mod:`ldpsynth.shared.numeric.collection`), its version and its reports' layout.

The layout says what one report is inside ldpsynth (devices, the shard workers' log, exports):
mechanism E's perturbed code, a numeric mechanism's output index, HR's index ``2j + b`` and OLH's word
``seed << s | bucket`` are int64 numbers (:attr:`ReportLayout.bound` above the largest); OUE's and SS's bit
sets are rows of ``ceil(|D|/8)`` bytes (:attr:`ReportLayout.width`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..attributes import NUMERIC_MECHANISMS
from ..errors import ValidationError
from ..mechanism import MechanismE
from ..numeric.collection.mechanism import NumericMechanism, numeric_mechanism
from ..validation import check_choice, check_codes
from .hadamard import HadamardResponse
from .olh import OLH
from .oracle import FrequencyOracle
from .oue import OUE
from .pure import PureProtocol
from .subset import SubsetSelection

__all__ = [
    "MECHANISMS",
    "NUMERIC_MECHANISMS",
    "ORACLES",
    "Mechanism",
    "version_of",
    "max_domain_size",
    "make_mechanism",
    "name_of",
    "categorical",
    "ReportLayout",
    "layout_of",
    "REPORT_FIELDS",
    "private_wire",
    "protocol_of",
    "least_variance",
    "SHUFFLE_BOUNDS",
    "shuffle_bound",
]

#: The mechanisms a collection may use (``"mechanism"`` of its schema); E is the default.
MECHANISMS = ("E", "OUE", "OLH", "HR", "SS")
#: The frequency oracles by name.
ORACLES: dict[str, type[FrequencyOracle]] = {"OUE": OUE, "OLH": OLH, "HR": HadamardResponse,
                                             "SS": SubsetSelection}
#: What a collection's card holds: mechanism E, a frequency oracle or a numeric attribute's mechanism.
Mechanism = MechanismE | FrequencyOracle | NumericMechanism
#: Every name a collection's mechanism may have (a numeric one only with its numeric attribute).
_ALL = MECHANISMS + NUMERIC_MECHANISMS
#: The shuffle accountant's bounds a shuffled collection's central guarantee is stated with
#: (``bound=`` of ``ldpsynth.shared.amplification.central_epsilon``): k-RR's blanket, FMT21's clones.
SHUFFLE_BOUNDS = ("blanket", "fmt21-numerical")


def version_of(name: str) -> str:
    """The version every report batch names (``"E/1"``, ``"OUE/1"``, ``"HM/1"``, ...)."""
    name = check_choice(name, "mechanism", _ALL)
    return MechanismE.VERSION if name == "E" else f"{name}/1"


def max_domain_size(name: str) -> int:
    """The largest |D| mechanism ``name`` accepts (E: its exact sampler's; a schema bounds it further).
    Not for a numeric mechanism, whose report domain is its output set (:func:`make_mechanism`)."""
    from ..mechanism import MAX_SAMPLER_DOMAIN_SIZE

    name = check_choice(name, "mechanism", MECHANISMS)
    return MAX_SAMPLER_DOMAIN_SIZE if name == "E" else ORACLES[name].max_domain_size


@functools.lru_cache(maxsize=64)
def make_mechanism(name: str, epsilon: float, domain_size: int) -> Mechanism:
    """Mechanism ``name`` at ``epsilon`` over ``domain_size`` codes (built once per arguments: they are
    immutable once made). A numeric mechanism's ``domain_size`` must be its output set's size (its reports)."""
    name = check_choice(name, "mechanism", _ALL)
    if name in NUMERIC_MECHANISMS:
        numeric = numeric_mechanism(name, epsilon)
        if domain_size != numeric.domain_size:
            raise ValidationError("domain_size", f"{numeric.domain_size} ({name}'s output set at epsilon {epsilon})",
                                  f"got {domain_size}")
        return numeric
    return MechanismE(epsilon, domain_size) if name == "E" else ORACLES[name](epsilon, domain_size)


def categorical(mechanism: Mechanism) -> MechanismE | FrequencyOracle:
    """``mechanism`` if it is E or a frequency oracle; a :class:`ValidationError` naming ``mechanism`` for a numeric
    attribute's (HM, SW), whose reports are not randomized categories."""
    if isinstance(mechanism, NumericMechanism):
        raise ValidationError("mechanism", "E or a frequency oracle (this works on categories; a numeric collection "
                              "answers the query kinds mean, sum, quantiles and histogram: "
                              "ldpsynth.shared.queries.numeric)",
                              f"got {mechanism.name!r}")
    return mechanism


def name_of(mechanism: Mechanism) -> str:
    """``"E"``, the oracle's or the numeric mechanism's name."""
    return "E" if isinstance(mechanism, MechanismE) else mechanism.name


@dataclass(frozen=True)
class ReportLayout:
    """What one report of a mechanism is inside ldpsynth (module docstring).

    ``width`` 0: a number in ``[low, bound)`` (int64 arrays of shape (n,)); ``width`` > 0: a bit set of
    ``width`` bytes, bit ``v % 8`` of byte ``v // 8`` for value v (uint8 arrays of shape (n, width)),
    checked by ``oracle``.
    """

    mechanism: str
    low: int
    bound: int
    width: int
    oracle: FrequencyOracle | None = None

    @property
    def bitmap(self) -> bool:
        return self.width > 0

    def empty(self) -> np.ndarray:
        """No reports."""
        return np.zeros((0, self.width), np.uint8) if self.bitmap else np.zeros(0, np.int64)

    def check(self, reports: npt.ArrayLike, field: str = "reports") -> np.ndarray:
        """``reports`` in this layout (int64 numbers or uint8 bit sets), raising naming ``field`` and the
        first bad report's position otherwise."""
        if self.mechanism == "E":
            return check_codes(reports, field, self.bound, ndim=1)
        if not self.bitmap:
            legal = f"{self.mechanism} reports: integers in [{self.low}, {self.bound - 1}]"
            try:
                arr = check_codes(reports, field, self.bound, ndim=1)
            except ValidationError as exc:
                raise ValidationError(field, legal, exc.problem, exc.position) from None
            if self.low and arr.size and int(arr.min()) < self.low:
                raise ValidationError(field, legal, "out of range", int(np.flatnonzero(arr < self.low)[0]))
            return arr
        assert self.oracle is not None
        try:
            return self.oracle.check_reports(reports)
        except ValidationError as exc:
            raise ValidationError(field, exc.legal, exc.problem, exc.position) from None

    def valid_rows(self, reports: np.ndarray) -> np.ndarray:
        """Per report, whether :meth:`check` takes it: ``reports`` uint64 numbers ``(n,)``, or uint8 bit sets
        ``(n, width)`` (the private parts of sealed plaintexts, each checked on its own)."""
        if not self.bitmap:
            return (reports >= np.uint64(self.low)) & (reports < np.uint64(self.bound))
        assert self.oracle is not None
        valid = np.ones(len(reports), bool)
        start = 0
        while start < len(reports):  # the oracle names the first bad report: those before it are good
            try:
                self.oracle.check_reports(reports[start:])
                break
            except ValidationError as exc:
                bad = start + (exc.position or 0)
                valid[bad] = False
                start = bad + 1
        return valid

    @property
    def stored_bytes(self) -> int:
        """Bytes of one report in the log at most (8 for a number)."""
        return self.width if self.bitmap else 8


def layout_of(mechanism: Mechanism) -> ReportLayout:
    """The :class:`ReportLayout` of ``mechanism``'s reports."""
    if isinstance(mechanism, MechanismE):
        return ReportLayout("E", 0, mechanism.domain_size, 0)
    if isinstance(mechanism, NumericMechanism):
        return ReportLayout(mechanism.name, 0, mechanism.domain_size, 0)
    if isinstance(mechanism, HadamardResponse):
        return ReportLayout("HR", 2, 2 * mechanism.size, 0, mechanism)
    if isinstance(mechanism, OLH):
        return ReportLayout("OLH", 0, 1 << (2 * mechanism.field_bits + mechanism.hash_bits), 0, mechanism)
    return ReportLayout(mechanism.name, 0, 0, mechanism.report_bytes, mechanism)


#: The wire fields of a report's private part per mechanism (``ReportBatch``, ``ExportChunk``), each with
#: its bytes per report (0: the card's ``report_bytes``, a bit set) and its little-endian dtype.
REPORT_FIELDS: dict[str, tuple[tuple[str, int, str], ...]] = {
    "E": (("private_codes", 8, "<u8"),),
    "OUE": (("report_bitmaps", 0, "u1"),),
    "SS": (("report_bitmaps", 0, "u1"),),
    "OLH": (("olh_seeds", 8, "<u8"), ("olh_buckets", 2, "<u2")),
    "HR": (("hadamard_reports", 4, "<u4"),),
    "HM": (("private_codes", 8, "<u8"),),
    "SW": (("private_codes", 8, "<u8"),),
}


def private_wire(mechanism: Mechanism) -> tuple[int, int]:
    """``(bytes, columns)``: wire bytes of one report's private part and the number of its ``bytes`` fields."""
    fields = REPORT_FIELDS[name_of(mechanism)]
    width = sum(size or layout_of(mechanism).width for _, size, _ in fields)
    return width, len(fields)


def protocol_of(mechanism: Mechanism) -> PureProtocol:
    """The exact pure protocol (its p*, q*, WBLJ17 §3) of E or of a frequency oracle (a numeric mechanism is
    refused: :func:`categorical`)."""
    oracle = categorical(mechanism)
    return PureProtocol.for_mechanism_e(oracle) if isinstance(oracle, MechanismE) else oracle.protocol


@functools.lru_cache(maxsize=256)
def least_variance(epsilon: float, domain_size: int, candidates: tuple[str, ...], close: float) -> str:
    """The first of ``candidates`` whose count estimate's variance per report for a rare value,
    :math:`q^*(1-q^*)/(p^*-q^*)^2` (WBLJ17 eq. 4, at the exact probabilities), is within the factor ``close``
    of the least among them: the order says which to keep at (nearly) equal error.

    >>> least_variance(2.0, 8, ("E", "HR", "OLH"), 1.05), least_variance(2.0, 1 << 16, ("E", "HR", "OLH"), 1.05)
    ('E', 'OLH')
    """
    factors = [protocol_of(make_mechanism(name, epsilon, domain_size)).point_variance_factor() for name in candidates]
    best = min(factors)
    return next(name for name, factor in zip(candidates, factors) if factor <= best * close)


def shuffle_bound(name: str) -> str:
    """The accountant's bound for a shuffled collection of mechanism ``name``: the one place that decides it.

    ``"blanket"`` for E: k-RR's privacy blanket (BBGN19) evaluated exactly, the tightest (docs/shuffle-accountant.md
    §3). ``"fmt21-numerical"`` for every other mechanism (OUE, OLH, HR, SS, HM, SW): FMT21 Lemma 3.3's clones,
    valid for any ε0-LDP local randomizer (FMT21 Thm 3.2), whatever its output set (docs/shuffle-accountant.md §9).
    """
    return SHUFFLE_BOUNDS[0] if check_choice(name, "mechanism", _ALL) == "E" else SHUFFLE_BOUNDS[1]
