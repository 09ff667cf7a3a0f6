"""Yang et al.'s HDG (YWLCS21, PVLDB 14(3), 2021) run by its authors' own code, for bench_wide's side-by-side column.

The code is privmdr (github.com/YangJianyu-bupt/privmdr, Apache-2.0; plain numpy plus ``xxhash``), not a
dependency: ``bench_wide.py --privmdr DIR`` imports ``HDG.py`` from a checkout at DIR and drives it exactly as
its ``example_main.py`` does: shuffle the users, split them evenly across the d 1-way and d(d−1)/2 2-way
attribute groups, OUE per group's grid with the full ε, Norm-Sub consistency across grids, then the weighted
update of each 2-way group. HDG needs one domain size for every attribute, a power of 2: each attribute is
padded to the least power of 2 ≥ its largest size (16 for Adult's 8 attributes; padded values hold no user).
Its granularities g1, g2 come from its own guideline (``choose_granularity.py``, YWLCS21 §5.2), or are forced to
the padded domain (``granularity``: no bucketing, the grids are the marginals themselves).

A 2-way marginal of attributes (a, b) is the 2-way group's weighted-update matrix restricted to the real values
(``[:k_a, :k_b]``) and normalised to sum to 1 (clipped at 0 first, though the weighted update keeps it ≥ 0).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
from pathlib import Path

import numpy as np


def padded_size(sizes: tuple[int, ...]) -> int:
    """The least power of 2 at least every attribute's size (and at least 2)."""
    return 1 << max(1, (max(sizes) - 1).bit_length())


def hdg_marginals(privmdr: Path, rows: np.ndarray, sizes: tuple[int, ...], epsilon: float, seed: int,
                  granularity: int | None = None) -> tuple[dict[tuple[int, int], np.ndarray], tuple[int, int]]:
    """HDG's 2-way marginals ``{(a, b): k_a·k_b shares, C order}`` of ``rows`` at ``epsilon`` and its (g1, g2)."""
    if str(privmdr) not in sys.path:
        sys.path.insert(0, str(privmdr))
    import HDG  # privmdr's module, from the checkout given

    n, d = rows.shape
    domain = padded_size(sizes)
    args = argparse.Namespace(user_num=n, attribute_num=d, domain_size=domain, epsilon=epsilon,
                              consistency_iteration_num_max=100, weighted_update_iteration_num_max=100,
                              query_num=0, query_dimension=2, dimension_query_volume=0.5, algorithm_name="HDG")
    random.seed(seed)
    np.random.seed(seed)  # privmdr draws from numpy's global generator
    users = rows.tolist()
    np.random.shuffle(users)
    hdg = HDG.AG_Uniform_Grid_1_2_way_optimal(args=args)
    if granularity is not None:
        hdg.granularity = hdg.granularity_1_way = args.granularity = args.granularity_1_way = granularity
    with contextlib.redirect_stdout(io.StringIO()):  # it prints "HDG is working..."
        hdg.group_attribute()
        hdg.construct_Grid_set()
        hdg.get_LDP_Grid_set_divide_user(users)
        hdg.get_consistent_Grid_set()
        hdg.get_weight_update_for_2_way_group()
    marginals = {}
    for grid in hdg.Grid_set:
        if len(grid.attribute_set) == 2:
            a, b = grid.attribute_set
            table = np.clip(np.asarray(grid.weighted_update_matrix, np.float64)[:sizes[a], :sizes[b]], 0, None)
            marginals[(a, b)] = (table / table.sum()).ravel()
    return marginals, (int(args.granularity_1_way), int(args.granularity))
