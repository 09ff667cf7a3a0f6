"""A wide collection's export and its offline answers (issue 39, phase 3).

The export of a wide collection's parent is a folder::

    card.json               the wide card (ldpsynth.wide-card/1)
    views/<a+b>/            each view sub-collection's release (Release.write: card.json, synthetic.csv, ...)
    synthetic.csv           rows sampled from the parent's model (when the [wide] extra is installed)

The views' releases hold every report the server had (the groups below the minimum batch left out, as in any
export), so their sufficient statistics are the server's and :func:`estimate_wide_release` fitted with the same
:class:`~ldpsynth.shared.wide.parent.WideFit` answers exactly as the server's ``Estimate`` on the parent. The
sampled rows are post-processing of the views (no ε): ``rows`` draws from the fitted model with a generator
seeded by the fit's seed; they are for looking at, not for estimating (answers come from the views).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ..estimators.engine import Statistics
from ..estimators.statistics import SufficientStatistics
from ..estimators.tallies import KeyedTallies
from ..jsonio import read_text
from ..mechanisms.oracle import FrequencyOracle
from ..queries.json_form import QueryLike, queries_from_json
from ..release import CARD_FILE, CSV_FILE, Release
from ..validation import check_int
from .collection import WIDE_CARD_FORMAT, WideCard
from .database import WideDatabase
from .grouped import WideParent
from .parent import DEFAULT_FIT, ParentMeasurements, WideAnswers, WideFit, measure_parent, parent_database, wide_answers

__all__ = ["VIEWS_FOLDER", "WideRelease", "estimate_wide_release", "is_wide_card", "release_statistics"]

#: The folder of the views' releases inside a wide export.
VIEWS_FOLDER = "views"


def release_statistics(release: Release) -> Statistics:
    """A release's sufficient statistics: E's counts per (public key, code) or an oracle's tallies per key."""
    schema = release.card.schema
    codes = release.private_reports()
    keys = release.public_keys() if schema.public_attributes else None
    if isinstance(release.card.mechanism, FrequencyOracle):
        return KeyedTallies.from_rows(release.card.mechanism, keys, codes,
                                      public_domain_size=schema.public_domain_size)
    return SufficientStatistics.from_schema(schema, keys, codes)


def _folder(card: WideCard, index: int) -> str:
    """View ``index``'s folder name: its attributes joined by ``+`` (identifiers: safe in a path)."""
    return "+".join(a.name for a in card.cards[index].schema.private_attributes)


@dataclass(frozen=True, eq=False)
class WideRelease:
    """The wide ``card`` and one :class:`~ldpsynth.shared.release.Release` per view, in the card's order (each
    release's card must be the view's)."""

    card: WideCard
    releases: tuple[Release, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "releases", tuple(self.releases))
        if len(self.releases) != len(self.card.cards):
            raise ValidationError("releases", f"one release per view ({len(self.card.cards)})",
                                  f"got {len(self.releases)}")
        for i, (release, sub) in enumerate(zip(self.releases, self.card.cards)):
            if release.card.dumps() != sub.dumps():
                raise ValidationError(f"releases[{i}].card", f"the card of {sub.schema.name!r} the wide card states",
                                      f"the card of {release.card.schema.name!r} differs")

    def measurements(self) -> ParentMeasurements:
        """The parent's measurements (:func:`~ldpsynth.shared.wide.parent.measure_parent`) from the releases."""
        return measure_parent(self.card, [release_statistics(r) for r in self.releases])

    def database(self, fit: WideFit = DEFAULT_FIT) -> WideDatabase:
        """The parent's database fitted as ``fit`` says."""
        return parent_database(self.card, self.measurements(), fit)

    def parent(self, fit: WideFit = DEFAULT_FIT) -> WideParent:
        """The parent's answers (grouped queries included) fitted as ``fit`` says: the server's on the same reports."""
        return WideParent.of(self.card, [release_statistics(r) for r in self.releases], fit)

    def write(self, out: str | os.PathLike, *, rows: int | None = None, fit: WideFit = DEFAULT_FIT,
              parquet: bool | None = None) -> tuple[list[Path], str | None]:
        """Write the folder (module docstring): the files written and, when no rows were sampled, why not.
        ``rows``: synthetic rows to sample (default N, the population; 0: none)."""
        folder = Path(out)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / CARD_FILE).write_text(self.card.dumps() + "\n", encoding="utf-8")
        except OSError as exc:
            raise ValidationError("out", "a folder that can be created and written",
                                  f"{exc.filename or folder}: {exc.strerror or exc}") from None
        written = [folder / CARD_FILE]
        for i, release in enumerate(self.releases):
            written += release.write(folder / VIEWS_FOLDER / _folder(self.card, i), parquet=parquet)
        database = self.database(fit)
        count = database.population if rows is None else check_int(rows, "rows", 0)
        if count == 0:
            return written, "no synthetic rows asked for"
        try:
            sampled = database.sample_rows(count, np.random.default_rng(fit.seed))
        except ImportError as exc:
            return written, f"no synthetic rows: the model needs the [wide] extra ({exc})"
        with open(folder / CSV_FILE, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(list(sampled))
            writer.writerows(zip(*(column.tolist() for column in sampled.values())))
        return [*written, folder / CSV_FILE], None

    @classmethod
    def read(cls, folder: str | os.PathLike, field: str = "release") -> WideRelease:
        """The wide release written by :meth:`write` (its card verified; each view's release read and checked)."""
        path = Path(folder)
        card = WideCard.from_json(read_text(path / CARD_FILE, field))
        releases = [Release.read(path / VIEWS_FOLDER / _folder(card, i), card=sub, field=field)
                    for i, sub in enumerate(card.cards)]
        return cls(card, tuple(releases))


def is_wide_card(text: str) -> bool:
    """Whether the JSON ``text`` is a wide card (its ``format``)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("format") == WIDE_CARD_FORMAT


def estimate_wide_release(release: WideRelease | str | os.PathLike, queries: str | bytes | Sequence[QueryLike], *,
                          level: float = 0.95, fit: WideFit = DEFAULT_FIT) -> WideAnswers:
    """The answers to ``queries`` (query objects over the wide row's attributes) from a wide export, offline:
    the server's answers on the same reports with the same ``fit``."""
    wide = release if isinstance(release, WideRelease) else WideRelease.read(release)
    parsed = queries_from_json(queries)
    return wide_answers(wide.parent(fit), parsed, level, max(sub.mechanism.epsilon for sub in wide.card.cards))
