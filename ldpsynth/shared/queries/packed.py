"""Packed query batches: linear and grouped queries straight from weight arrays (no per-query objects).

For batches of up to millions of queries (the packed arrays of the query service,
:mod:`ldpsynth.shared.queries.wire`; the benchmarks): the array becomes one
:class:`~ldpsynth.shared.queries.batch.TableBlock` (without a copy when it is C-contiguous float64),
and the answers are those of compiling the same queries one by one
(:func:`~ldpsynth.shared.queries.compiler.compile_queries`), with default labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.batch import QueryBatch, TableBlock
from ldpsynth.shared.queries.compiler import MAX_QUERY_WEIGHTS, encode_values, public_attribute
from ldpsynth.shared.queries.model import NORMALIZATIONS, Scalar, normalization_name
from ldpsynth.shared.schema import Schema

__all__ = ["linear_batch", "grouped_batch"]


def _check_finite_queries(w: np.ndarray) -> None:
    """Raise naming the first query of ``w`` (shape ``(Q, ...)``) that holds a NaN or an infinity."""
    step = max(1, MAX_QUERY_WEIGHTS // max(1, w[0].size))
    for start in range(0, len(w), step):
        chunk = w[start:start + step]
        bad = ~np.isfinite(chunk).reshape(len(chunk), -1).all(axis=1)
        if bad.any():
            raise ValidationError("weights", "finite numbers", "not finite", start + int(np.flatnonzero(bad)[0]))


def linear_batch(schema: Schema, weights: npt.ArrayLike, *, normalization: str = "range",
                 check_finite: bool = True) -> QueryBatch:
    """A batch of linear queries straight from an array (no per-query objects).

    ``weights`` has shape ``(Q, |D|)``: query ``j`` applies the weight list ``weights[j]`` to every
    row (the same answers as ``compile_queries([linear(w) for w in weights], schema)``, default
    labels). The array is used as is (no copy when it is C-contiguous float64). With
    ``check_finite=False`` the NaN/infinity check is left to the estimator, which reports the
    first such query from its own pass over the weights (the same error, one pass fewer).
    """
    code = NORMALIZATIONS.index(normalization_name(normalization))
    k = schema.private_domain_size
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != k or w.shape[0] == 0:
        raise ValidationError("weights", f"an array of shape (Q >= 1, {k})", f"got shape {w.shape}")
    if check_finite:
        _check_finite_queries(w)
    norms = np.full(len(w), code, np.int8)
    block = TableBlock(None, np.zeros(0, np.int64), w.reshape(len(w), 1, k), np.zeros((len(w), k)), norms,
                       np.arange(len(w), dtype=np.int64))
    return QueryBatch(schema, (block,), len(w), np.arange(len(w), dtype=np.int64))


def grouped_batch(schema: Schema, attribute: str, weights: npt.ArrayLike, *, values: Sequence[Scalar] | None = None,
                  default: npt.ArrayLike | None = None, normalization: str = "range",
                  check_finite: bool = True) -> QueryBatch:
    """A batch of heterogeneous queries straight from an array (no per-query objects).

    ``weights`` has shape ``(Q, L, |D|)``: query ``j`` applies ``weights[j, l]`` to rows whose
    public ``attribute`` equals ``values[l]`` (default: every value of the attribute, in code
    order) and ``default[j]`` (default zeros) to the other rows. The array is used as is (no
    copy when it is C-contiguous float64); it is checked for finiteness in chunks, or (with
    ``check_finite=False``) by the estimator in its own pass, as for :func:`linear_batch`.
    """
    code = NORMALIZATIONS.index(normalization_name(normalization))
    attr = public_attribute(schema, attribute, "attribute")
    k = schema.private_domain_size
    codes = np.arange(attr.size, dtype=np.int64) if values is None else encode_values(attr, list(values), "values")
    if len(np.unique(codes)) != len(codes):
        raise ValidationError("values", "distinct values of the attribute", "a value appears twice")
    w = np.ascontiguousarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[1:] != (len(codes), k) or w.shape[0] == 0:
        raise ValidationError("weights", f"an array of shape (Q >= 1, {len(codes)}, {k})", f"got shape {w.shape}")
    if check_finite:
        _check_finite_queries(w)
    d = np.zeros((len(w), k)) if default is None else np.ascontiguousarray(default, dtype=np.float64)
    if d.shape != (len(w), k) or not np.isfinite(d).all():
        raise ValidationError("default", f"an array of shape ({len(w)}, {k}) of finite numbers", f"got shape {d.shape}")
    norms = np.full(len(w), code, np.int8)
    block = TableBlock(attribute, codes, w, d, norms, np.arange(len(w), dtype=np.int64))
    return QueryBatch(schema, (block,), len(w), np.arange(len(w), dtype=np.int64))
