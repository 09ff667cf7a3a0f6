"""A shuffled collection's central guarantee: :class:`ShuffleSpec`, the schema's optional ``"shuffle"`` block
(docs/contract.md §2; the accountant it feeds: :mod:`ldpsynth.shared.amplification`, docs/shuffle-accountant.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ldpsynth.shared.errors import SchemaError, schema_field
from ldpsynth.shared.validation import check_choice, check_int, check_real

__all__ = ["MAX_MIN_BATCH", "MAX_ROWS_PER_DEVICE", "SHUFFLERS", "ShuffleSpec"]

#: Largest minimum batch of a shuffled collection (the accountant's largest number of reports).
MAX_MIN_BATCH = 10**12
#: Most reports one device may send to a shuffled collection (the accountant composes at most this many).
MAX_ROWS_PER_DEVICE = 10**6
#: Who runs the shuffler of a shuffled collection (``ShuffleSpec.shuffler``).
SHUFFLERS = ("aggregator-operator", "independent")


@dataclass(frozen=True)
class ShuffleSpec:
    """A shuffled collection's central guarantee: the schema's optional ``"shuffle"`` block.

    Reports reach the aggregator through a shuffler (docs/contract.md §16); then mechanism E at the local ε0 is
    (ε, δ)-DP centrally, ε computed from the number of reports by ``ldpsynth.shared.amplification``
    (docs/shuffle-accountant.md; docs/contract.md §2 says how the fields are used).

    ``delta``
        δ of the central guarantee, in (0, 1) (well below 1/n is the usual choice).
    ``min_batch``
        The fewest reports of one public key in any pool the aggregator stores, in [1, 10^12]: the
        shuffler pools per public key and releases a pool only from this many distinct reports, the
        replicas refuse a forwarded batch with fewer valid ones, and a public-key group of fewer
        reports is never released nor counted (docs/shuffle-accountant.md §6).
    ``assume_injected``
        F, the most reports of one pool the central guarantee assumes are not honest (injected
        through credentials an adversary holds, or copies of reports already stored), in
        [0, min_batch − 1] (default ``rows_per_device``: one device credential's quota); the
        guarantee counts ``min_batch − F`` honest reports per pool.
    ``rows_per_device``
        The most reports one device sends to the collection, in [1, 10^6] (default 1); the central
        guarantee composes over them (``composed_epsilon``). The device's ledger charges ε0 per
        report, so a device's budget divided by ε0 bounds it too.
    ``shuffler``
        ``"aggregator-operator"`` (default: the central guarantee holds against analysts only) or
        ``"independent"`` (the shuffler is run by a party that does not collude with the
        aggregator's operator: it holds against the operator too).
    """

    delta: float
    min_batch: int
    rows_per_device: int = 1
    shuffler: str = SHUFFLERS[0]
    assume_injected: int | None = None

    def __post_init__(self) -> None:
        with schema_field():
            object.__setattr__(self, "delta", check_real(self.delta, "shuffle.delta", low=0.0, high=1.0,
                                                         low_open=True, high_open=True))
            object.__setattr__(self, "min_batch", check_int(self.min_batch, "shuffle.min_batch", 1, MAX_MIN_BATCH))
            object.__setattr__(self, "rows_per_device", check_int(self.rows_per_device, "shuffle.rows_per_device",
                                                                  1, MAX_ROWS_PER_DEVICE))
            object.__setattr__(self, "shuffler", check_choice(self.shuffler, "shuffle.shuffler", SHUFFLERS))
            if self.assume_injected is not None:
                object.__setattr__(self, "assume_injected", check_int(self.assume_injected, "shuffle.assume_injected",
                                                                      0, self.min_batch - 1))

    @property
    def default_injected(self) -> int:
        """F when the block does not say: one device credential's quota, ``rows_per_device`` (below min_batch)."""
        return min(self.rows_per_device, self.min_batch - 1)

    @property
    def injected(self) -> int:
        """F: the reports per pool the central guarantee assumes are not honest (``assume_injected``)."""
        return self.default_injected if self.assume_injected is None else self.assume_injected

    @property
    def independent(self) -> bool:
        """Whether the shuffler is run by a party other than the aggregator's operator."""
        return self.shuffler == "independent"

    @property
    def against(self) -> str:
        """Whom the central guarantee protects against."""
        if self.independent:
            return "analysts and the aggregator's operator (the shuffler is run by an independent party)"
        return "analysts (the aggregator's operator runs the shuffler too: against it only the local epsilon0 holds)"

    @property
    def honest_per_pool(self) -> int:
        """The fewest honest reports of one public key in any pool a party can isolate: the minimum batch
        (which the replicas check per forwarded batch) less the reports assumed injected (F)."""
        return self.min_batch - self.injected

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"delta": self.delta, "min_batch": self.min_batch,
                               "rows_per_device": self.rows_per_device, "shuffler": self.shuffler}
        if self.assume_injected is not None:
            out["assume_injected"] = self.assume_injected
        return out

    @classmethod
    def from_json(cls, obj: object) -> ShuffleSpec:
        legal = "an object with delta, min_batch and optionally rows_per_device, shuffler, assume_injected"
        if not isinstance(obj, Mapping):
            raise SchemaError("shuffle", legal, f"got {type(obj).__name__}")
        extra = set(obj) - {"delta", "min_batch", "rows_per_device", "shuffler", "assume_injected"}
        if extra:
            raise SchemaError("shuffle", legal, f"unknown fields {sorted(extra)}")
        missing = {"delta", "min_batch"} - set(obj)
        if missing:
            raise SchemaError(f"shuffle.{sorted(missing)[0]}", legal, "missing")
        return cls(obj["delta"], obj["min_batch"], obj.get("rows_per_device", 1), obj.get("shuffler", SHUFFLERS[0]),
                   obj.get("assume_injected"))
