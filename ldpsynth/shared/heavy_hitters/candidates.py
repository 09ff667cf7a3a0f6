"""Which cells of a round become the next round's candidate prefixes.

A round's cell :math:`i\\,2^w + f` is the prefix :math:`P_i \\| f` of :math:`b_r` bits. The server keeps

* at a threshold φ (a share of the population N): the cells whose lower confidence bound clears it,
  :math:`\\hat N_v - z\\,\\widehat{\\mathrm{se}}_v \\ge \\varphi N`; a string of share ≥ φ has every prefix of
  share ≥ φ, so it is pruned in a round with probability at most about :math:`1 - \\Phi(z)` there;
* for the top k: the cells of the ``cap`` largest estimates (PEM's rule, WLJ19; ``cap`` ≥ k leaves room
  for the noise's reordering);

either way at most ``cap`` cells, largest estimates first, never the "other" cell nor a prefix no code
begins with (:meth:`~ldpsynth.shared.heavy_hitters.encoding.StringEncoding.valid_prefixes`), and at most
:data:`~ldpsynth.shared.heavy_hitters.device.MAX_DOMAIN` cells next round.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_int, check_real

__all__ = ["select_cells", "extend_prefixes"]


def select_cells(counts: np.ndarray, std_errors: np.ndarray, eligible: np.ndarray, *, cap: int,
                 threshold_count: float | None = None, z: float = 1.959963984540054) -> np.ndarray:
    """Indices (int64, largest estimate first, equal estimates by index) of the kept cells among the ``eligible``
    ones (a bool per cell but "other", which is never kept: the prefixes a code can begin with);
    ``threshold_count`` φN, or None for the ``cap`` largest."""
    check_int(cap, "cap", 1)
    check_real(z, "z", low=0.0)
    estimates = counts[:len(eligible)]
    order = np.flatnonzero(eligible)
    if threshold_count is not None:
        lower = estimates - z * std_errors[:len(eligible)]
        order = order[lower[order] >= threshold_count]
    if len(order) > cap:                             # the cap largest, ties by index: a partition, not a sort
        values = estimates[order]
        kth = np.partition(values, len(values) - cap)[len(values) - cap]
        above = order[values > kth]
        order = np.concatenate([above, order[values == kth][:cap - len(above)]])
    return order[np.argsort(-estimates[order], kind="stable")].astype(np.int64)


def extend_prefixes(prefixes: np.ndarray, start_bits: int, width_bits: int, cells: np.ndarray, *,
                    sort: bool = True) -> np.ndarray:
    """The prefixes :math:`P_i \\| f` of cells :math:`i\\,2^w + f`: uint8 ``(len(cells), ceil((start + w)/8))``,
    bits after ``start + w`` zero, sorted by their bytes (``sort``) or in the order of ``cells``.

    >>> extend_prefixes(np.array([[0b10100000]], np.uint8), 3, 6, np.array([0b110011])).tolist()
    [[185, 128]]
    """
    end = start_bits + width_bits
    width = -(-end // 8)
    index, fragment = cells >> width_bits, (cells & ((1 << width_bits) - 1)).astype(np.uint64)
    out = np.zeros((len(cells), width), np.uint8)
    out[:, :prefixes.shape[1]] = prefixes[index]
    first, last = start_bits // 8, (end - 1) // 8
    placed = fragment << np.uint64(8 * (last + 1) - end)
    for j, column in enumerate(range(first, last + 1)):
        out[:, column] |= ((placed >> np.uint64(8 * (last - first - j))) & np.uint64(0xFF)).astype(np.uint8)
    if not sort:
        return out
    keys = np.ascontiguousarray(out).view(f"V{width}").ravel()
    return out[np.argsort(keys, kind="stable")]
