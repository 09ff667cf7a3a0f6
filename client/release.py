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
from ldpsynth.shared.errors import ValidationError

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

    def public_keys(self) -> np.ndarray:
        """Public key of every row (mixed radix of the public attributes' codes)."""
        return self.card.schema.public_keys_of(self.codes, len(self))

    def private_codes(self) -> np.ndarray:
        """Perturbed code over D of every row (mixed radix of the private attributes' codes)."""
        return self.card.schema.private_codes_of(self.codes)

    def values(self) -> dict[str, np.ndarray]:
        """Decoded columns (what the CSV holds)."""
        return {a.name: a.decode(self.codes[a.name]) for a in self.card.schema.attributes}

    def write(self, out: str | Path, *, parquet: bool | None = None) -> list[Path]:
        """Write the card, the CSV and (``parquet`` None: when pyarrow is importable) the Parquet file.

        ``out`` is a folder, created if missing; a :class:`ValidationError` names it when it cannot
        be (e.g. ``out`` is a file) or a file in it cannot be written."""
        folder = Path(out)
        legal = "a folder that can be created and written"
        try:
            return self._write(folder, parquet)
        except FileExistsError:  # mkdir(exist_ok=True) raises it only for something that is not a folder
            raise ValidationError("out", legal, f"{folder}: exists and is not a folder") from None
        except OSError as exc:
            raise ValidationError("out", legal, f"{exc.filename or folder}: {exc.strerror or exc}") from None

    def _write(self, folder: Path, parquet: bool | None) -> list[Path]:
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
