"""DP-PQD on UCI Adult (DP-PQD §7 protocol, Figs. 5-11), over seeds: which decider certifies which synthetic answers.

Private table D: Adult (``$LDPSYNTH_DATA/adult/adult.csv.gz`` or ``../shared/data``, 32,561 tuples;
read-only, never copied). Two synthetic sides, both rebuilt in every seed:

* **E** — three ldpsynth releases by mechanism E at ε_E = 4 per value (WYZ): the private value
  is ``age`` (17..90), ``hours-per-week`` (1..99) or ``capital-gain`` (continuous [0, 100000), 32
  buckets), the public attributes ``sex``, ``race``, ``marital-status`` travel in clear; the
  synthetic answer is the companion estimate (WYZ eq. 17; a post-processed quantile for MEDIAN) of
  the release whose private value is the one numeric attribute the query uses
  (:mod:`ldpsynth.evaluation.pqd.release`). Queries on ``capital-loss``, or on two numeric
  attributes, have no E release and are decided on the MWEM side only.
* **MWEM** — a synthetic table sampled from MWEM (ε = 1, T = 30 rounds, 1- and 2-way marginals
  over sex, race, marital-status and binned age, hours-per-week, capital-gain, capital-loss;
  :mod:`ldpsynth.evaluation.pqd.mwem`).

Queries: 12 COUNT, 19 SUM, 9 MEDIAN(age), conjunctive predicates of varying selectivity. The SUM
queries come in two families by the downward local sensitivity :math:`DS_{q,D}` (DP-PQD Def. 2.4,
the largest aggregated value among the selected tuples) against :math:`GS_q`: q13-q21 with
:math:`DS_{q,D} > GS_q/10` (8 of 9 have :math:`DS_{q,D} = GS_q`) and q31-q40 with
:math:`DS_{q,D} \\le GS_q/10` (capital-loss, value bands of capital-gain and hours-per-week, a narrow
age band), the regime where DP-PQD Table 4 recommends R2T_sum or SVT_sum. Public domains: age
0..100, hours-per-week 0..99, capital-gain and capital-loss 0..99999 (the 5-digit census fields;
DP-PQD Ex. 2.5) — :math:`GS_q` = 99 and 99999. Sweeps as in DP-PQD §7.1: τ ∈ {0.2, 0.8, 3.2, 12.8,
51.2} % of :math:`q(D_s)` at ε = 0.25, and ε ∈ {0.0625, ..., 1} at τ = 3.2 %; 100 executions each;
error = wrong outcomes / 100 (and the exact error alongside). Deciders: LM_count, EM_count
(stable) and EM_count_legacy (the artifact's overflow), LM_sum, R2T_sum, SVT_sum (Alg. 2 with
Alg. 4), EM_med, Hist_med.

Seeds: each of ``--seeds`` seeds (``--seed``, ``--seed + 1``, ...) reruns the whole pipeline —
E releases, MWEM table, every decider's executions — from ``numpy.random.default_rng(seed)``;
:mod:`pqd_adult_summary` reduces them to per-seed means and 95 % Student-t intervals over seeds.

Writes to ``--out`` (default ``experiments/results/pqd_adult``): ``errors.csv`` (every execution
batch of every seed), ``queries.md`` (q(D), q(D_s) over seeds, and for SUM :math:`DS_{q,D}`,
:math:`GS_q` and the τ_min bounds of DP-PQD Props. 5.2 and 5.5), ``summary.md``/``summary.csv``
(mean error per decider by the relation of q(D) to I, DP-PQD Table 4's cases, with intervals),
``comparisons.md``/``comparisons.csv`` (paired differences between deciders) and one PNG per
(aggregate, sweep, synthetic side). These are reproducible simulations, not private releases.

    python experiments/pqd_adult.py [--out DIR] [--trials 100] [--seed 20231] [--seeds 5] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pqd_adult_summary import write_plots, write_summary

from ldpsynth.evaluation.pqd.deciders import DECIDERS, evaluate
from ldpsynth.evaluation.pqd.mwem import Binning, mwem_synthetic_table
from ldpsynth.evaluation.pqd.problem import DecisionProblem
from ldpsynth.evaluation.pqd.query import Query, parse_sql
from ldpsynth.evaluation.pqd.release import release_table
from ldpsynth.evaluation.pqd.sum import lm_sum_tau_min_bound, r2t_sum_tau_min_bound, truncation_thresholds
from ldpsynth.evaluation.pqd.table import NumericDomain, Table, read_table
from ldpsynth.evaluation.records import write_records
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import CategoricalAttribute, ContinuousAttribute, IntegerAttribute, Schema
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

TAUS = (0.002, 0.008, 0.032, 0.128, 0.512)
EPSILONS = (0.0625, 0.125, 0.25, 0.5, 1.0)
DEFAULT_TAU, DEFAULT_EPSILON = 0.032, 0.25
EPSILON_E, EPSILON_MWEM, MWEM_ROUNDS = 4.0, 1.0, 30
#: δ of the τ_min bounds listed in queries.md (DP-PQD Ex. 5.3).
DELTA = 0.05
#: SUM queries with DS_{q,D} <= SMALL_DS * GS_q form the "DS << GS" family.
SMALL_DS = 0.1

SEX = ("Female", "Male")
RACE = ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")
MARITAL = ("Divorced", "Married-AF-spouse", "Married-civ-spouse", "Married-spouse-absent", "Never-married",
           "Separated", "Widowed")
DOMAINS = {"age": NumericDomain(0, 100, attribute="age"),
           "hours-per-week": NumericDomain(0, 99, attribute="hours-per-week"),
           "capital-gain": NumericDomain(0, 99999, attribute="capital-gain"),
           "capital-loss": NumericDomain(0, 99999, attribute="capital-loss")}
#: The private value of each E release (one release per value).
E_VALUES = ("age", "hours-per-week", "capital-gain")
DECIDERS_FOR = {"count": ("LM_count", "EM_count", "EM_count_legacy"), "sum": ("LM_sum", "R2T_sum", "SVT_sum"),
                "median": ("EM_med", "Hist_med")}
QUICK = (1, 13, 18, 22, 38)

W = "SELECT {} FROM adult WHERE "
QUERIES = [
    W.format("COUNT(*)") + "sex = 'Male' AND age BETWEEN 30 AND 39",
    W.format("COUNT(*)") + "race = 'White' AND \"marital-status\" = 'Married-civ-spouse' AND age >= 40",
    W.format("COUNT(*)") + "sex = 'Female' AND \"marital-status\" = 'Never-married' AND age BETWEEN 20 AND 29",
    W.format("COUNT(*)") + "race = 'Black' AND sex = 'Female' AND age BETWEEN 25 AND 44",
    W.format("COUNT(*)") + "race = 'Asian-Pac-Islander' AND age BETWEEN 30 AND 49",
    W.format("COUNT(*)") + "\"marital-status\" = 'Divorced' AND sex = 'Male' AND age >= 50",
    W.format("COUNT(*)") + "\"marital-status\" = 'Separated' AND race = 'Black'",
    W.format("COUNT(*)") + "sex = 'Female' AND age >= 70",
    W.format("COUNT(*)") + "race = 'Amer-Indian-Eskimo' AND sex = 'Male'",
    W.format("COUNT(*)") + "\"marital-status\" = 'Widowed' AND age < 50",
    W.format("COUNT(*)") + "race = 'Other' AND age BETWEEN 20 AND 39",
    W.format("COUNT(*)") + "\"marital-status\" = 'Married-spouse-absent' AND sex = 'Female' AND age BETWEEN 30 AND 59",
    W.format("SUM(\"capital-gain\")") + "sex = 'Male' AND race = 'White'",
    W.format("SUM(\"capital-gain\")") + "sex = 'Female' AND \"marital-status\" = 'Never-married'",
    W.format("SUM(\"capital-gain\")") + "race = 'Black'",
    W.format("SUM(\"capital-gain\")") + "\"marital-status\" = 'Divorced' AND sex = 'Female'",
    W.format("SUM(\"capital-gain\")") + "race = 'Asian-Pac-Islander' AND sex = 'Male'",
    W.format("SUM(\"hours-per-week\")") + "sex = 'Male' AND \"marital-status\" = 'Married-civ-spouse'",
    W.format("SUM(\"hours-per-week\")") + "sex = 'Female' AND race = 'Black'",
    W.format("SUM(\"hours-per-week\")") + "\"marital-status\" = 'Never-married' AND race = 'White'",
    W.format("SUM(\"hours-per-week\")") + "race = 'Amer-Indian-Eskimo'",
    W.format("MEDIAN(age)") + "sex = 'Male'",
    W.format("MEDIAN(age)") + "sex = 'Female' AND race = 'White'",
    W.format("MEDIAN(age)") + "race = 'Black' AND sex = 'Male'",
    W.format("MEDIAN(age)") + "\"marital-status\" = 'Never-married'",
    W.format("MEDIAN(age)") + "\"marital-status\" = 'Widowed'",
    W.format("MEDIAN(age)") + "\"marital-status\" = 'Divorced' AND sex = 'Female'",
    W.format("MEDIAN(age)") + "race = 'Asian-Pac-Islander'",
    W.format("MEDIAN(age)") + "race = 'Other' AND sex = 'Female'",
    W.format("MEDIAN(age)") + "\"marital-status\" = 'Married-civ-spouse' AND race = 'Black'",
    # SUM with DS_{q,D} <= GS_q/10 (q31-q40)
    W.format("SUM(\"capital-loss\")") + "sex = 'Male' AND race = 'White'",
    W.format("SUM(\"capital-loss\")") + "\"marital-status\" = 'Never-married'",
    W.format("SUM(\"capital-loss\")") + "\"capital-loss\" >= 1",
    W.format("SUM(\"capital-loss\")") + "\"capital-loss\" >= 1 AND \"marital-status\" = 'Married-civ-spouse'",
    W.format("SUM(\"capital-loss\")") + "age BETWEEN 17 AND 19",
    W.format("SUM(\"capital-gain\")") + "\"capital-gain\" BETWEEN 1 AND 4999",
    W.format("SUM(\"capital-gain\")") + "\"capital-gain\" BETWEEN 1 AND 9999 AND sex = 'Female'",
    W.format("SUM(\"hours-per-week\")") + "\"hours-per-week\" <= 8",
    W.format("SUM(\"hours-per-week\")") + "\"hours-per-week\" <= 9 AND sex = 'Female'",
    W.format("SUM(\"hours-per-week\")") + "\"hours-per-week\" <= 9 AND \"marital-status\" = 'Never-married'",
]

BINNINGS = [
    Binning("sex", values=SEX), Binning("race", values=RACE), Binning("marital-status", values=MARITAL),
    Binning("age", edges=(17, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 91)),
    Binning("hours-per-week", edges=(1, 20, 30, 35, 40, 41, 45, 50, 60, 100)),
    Binning("capital-gain", edges=(0, 1, 2000, 4000, 6000, 8000, 10000, 15000, 30000, 100000)),
    Binning("capital-loss", edges=(0, 1, 1000, 1500, 2000, 2500, 5000, 100000)),
]


def e_releases(private: Table, rng: np.random.Generator) -> dict[str, Table]:
    """One ldpsynth release per private value (mechanism E at ε_E, seeded simulation), as weighted tables."""
    public = (CategoricalAttribute("sex", True, SEX), CategoricalAttribute("race", True, RACE),
              CategoricalAttribute("marital-status", True, MARITAL))
    values = {"age": IntegerAttribute("age", False, 17, 90),
              "hours-per-week": IntegerAttribute("hours-per-week", False, 1, 99),
              "capital-gain": ContinuousAttribute("capital-gain", False, 0.0, 100000.0, 5)}
    columns = {name: private.column(name) for name in ("sex", "race", "marital-status")}
    out = {}
    for name, attribute in values.items():
        schema = Schema(f"adult-{name}", EPSILON_E, (*public, attribute))
        card = MechanismCard.for_schema(schema)
        raw = {**columns, name: private.column(name).astype(np.int64) if isinstance(attribute, IntegerAttribute)
               else private.column(name)}
        codes = card.mechanism.perturb(schema.encode_private(raw), rng)
        stats = SufficientStatistics.from_schema(schema, schema.encode_public(raw), codes)
        out[name] = release_table(stats, card)
    return out


def e_release_of(query: Query) -> str | None:
    """The E release answering ``query``: the one whose private value is the only numeric attribute the query
    uses (any release, here ``age``'s, for public attributes only); None when no release holds them all."""
    numeric = {c.attribute for c in query.where if c.attribute in DOMAINS}
    numeric |= {query.attribute} if query.attribute else set()
    if not numeric:
        return "age"
    name = numeric.pop() if len(numeric) == 1 else None
    return name if name in E_VALUES else None


def synthetic_answer(query: Query, side: str, synthetic: dict[str, Table] | Table) -> float | None:
    """q(D_s) on ``side``; None when the side cannot answer ``query`` (E without a release of its attribute)."""
    if side == "MWEM":
        return query.answer(synthetic)  # type: ignore[arg-type]
    release = e_release_of(query)
    return None if release is None else query.answer(synthetic[release])  # type: ignore[index]


def relation(truth: float, problem: DecisionProblem) -> str:
    """Where q(D) lies relative to I (the cases of DP-PQD Table 4)."""
    if abs(truth - problem.synthetic_answer) <= 1e-9 * max(1.0, abs(truth)):  # a release's exact counts, up to rounding
        return "q(D) = q(D_s)"
    return "q(D) in I" if problem.satisfied(truth) else "q(D) not in I"


@dataclass(frozen=True)
class QueryFacts:
    """What the experiment knows about a query on D (evaluation only: it reads the private table)."""

    truth: float
    selected: int
    family: str
    #: SUM only: DS_{q,D} (DP-PQD Def. 2.4), GS_q, and the threshold Alg. 4 would pick without noise.
    downward_sensitivity: float = math.nan
    global_sensitivity: float = math.nan
    alg4_threshold: float = math.nan


def query_facts(query: Query, private: Table) -> QueryFacts:
    """q(D), n' and the query's family; for SUM :math:`DS_{q,D}` = the largest (clamped) selected value."""
    truth, mask = query.answer(private), query.mask(private)
    if query.is_quantile or query.aggregate == "count":
        return QueryFacts(truth, int(mask.sum()), "MEDIAN" if query.is_quantile else "COUNT")
    domain = DOMAINS[query.attribute]  # type: ignore[index]
    values = np.sort(domain.clamp(query.values(private)[mask]))
    ds, gs = (float(values[-1]) if len(values) else 0.0), domain.global_sensitivity
    thresholds = truncation_thresholds(gs)
    enough = np.searchsorted(values, thresholds, side="right") >= DECIDERS["SVT_sum"].theta * len(values)
    family = f"SUM, DS ≤ GS/{1 / SMALL_DS:g}" if ds <= SMALL_DS * gs else f"SUM, DS > GS/{1 / SMALL_DS:g}"
    return QueryFacts(truth, int(mask.sum()), family, ds, gs, float(thresholds[np.argmax(enough)]))


def run_seed(private: Table, queries: dict[int, Query], facts: dict[int, QueryFacts], settings: list[tuple],
             trials: int, seed: int, label: str) -> list[dict]:
    """The whole pipeline once from ``default_rng(seed)``: both synthetic sides, then every decider on every cell."""
    rng = np.random.default_rng(seed)
    started = time.time()
    sides = {"E": e_releases(private, rng)}
    sides["MWEM"] = mwem_synthetic_table(private, BINNINGS, EPSILON_MWEM, MWEM_ROUNDS, rng)
    print(f"{label} E releases and MWEM table built in {time.time() - started:.1f} s", flush=True)
    rows = []
    for side in sides:
        for number, query in queries.items():
            answer = synthetic_answer(query, side, sides[side])
            if answer is None:
                continue
            fact, aggregate = facts[number], "median" if query.is_quantile else query.aggregate
            for sweep, tau, eps in settings:
                problem = DecisionProblem.relative(query, answer, tau, eps, DOMAINS.get(query.attribute or ""))
                where = relation(fact.truth, problem)
                for name in DECIDERS_FOR[aggregate]:
                    result = evaluate(DECIDERS[name], private, problem, rng, trials)
                    rows.append({"seed": seed, "side": side, "query": number, "aggregate": aggregate,
                                 "family": fact.family, "sweep": sweep, "tau": tau, "epsilon": eps, "decider": name,
                                 "q_D": fact.truth, "q_Ds": float(f"{answer:.9g}"), "relation": where,
                                 "error": result.empirical_error, "exact_error": float(f"{result.exact_error:.6g}")})
        print(f"{label} {side} side decided ({time.time() - started:.0f} s)", flush=True)
    return rows


def load_adult() -> Table:
    """D: Adult with its text columns as fixed-width numpy strings instead of Python objects (the same values;
    a predicate's mask is then one vectorised comparison, about 9x faster)."""
    table = read_table(dataset_path("adult/adult.csv.gz"), "private")
    return Table({k: v.astype(str) if v.dtype == object else v for k, v in table.columns.items()}, name=table.name)


def run(out: Path, trials: int, seeds: list[int], quick: bool) -> list[dict]:
    private = load_adult()
    numbered = {k: parse_sql(sql) for k, sql in enumerate(QUERIES, start=1)}
    if quick:
        numbered = {k: numbered[k] for k in QUICK}
    settings = [("tau", t, DEFAULT_EPSILON) for t in TAUS] + [("epsilon", DEFAULT_TAU, e) for e in EPSILONS]
    if quick:
        settings = [("tau", DEFAULT_TAU, DEFAULT_EPSILON), ("epsilon", DEFAULT_TAU, 1.0)]
    facts = {k: query_facts(q, private) for k, q in numbered.items()}
    started, rows = time.time(), []
    for i, seed in enumerate(seeds, start=1):
        rows += run_seed(private, numbered, facts, settings, trials, seed, f"[seed {seed}: {i}/{len(seeds)}]")
        elapsed = time.time() - started
        print(f"[seed {seed}: {i}/{len(seeds)}] done; {elapsed:.0f} s so far, about "
              f"{elapsed / i * (len(seeds) - i):.0f} s to go", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    write_records(out / "errors.csv", rows)
    write_queries(rows, numbered, facts, out)
    write_summary(rows, seeds, trials, out)
    titles = {k: f"q{k}" + (f" (DS/GS {f.downward_sensitivity / f.global_sensitivity:.2g})"
                            if f.family.startswith("SUM") else "") for k, f in facts.items()}
    write_plots(rows, out, titles)
    print(f"total {time.time() - started:.0f} s", flush=True)
    return rows


def _spread(values: list[float]) -> str:
    """``mean [min, max]`` of the synthetic answers over seeds ('-' when the side cannot answer)."""
    if not values:
        return "-"
    return f"{np.mean(values):.6g} [{min(values):.6g}, {max(values):.6g}]" if len(values) > 1 else f"{values[0]:.6g}"


def write_queries(rows: list[dict], queries: dict[int, Query], facts: dict[int, QueryFacts], out: Path) -> None:
    """``queries.md``: every query with q(D) and q(D_s) over seeds; for SUM, DS_{q,D}, GS_q and the τ_min bounds."""
    answers: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for r in rows:
        answers[(r["side"], r["query"])][r["seed"]] = r["q_Ds"]
    seeds = len({r["seed"] for r in rows})
    lines = [f"q(D_s) per synthetic side: mean [min, max] over the {seeds} seeds ('-': the side has no release "
             "that answers the query).", "",
             "| # | query | family | q(D) | q(D_s) E | q(D_s) MWEM |", "|---|---|---|---:|---:|---:|"]
    for k, query in queries.items():
        e, m = (_spread(list(answers[(side, k)].values())) for side in ("E", "MWEM"))
        lines.append(f"| q{k} | `{query.to_sql()}` | {facts[k].family} | {facts[k].truth:.6g} | {e} | {m} |")
    lines += ["", f"SUM queries: n' selected tuples, DS_q,D (DP-PQD Def. 2.4: the largest selected value), GS_q "
              "(the public domain's largest value), the truncation threshold 2^J that Alg. 4 (SVT_sum's bound on "
              f"DS_q,D) reaches without noise (the first 2^j with at least {DECIDERS['SVT_sum'].theta:g} n' selected "
              "values <= 2^j), and the upper bounds on the effectiveness threshold tau_min at "
              f"epsilon = {DEFAULT_EPSILON:g}, delta = {DELTA:g} of LM_sum (Prop. 5.2) and R2T_sum (Prop. 5.5), "
              f"beside tau = {DEFAULT_TAU:.1%} of q(D). R2T_sum's bound is the lower one only when "
              "DS_q,D/GS_q < ln(1/(2 delta)) / (4 log2(GS_q) ln(log2(GS_q)/delta)).", "",
              "| # | n' | DS_q,D | GS_q | DS/GS | Alg. 4 2^J (no noise) | tau_min LM_sum | tau_min R2T_sum | "
              f"{DEFAULT_TAU:.1%} of q(D) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k, f in facts.items():
        if not f.family.startswith("SUM"):
            continue
        lm = lm_sum_tau_min_bound(f.global_sensitivity, DEFAULT_EPSILON, DELTA)
        r2t = r2t_sum_tau_min_bound(f.global_sensitivity, f.downward_sensitivity, DEFAULT_EPSILON, DELTA)
        lines.append(f"| q{k} | {f.selected} | {f.downward_sensitivity:.6g} | {f.global_sensitivity:.6g} | "
                     f"{f.downward_sensitivity / f.global_sensitivity:.3f} | {f.alg4_threshold:.6g} | {lm:.4g} | "
                     f"{r2t:.4g} | {DEFAULT_TAU * f.truth:.4g} |")
    (out / "queries.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "pqd_adult")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20231, help="first seed (default 20231)")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds, seed, seed + 1, ... (default 5)")
    parser.add_argument("--quick", action="store_true", help="5 queries, 2 settings (the CI smoke run)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds: an integer >= 1, got {args.seeds}")
    try:
        run(args.out, args.trials, [args.seed + i for i in range(args.seeds)], args.quick)
    except DatasetNotFound as exc:
        print(f"pqd_adult: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
