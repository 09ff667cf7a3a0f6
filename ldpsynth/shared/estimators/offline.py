"""Answers from a public release in one call, offline: the synthetic rows and the mechanism card
in, every query's answer with its error bars out (WYZ eq. 17 estimate, eq. 21 proper estimate,
standard error and normal interval, eq. 20/22 bounds; a frequency oracle's release: its reports, and
its estimates), with no server and no privacy cost.

The same numbers as ``ldpsynth estimate`` (which calls :func:`estimate_release`) and as the query
service on the rows it exported. Needs numpy only, except that the central guarantee of a shuffled
release is computed by the accountant (scipy; without it the answers say it was not computed).

>>> from ldpsynth.shared.card import MechanismCard
>>> from ldpsynth.shared.queries.builders import marginal
>>> from ldpsynth.shared.schema import Schema
>>> card = MechanismCard.for_schema(Schema.from_json({"name": "coin", "epsilon": 2.0, "attributes": [
...     {"name": "heads", "type": "binary"}]}))
>>> answers = estimate_release({"heads": [1, 1, 0, 1] * 50}, [marginal("heads")], card=card)
>>> [(a["label"], round(a["estimate"], 2), a["n"]) for a in answers.records()]
[('marginal#0[heads=0]', 34.35, 200), ('marginal#0[heads=1]', 165.65, 200)]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.eligible import by_group, eligible
from ldpsynth.shared.estimators.engine import Statistics, estimate
from ldpsynth.shared.estimators.formulas import Answers
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.guarantees import ANSWERS, of_card
from ldpsynth.shared.jsonio import read_text
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.numeric.answering import NumericAnswers, answer_numeric, compile_numeric
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.json_form import QueryLike, queries_from_json
from ldpsynth.shared.release import CARD_FILE, Release
from ldpsynth.shared.validation import check_probability

__all__ = [
    "estimate_release",
]

#: What :func:`estimate_release` reads rows from: a :class:`Release`, a folder written by
#: :meth:`Release.write` (or ``ldpsynth export``), a CSV or Parquet table file, or columns of values.
ReleaseSource = Release | str | os.PathLike | Mapping[str, npt.ArrayLike]


def _card(release: ReleaseSource, card: MechanismCard | str | os.PathLike | None) -> MechanismCard:
    """The mechanism card of the release: its own (a :class:`Release`, a folder) or ``card``."""
    if isinstance(release, Release):
        if card is not None:
            raise ValidationError("card", "no card with a Release (it carries its own)", "a card was given")
        return release.card
    if card is None:
        if not isinstance(release, Mapping) and os.path.isdir(release):
            return MechanismCard.from_json(read_text(os.path.join(release, CARD_FILE), "card"))
        raise ValidationError("card", "the release's mechanism card (a MechanismCard or the path of its card.json) "
                              "for rows not in a release folder", "missing")
    return card if isinstance(card, MechanismCard) else MechanismCard.from_json(read_text(card, "card"))


def estimate_release(release: ReleaseSource, queries: str | bytes | Sequence[QueryLike], *,
                     card: MechanismCard | str | os.PathLike | None = None, level: float = 0.95,
                     rows_per_device: int | None = None) -> Answers | NumericAnswers:
    """The answers to ``queries`` from the synthetic database of ``release``, at confidence ``level``.

    WYZ eq. 17 estimate, eq. 21 proper estimate, standard error and normal interval, eq. 20/22
    bounds. The queries are checked against the card's schema before any row is read. A public-key
    group below the collection's minimum batch is never counted (its rows left out of table queries;
    a cut or dense query that reads it, or a batch that reads only such groups, refused), as the query
    service does (:mod:`ldpsynth.shared.estimators.eligible`). A shuffled collection's release (its
    card's schema has a shuffle block): the answers' ``guarantees`` state the local ε0 and the central
    (ε, δ) per party, with the public-key groups read and what was withheld
    (:mod:`ldpsynth.shared.guarantees`). A numeric collection's release (HM or SW reports) answers the numeric
    kinds (mean, sum, quantiles, histogram: :mod:`ldpsynth.shared.queries.numeric`) through
    :func:`~ldpsynth.shared.numeric.answering.answer_numeric` on the release's counts per (public key, report),
    the function the query service answers with, so the answers are equal.

    Parameters
    ----------
    release : Release, str, os.PathLike or mapping of str to array_like
        A :class:`~ldpsynth.shared.release.Release` (e.g. from
        :meth:`QueryClient.export <ldpsynth.client.query.QueryClient.export>`), a folder written by
        ``ldpsynth export`` or :meth:`Release.write <ldpsynth.shared.release.Release.write>`, a CSV
        or Parquet table of the rows, or a mapping of columns of values (the table's form:
        :meth:`Release.from_values <ldpsynth.shared.release.Release.from_values>`).
    queries : str, bytes or sequence of query objects and JSON objects
        JSON text, or a list of JSON objects (:mod:`ldpsynth.shared.queries.json_form`) and query
        objects (:mod:`ldpsynth.shared.queries.builders`), mixed as wanted.
    card : MechanismCard, str, os.PathLike or None, default None
        The release's mechanism card or the path of its ``card.json``: required for a table file
        or columns, refused with a :class:`~ldpsynth.shared.release.Release` (it has its own);
        for a folder it replaces the folder's.
    level : float, default 0.95
        Confidence level of the intervals: a number in (0, 1).
    rows_per_device : int or None, default None
        A shuffled collection: the most reports per device the central guarantee composes over, an
        integer from the card's ``shuffle.rows_per_device`` (fewer would overstate the guarantee) to
        10^6; ``None``: the card's. Not used for a collection that is not shuffled.

    Returns
    -------
    Answers or NumericAnswers
        :class:`~ldpsynth.shared.estimators.formulas.Answers` (a numeric release:
        :class:`~ldpsynth.shared.numeric.answering.NumericAnswers`): columns (``estimate``,
        ``proper_estimate``, ``std_error``, ``ci_low``, ``ci_high``, ``bound``, ...) and
        :meth:`~ldpsynth.shared.estimators.formulas.AnswerColumns.records`, one JSON-ready dict per
        compiled query (a marginal gives one per cell) with the fields ``ldpsynth estimate`` prints.

    Raises
    ------
    ValidationError
        Naming the field: ``level``, ``card`` (missing, given with a Release, or ``card.*`` not
        verifying), ``queries`` or ``queries[j]...``, ``release`` (a file that cannot be read),
        ``synthetic.<attribute>`` or ``<attribute>`` (a row), ``rows_per_device``.
    BelowMinimumBatch
        Every group the queries read, or one a cut or dense query reads, holds fewer reports than the
        collection's minimum batch (the schema's ``min_batch``, or a shuffled collection's ``shuffle.min_batch``):
        :class:`~ldpsynth.shared.guarantees.BelowMinimumBatch`, an
        :class:`~ldpsynth.shared.errors.LdpsynthError`.
    """
    level = check_probability(level, "level")
    mechanism_card = _card(release, card)
    schema = mechanism_card.schema
    parsed = queries_from_json(queries)
    numeric = compile_numeric(parsed, schema) if schema.numeric is not None else None
    batch = compile_queries(parsed, schema) if numeric is None else None
    if isinstance(release, Mapping):
        release = Release.from_values(mechanism_card, release)
    elif not isinstance(release, Release):
        release = Release.read(release, card=mechanism_card)
    codes = release.private_reports()
    keys = release.public_keys() if schema.public_attributes else None
    if numeric is not None:
        return answer_numeric(numeric, SufficientStatistics.from_schema(schema, keys, codes),
                              mechanism_card.mechanism.epsilon, level, card=mechanism_card,
                              rows_per_device=rows_per_device)
    assert batch is not None
    if isinstance(mechanism_card.mechanism, FrequencyOracle):
        stats: Statistics = KeyedTallies.from_rows(mechanism_card.mechanism, keys, codes,
                                                   public_domain_size=schema.public_domain_size)
    else:
        stats = SufficientStatistics.from_schema(schema, keys, codes)
    if not by_group(schema):
        return estimate(batch, stats, mechanism_card.mechanism, level=level, codes=codes)
    kept = eligible(batch, stats)
    if kept.stats.n != stats.n:  # the rows of the groups kept (a dense block, which needs them, reads no other)
        codes = codes[np.isin(keys if keys is not None else np.zeros(len(codes), np.int64),
                              kept.stats.present_keys)]
    answers = estimate(batch, kept.stats, mechanism_card.mechanism, level=level, codes=codes)
    if schema.shuffle is None and not kept.withheld.groups:
        return answers
    guarantees = of_card(mechanism_card, ANSWERS, kept.labels, kept.counts, rows_per_device=rows_per_device,
                         withheld=kept.withheld)
    return replace(answers, guarantees=guarantees)
