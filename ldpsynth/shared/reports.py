"""A batch of perturbed reports: the domain type both sides agree on (no network, no Ray).

A report is one row as it leaves a device: the public attribute codes (sent in clear), the
private code *after* mechanism E (or, in a collection of a frequency oracle, the oracle's report:
:func:`~ldpsynth.shared.mechanisms.registry.layout_of`), and a random 128-bit id chosen on the device. The id is
the deduplication key of exactly-once delivery; it is drawn from ``os.urandom`` so ids do
not link a device's reports to each other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import Mechanism, ReportLayout, layout_of, make_mechanism
from ldpsynth.shared.schema import Schema

__all__ = [
    "REPORT_ID_BYTES",
    "new_report_ids",
    "mechanism_of",
    "layout_for",
    "Reports",
]

REPORT_ID_BYTES = 16


def new_report_ids(count: int) -> np.ndarray:
    """``count`` fresh random 128-bit ids as a ``(count, 16)`` uint8 array (OS CSPRNG)."""
    return np.frombuffer(os.urandom(REPORT_ID_BYTES * count), dtype=np.uint8).reshape(count, REPORT_ID_BYTES).copy()


def mechanism_of(schema: Schema) -> Mechanism:
    """The mechanism ``schema``'s devices perturb with (built once per schema's name, ε and |D|)."""
    return make_mechanism(schema.mechanism, schema.epsilon, schema.private_domain_size)


def layout_for(schema: Schema) -> ReportLayout:
    """The layout of ``schema``'s reports (:func:`~ldpsynth.shared.mechanisms.registry.layout_of`)."""
    return layout_of(mechanism_of(schema))


@dataclass(frozen=True)
class Reports:
    """``n`` reports in columnar form.

    Attributes
    ----------
    report_ids:
        ``(n, 16)`` uint8, one random id per report.
    private_codes:
        ``(n,)`` int64 perturbed codes in ``[0, |D|)``; in a collection of a frequency oracle, its
        reports (:func:`layout_for`: ``(n,)`` int64 numbers, or ``(n, width)`` uint8 bit sets).
    public_codes:
        ``(n, m)`` int64, one column per public attribute in schema order (``m`` may be 0).
    """

    report_ids: np.ndarray
    private_codes: np.ndarray
    public_codes: np.ndarray

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])

    def validate(self, schema: Schema) -> Reports:
        """Check shapes and that every code lies in its legal range; raise naming the field.

        Messages name the column and the report position, never a value.
        """
        n = len(self)
        if self.report_ids.shape != (n, REPORT_ID_BYTES) or self.report_ids.dtype != np.uint8:
            raise ValidationError("report_ids", f"{REPORT_ID_BYTES} bytes per report", "wrong length")
        m = len(schema.public_attributes)
        if self.public_codes.shape != (n, m):
            raise ValidationError("public_codes", f"{m} columns of {n} codes (one per public attribute)",
                                  "wrong shape")
        if schema.mechanism == "E":
            schema.check_private_codes(self.private_codes, "private_codes")
        else:
            layout_for(schema).check(self.private_codes, "private_codes")
        for j, attr in enumerate(schema.public_attributes):
            attr.check_codes(self.public_codes[:, j], field_name=f"public_codes[{attr.name}]")
        return self

    def public_keys(self, schema: Schema) -> np.ndarray:
        """Public key of every report: the schema's mixed radix of its public codes
        (:meth:`~ldpsynth.shared.schema.Schema.public_keys_of`; 0 when the schema has no public attribute)."""
        return schema.public_keys_of({a.name: self.public_codes[:, j] for j, a in enumerate(schema.public_attributes)},
                                     len(self))

    def slice(self, start: int, stop: int) -> Reports:
        return Reports(self.report_ids[start:stop], self.private_codes[start:stop], self.public_codes[start:stop])

    @staticmethod
    def concat(parts: list[Reports], public_columns: int) -> Reports:
        if not parts:
            return Reports(np.zeros((0, REPORT_ID_BYTES), np.uint8), np.zeros(0, np.int64),
                           np.zeros((0, public_columns), np.int64))
        return Reports(np.concatenate([p.report_ids for p in parts]),
                       np.concatenate([p.private_codes for p in parts]),
                       np.concatenate([p.public_codes for p in parts]))
