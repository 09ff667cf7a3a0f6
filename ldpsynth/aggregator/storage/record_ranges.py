"""Where one collection's reports are in its shard's log: the runs of consecutive records holding them.

A shard's log interleaves its collections (one record per group commit, a section per collection in
it). A read of one collection's reports (export, dense queries) reads these runs only, not the log.
A run is ``(first, last, before)``: records ``first .. last`` (consecutive sequences) each hold a
section of the collection, and ``before`` is the shard's reports before record ``first`` (the record's
own header says it too, so a read checks it is where the run says). The worker adds each record it
applies and keeps the runs in its snapshot (:mod:`~ldpsynth.aggregator.storage.snapshot`).
"""

from __future__ import annotations

import numpy as np

#: Records of other collections a read goes through rather than start a second read of the log.
READ_THROUGH = 256


class RecordRanges:
    """The runs of records holding one collection's sections, in sequence order (see the module docstring)."""

    def __init__(self, runs: list[list[int]] | None = None):
        self._runs = runs if runs is not None else []

    def add(self, sequence: int, before: int) -> None:
        """Note record ``sequence`` (``before``: the shard's reports before it) holds a section; records
        come in sequence order (the same record twice counts once)."""
        if self._runs and self._runs[-1][1] >= sequence - 1:
            self._runs[-1][1] = max(self._runs[-1][1], sequence)
        else:
            self._runs.append([sequence, sequence, before])

    def spans(self, upto: int, through: int = READ_THROUGH) -> list[tuple[int, int, int]]:
        """What a read of the records up to sequence ``upto`` asks of the log: ``(first, last, before)``
        spans that join runs fewer than ``through`` records apart (a read then skips the other
        collections' sections in between)."""
        spans: list[tuple[int, int, int]] = []
        for first, last, before in self._runs:
            if first > upto:
                break
            last = min(last, upto)
            if spans and first - spans[-1][1] - 1 < through:
                spans[-1] = (spans[-1][0], last, spans[-1][2])
            else:
                spans.append((first, last, before))
        return spans

    def to_array(self) -> np.ndarray:
        """The runs as a ``(k, 3)`` int64 array (a snapshot's)."""
        return np.array(self._runs, dtype=np.int64).reshape(-1, 3)

    @classmethod
    def from_array(cls, runs: np.ndarray, offset: int) -> RecordRanges:
        """The runs of a snapshot taken at sequence ``offset``. Raises ``ValueError`` unless they are
        runs of reports records (sequence 2 on, the genesis record is 1) in order, apart, up to ``offset``."""
        runs = np.asarray(runs, dtype=np.int64)
        if runs.ndim != 2 or runs.shape[1] != 3:
            raise ValueError(f"record runs of shape {runs.shape}, not (k, 3)")
        first, last, before = runs.T
        if runs.size and (first[0] < 2 or last[-1] > offset or bool(np.any(last < first))
                          or bool(np.any(first[1:] <= last[:-1] + 1)) or bool(np.any(before < 0))
                          or bool(np.any(before[1:] < before[:-1]))):
            raise ValueError(f"record runs not in order, apart and within sequences 2..{offset}")
        return cls(runs.tolist())
