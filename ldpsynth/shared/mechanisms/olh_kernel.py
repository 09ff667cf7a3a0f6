"""OLH's signed tally in one pass over the reports (numba, optional): each report's masks, then their span in
Gray-code order.

A report :math:`(\\mathrm{seed}, z)` of OLH with s hash bits adds :math:`(-1)^{\\langle b, z \\rangle}` at
:math:`\\gamma_b = \\bigoplus_{j \\in b} \\rho_j` for each of the :math:`g = 2^s` subsets b of its masks
:math:`\\rho_j = L_j(\\mathrm{seed})` (:meth:`~ldpsynth.shared.mechanisms.olh.OLH._signed_tally`). The masks come
from the maps' byte tables (:attr:`~ldpsynth.shared.mechanisms.bits.LinearMap.tables`: :math:`L_j(x)` is the XOR
of ``tables[j, i, byte i of x]``); visiting the subsets in Gray-code order, step :math:`i \\ge 1` flips the one mask
:math:`j = \\mathrm{ctz}(i)`: :math:`\\gamma \\mathrel{\\oplus}= \\rho_j`, the sign times :math:`(-1)^{z_j}`. Each of
the g terms is one add into the tally: no index array, no sign-doubled tally, no per-block count arrays. Exact
integer arithmetic, so the same tally as the numpy path whatever the order of the adds; ``tally`` is added to,
not set (int32 when n g is below :math:`2^{31}`: a report adds at most g to a cell).

numba is optional (:mod:`ldpsynth.shared.jit`): without it :data:`KERNEL` is None and OLH takes its numpy path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpsynth.shared.jit import compiled, numba

__all__ = ["KERNEL"]


@compiled
def _signed_tally(tables: np.ndarray, reports: np.ndarray, base: np.ndarray,
                  tally: np.ndarray) -> None:  # pragma: no cover - compiled by numba
    """``tally[base[i] + γ_b] += (-1)^<b, z_i>`` for every report i (uint64 ``seed << s | z``) and subset b of
    its s masks, the maps' byte tables ``tables`` (s, bytes, 256) uint64 (module docstring)."""
    s, width = tables.shape[0], tables.shape[1]
    g = 1 << s
    flips = np.zeros(g, np.int64)                # the mask flipped at Gray step i: ctz(i)
    for step in range(1, g):
        while not (step >> flips[step]) & 1:
            flips[step] += 1
    masks = np.zeros(s, np.int64)
    low = np.uint64(g - 1)
    for i in range(reports.shape[0]):
        seed, bits = reports[i] >> np.uint64(s), reports[i] & low
        for j in range(s):
            word = np.uint64(0)
            for k in range(width):
                word ^= tables[j, k, (seed >> np.uint64(8 * k)) & np.uint64(255)]
            masks[j] = np.int64(word)
        start = base[i]
        gamma = np.int64(0)
        sign = 1
        tally[start] += 1
        for step in range(1, g):
            j = flips[step]
            gamma ^= masks[j]
            if (bits >> np.uint64(j)) & np.uint64(1):
                sign = -sign
            tally[start + gamma] += sign


#: The compiled kernel ``(tables, reports, base, tally) -> None``, or None without numba.
KERNEL: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None] | None = (
    None if numba is None else _signed_tally)
