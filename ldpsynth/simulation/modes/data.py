"""The rows of the collection modes' simulations: Adult's and MovieLens' columns, and words drawn from a
dictionary with Zipf frequencies.

Adult's columns are renamed to identifiers (attribute names must be): lower case, ``-`` as ``_``, and its
``Salary`` column as ``income``; its numeric columns are integers, the others stripped strings. A collection's
attributes take the columns of their names, so a collection file over Adult names them so
(``marital_status``, ``hours_per_week``, ``income``).
"""

from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path

import numpy as np

from ldpsynth.simulation.datasets import MOVIELENS_FILE, DatasetNotFound, dataset_path

ADULT_FILE = "adult/adult.csv.gz"
#: Adult's integer columns (after renaming).
ADULT_INTEGERS = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")
#: Debian's word list (package wamerican).
WORDS_FILE = Path("/usr/share/dict/american-english")


def adult_columns() -> dict[str, np.ndarray]:
    """Adult's 32,561 rows as columns named as the module docstring says."""
    with gzip.open(dataset_path(ADULT_FILE), "rt", encoding="utf-8") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = ["income" if h.strip() == "Salary" else h.strip().lower().replace("-", "_") for h in next(reader)]
        body = [[cell.strip() for cell in row] for row in reader if row]
    table = np.array(body, dtype=object)
    return {name: (table[:, j].astype(np.int64) if name in ADULT_INTEGERS else table[:, j].astype(str))
            for j, name in enumerate(header)}


def movielens_columns() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """MovieLens-100k's ``movie`` and ``rating`` columns and each rating's device (its user, 0-based)."""
    raw = np.loadtxt(gzip.open(dataset_path(MOVIELENS_FILE), "rt"), dtype=np.int64)
    _, device = np.unique(raw[:, 0], return_inverse=True)
    return {"movie": raw[:, 1], "rating": raw[:, 2]}, device.astype(np.int64)


def sample_devices(columns: dict[str, np.ndarray], devices: np.ndarray, count: int, seed: int
                   ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The rows of ``count`` devices drawn without replacement (seeded; all of them when there are fewer),
    with the devices renumbered 0..count-1 in the order drawn."""
    present = np.unique(devices)
    chosen = np.random.default_rng(seed).permutation(present)[:count]
    rank = np.full(int(present.max()) + 1, -1, np.int64)
    rank[chosen] = np.arange(len(chosen))
    keep = rank[devices] >= 0
    order = np.argsort(rank[devices[keep]], kind="stable")
    return {name: col[keep][order] for name, col in columns.items()}, rank[devices[keep]][order]


def zipf_words(alphabet: str, max_length: int, vocabulary: int, devices: int, exponent: float, seed: int,
               path: Path = WORDS_FILE) -> np.ndarray:
    """One word per device: ``vocabulary`` words of the list at ``path`` spelled in ``alphabet`` and at most
    ``max_length`` long (drawn without replacement, seeded), the i-th of them with probability ∝ i^(-exponent)."""
    if not path.is_file():
        raise DatasetNotFound(f"word list not found: {path} (Debian's package wamerican installs it)")
    allowed = re.compile(f"^[{re.escape(alphabet)}]{{1,{max_length}}}$")
    words = sorted({w for w in path.read_text(encoding="utf-8").split() if allowed.match(w)})
    if len(words) < vocabulary:
        raise DatasetNotFound(f"{path} has {len(words)} words in the collection's alphabet and length, "
                              f"fewer than the {vocabulary} asked for")
    rng = np.random.default_rng(seed)
    chosen = np.asarray(rng.choice(words, size=vocabulary, replace=False))
    p = np.arange(1, vocabulary + 1, dtype=np.float64) ** -exponent
    return np.asarray(chosen[rng.choice(vocabulary, size=devices, p=p / p.sum())])
