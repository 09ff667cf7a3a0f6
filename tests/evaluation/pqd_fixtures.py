"""Small seeded private tables and neighbours for the DP-PQD tests (no data files needed)."""

from __future__ import annotations

import numpy as np

from ldpsynth.evaluation.pqd.table import Table


def private_table(n: int = 400, seed: int = 11, high: int = 63) -> Table:
    """``g`` in {a, b, c}, ``x`` an integer in [0, high] skewed towards small values, ``y`` in [0, 9]."""
    rng = np.random.default_rng(seed)
    g = rng.choice(np.array(["a", "b", "c"], dtype=object), size=n, p=[0.5, 0.3, 0.2])
    x = np.minimum(high, np.floor(rng.exponential(high / 6.0, size=n))).astype(np.float64)
    y = rng.integers(0, 10, size=n).astype(np.float64)
    return Table({"g": g, "x": x, "y": y}, name="private")


def add_row(table: Table, row: dict) -> Table:
    """The neighbour with one more tuple."""
    return Table({k: np.append(v, np.array([row[k]], dtype=v.dtype)) for k, v in table.columns.items()},
                 name=table.name)


def remove_row(table: Table, index: int) -> Table:
    """The neighbour with tuple ``index`` removed."""
    return Table({k: np.delete(v, index) for k, v in table.columns.items()}, name=table.name)


def neighbours(table: Table, values: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 40.0, 63.0)) -> list[Table]:
    """Add a selected tuple (g = a) with each value, add an unselected one, remove the largest selected one."""
    out = [add_row(table, {"g": "a", "x": v, "y": 3.0}) for v in values]
    out.append(add_row(table, {"g": "b", "x": 63.0, "y": 3.0}))
    selected = np.flatnonzero(table.columns["g"] == "a")
    out.append(remove_row(table, int(selected[np.argmax(table.columns["x"][selected])])))
    out.append(remove_row(table, int(selected[np.argmin(table.columns["x"][selected])])))
    return out
