"""The public release of a collection: its mechanism card and the synthetic database (the stored
perturbed rows, in report-id order), as exported by the aggregator.

:meth:`Release.write` puts it in a folder that ``ldpsynth estimate`` reads back::

    DIR/card.json          the mechanism card (schema, delivered ε, |D|, keep/lie probabilities)
    DIR/synthetic.csv      header = attribute names; public values in clear, private values decoded
                           (continuous attributes as bucket lower edges)
    DIR/synthetic.parquet  the same table, when pyarrow is installed

Everything in it is already differentially private (each row went through mechanism E on its
device): publishing it costs no further budget.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.card import MechanismCard

CARD_FILE = "card.json"
CSV_FILE = "synthetic.csv"
PARQUET_FILE = "synthetic.parquet"


@dataclass(frozen=True, eq=False)
class Release:
    """``codes[name]``: the codes of attribute ``name`` of every row (int64, row order = report id)."""

    card: MechanismCard
    codes: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.codes.values()))) if self.codes else 0

    def values(self) -> dict[str, np.ndarray]:
        """Decoded columns (what the CSV holds)."""
        return {a.name: a.decode(self.codes[a.name]) for a in self.card.schema.attributes}

    def write(self, out: str | Path, *, parquet: bool | None = None) -> list[Path]:
        """Write the card, the CSV and (``parquet`` None: when pyarrow is importable) the Parquet file."""
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        written = [folder / CARD_FILE, folder / CSV_FILE]
        self.card.save(written[0])
        columns = self.values()
        names = list(columns)
        with open(written[1], "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(names)
            writer.writerows(zip(*(columns[name].tolist() for name in names)))
        if parquet is not False:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                if parquet:
                    raise
            else:
                path = folder / PARQUET_FILE
                pq.write_table(pa.table({name: np.asarray(columns[name]) for name in names}), path)
                written.append(path)
        return written

    def summary(self) -> dict[str, object]:
        """What ``ldpsynth export`` prints."""
        return {"collection": self.card.schema.name, "rows": len(self), "epsilon": self.card.mechanism.epsilon,
                "mechanism_version": self.card.version}
