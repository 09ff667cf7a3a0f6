"""DP-PQD on UCI Adult (seed 004 §7 protocol, Figs. 5-10): which decider certifies which synthetic answers.

Private table D: Adult (``../shared/data/adult/adult.csv.gz``, 32,561 tuples; read-only, never
copied). Two synthetic sides, each built here with a seeded generator:

* **E** — three ldpsynth releases by mechanism E at ε_E = 4 per value (seed 000): the private value
  is ``age`` (17..90), ``hours-per-week`` (1..99) or ``capital-gain`` (continuous [0, 100000), 32
  buckets), the public attributes ``sex``, ``race``, ``marital-status`` travel in clear; the
  synthetic answer is the companion estimate (eq. 17; a post-processed quantile for MEDIAN) of
  the release whose private value the query uses (:mod:`ldpsynth.aggregator.central.pqd_release`).
* **MWEM** — a synthetic table sampled from MWEM (ε = 1, T = 30 rounds, 1- and 2-way marginals
  over sex, race, marital-status and binned age, hours-per-week, capital-gain;
  :mod:`ldpsynth.aggregator.central.pqd_mwem`).

Queries: 12 COUNT, 9 SUM (5 on capital-gain, 4 on hours-per-week), 9 MEDIAN(age), conjunctive
predicates of varying selectivity. Public domains: age 0..100, hours-per-week 0..99, capital-gain
0..99999 (:math:`GS_q` = 99 and 99999). Sweeps as in seed 004: τ ∈ {0.2, 0.8, 3.2, 12.8, 51.2} %
of :math:`q(D_s)` at ε = 0.25, and ε ∈ {0.0625, ..., 1} at τ = 3.2 %; 100 executions each;
error = wrong outcomes / 100 (and the exact error alongside). Deciders: LM_count, EM_count
(stable) and EM_count_legacy (the artifact's overflow), LM_sum, R2T_sum, SVT_sum (Alg. 4),
EM_med, Hist_med.

Writes to ``--out`` (default ``experiments/results/pqd_adult``): ``errors.csv`` (every run),
``queries.md``, ``summary.md`` (mean error per decider by the relation of q(D) to I, like the
seed's Table 4), and one PNG per (aggregate, sweep, synthetic side). Seeds are fixed
(``--seed``): the runs are reproducible simulations, not private releases.

    python experiments/pqd_adult.py [--out DIR] [--trials 100] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ldpsynth.aggregator.central.pqd_deciders import DECIDERS, evaluate
from ldpsynth.aggregator.central.pqd_mwem import Binning, mwem_synthetic_table
from ldpsynth.aggregator.central.pqd_problem import DecisionProblem
from ldpsynth.aggregator.central.pqd_query import Query, parse_sql
from ldpsynth.aggregator.central.pqd_release import release_table
from ldpsynth.aggregator.central.pqd_table import NumericDomain, Table, read_table
from ldpsynth.aggregator.central.records import write_records
from ldpsynth.aggregator.simulation.datasets import DatasetNotFound, dataset_path
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.schema import CategoricalAttribute, ContinuousAttribute, IntegerAttribute, Schema
from ldpsynth.shared.statistics import SufficientStatistics

TAUS = (0.002, 0.008, 0.032, 0.128, 0.512)
EPSILONS = (0.0625, 0.125, 0.25, 0.5, 1.0)
DEFAULT_TAU, DEFAULT_EPSILON = 0.032, 0.25
EPSILON_E, EPSILON_MWEM, MWEM_ROUNDS = 4.0, 1.0, 30

SEX = ("Female", "Male")
RACE = ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")
MARITAL = ("Divorced", "Married-AF-spouse", "Married-civ-spouse", "Married-spouse-absent", "Never-married",
           "Separated", "Widowed")
DOMAINS = {"age": NumericDomain(0, 100, attribute="age"),
           "hours-per-week": NumericDomain(0, 99, attribute="hours-per-week"),
           "capital-gain": NumericDomain(0, 99999, attribute="capital-gain")}
DECIDERS_FOR = {"count": ("LM_count", "EM_count", "EM_count_legacy"), "sum": ("LM_sum", "R2T_sum", "SVT_sum"),
                "median": ("EM_med", "Hist_med")}

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
]

BINNINGS = [
    Binning("sex", values=SEX), Binning("race", values=RACE), Binning("marital-status", values=MARITAL),
    Binning("age", edges=(17, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 91)),
    Binning("hours-per-week", edges=(1, 20, 30, 35, 40, 41, 45, 50, 60, 100)),
    Binning("capital-gain", edges=(0, 1, 2000, 4000, 6000, 8000, 10000, 15000, 30000, 100000)),
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


def synthetic_answer(query: Query, side: str, synthetic: dict[str, Table] | Table) -> float:
    if side == "MWEM":
        return query.answer(synthetic)  # type: ignore[arg-type]
    numeric = [c.attribute for c in query.where if c.attribute in DOMAINS] + ([query.attribute] if query.attribute else [])
    # a query on public attributes only is answered exactly by any release (its group sizes are public)
    return query.answer(synthetic[numeric[0] if numeric else "age"])  # type: ignore[index]


def relation(truth: float, problem: DecisionProblem) -> str:
    """Where q(D) lies relative to I (the seed's Table 4 cases)."""
    if abs(truth - problem.synthetic_answer) <= 1e-9 * max(1.0, abs(truth)):  # a release's exact counts, up to rounding
        return "q(D) = q(D_s)"
    return "q(D) in I" if problem.satisfied(truth) else "q(D) not in I"


def run(out: Path, trials: int, seed: int, quick: bool) -> list[dict]:
    private = read_table(dataset_path("adult/adult.csv.gz"), "private")
    rng = np.random.default_rng(seed)
    started = time.time()
    sides = {"E": e_releases(private, rng)}
    print(f"E releases built in {time.time() - started:.1f} s", flush=True)
    started = time.time()
    sides["MWEM"] = mwem_synthetic_table(private, BINNINGS, EPSILON_MWEM, MWEM_ROUNDS, rng)
    print(f"MWEM table fitted and sampled in {time.time() - started:.1f} s", flush=True)
    numbered = {k: parse_sql(sql) for k, sql in enumerate(QUERIES, start=1)}
    if quick:
        numbered = {k: numbered[k] for k in (1, 13, 18, 22)}
    settings = [("tau", t, DEFAULT_EPSILON) for t in TAUS] + [("epsilon", DEFAULT_TAU, e) for e in EPSILONS]
    if quick:
        settings = [("tau", DEFAULT_TAU, DEFAULT_EPSILON), ("epsilon", DEFAULT_TAU, 1.0)]
    rows = []
    total = len(sides) * len(numbered)
    for done, (side, (number, query)) in enumerate(((s, q) for s in sides for q in numbered.items()), start=1):
        answer = synthetic_answer(query, side, sides[side])
        truth = query.answer(private)
        aggregate = "median" if query.is_quantile else query.aggregate
        for sweep, tau, eps in settings:
            problem = DecisionProblem.relative(query, answer, tau, eps, DOMAINS.get(query.attribute or ""))
            for name in DECIDERS_FOR[aggregate]:
                result = evaluate(DECIDERS[name], private, problem, rng, trials)
                rows.append({"side": side, "query": number, "aggregate": aggregate, "sweep": sweep,
                             "tau": tau, "epsilon": eps, "decider": name, "q_D": truth, "q_Ds": answer,
                             "relation": relation(truth, problem), "error": result.empirical_error,
                             "exact_error": result.exact_error})
        print(f"[{done}/{total}] {side} q{number}: q(D) = {truth:g}, q(D_s) = {answer:g}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    write_records(out / "errors.csv", rows)
    write_tables(rows, numbered, out)
    write_plots(rows, out)
    return rows


def write_tables(rows: list[dict], queries: dict[int, Query], out: Path) -> None:
    answers = {(r["side"], r["query"]): (r["q_D"], r["q_Ds"]) for r in rows}
    lines = ["| # | query | q(D) | q(D_s) E | q(D_s) MWEM |", "|---|---|---:|---:|---:|"]
    for k, query in queries.items():
        e = answers.get(("E", k), (float("nan"),) * 2)
        m = answers.get(("MWEM", k), (float("nan"),) * 2)
        lines.append(f"| q{k} | `{query.to_sql()}` | {e[0]:.6g} | {e[1]:.6g} | {m[1]:.6g} |")
    (out / "queries.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        for rel in (r["relation"], "all"):
            groups[(r["side"], r["aggregate"], r["decider"], rel)].append(r["error"])
    relations = ("q(D) = q(D_s)", "q(D) in I", "q(D) not in I", "all")
    lines = ["| synthetic | aggregate | decider | " + " | ".join(relations) + " |",
             "|---|---|---|" + "---:|" * len(relations)]
    for side in ("E", "MWEM"):
        for aggregate, names in DECIDERS_FOR.items():
            for name in names:
                cells = []
                for rel in relations:
                    errors = groups.get((side, aggregate, name, rel))
                    cells.append(f"{np.mean(errors):.3f} ({len(errors)})" if errors else "-")
                if any(c != "-" for c in cells):
                    lines.append(f"| {side} | {aggregate.upper()} | {name} | " + " | ".join(cells) + " |")
    text = ("Mean error (fraction of wrong outcomes over the executions) per decider, by where q(D) lies "
            "relative to I; in brackets the number of (query, setting) cells.\n\n" + "\n".join(lines) + "\n")
    (out / "summary.md").write_text(text, encoding="utf-8")


def write_plots(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"LM_count": "tab:blue", "EM_count": "tab:orange", "EM_count_legacy": "tab:red", "LM_sum": "tab:blue",
               "R2T_sum": "tab:purple", "SVT_sum": "tab:brown", "EM_med": "tab:orange", "Hist_med": "tab:green"}
    for side in ("E", "MWEM"):
        for aggregate in DECIDERS_FOR:
            numbers = sorted({r["query"] for r in rows if r["aggregate"] == aggregate and r["side"] == side})
            for sweep in ("tau", "epsilon"):
                cols = 4
                fig, axes = plt.subplots(max(1, -(-len(numbers) // cols)), cols, figsize=(14, 3.0 * -(-len(numbers) // cols)),
                                         squeeze=False)
                for ax, k in zip(axes.flat, numbers):
                    cell = [r for r in rows if r["side"] == side and r["query"] == k and r["sweep"] == sweep]
                    for name in DECIDERS_FOR[aggregate]:
                        pts = sorted((r[sweep], r["error"]) for r in cell if r["decider"] == name)
                        if pts:
                            x, y = zip(*pts)
                            ax.plot(x, y, marker="o", color=colours[name], label=name)
                    ax.set_xscale("log", base=2)
                    ticks = TAUS if sweep == "tau" else EPSILONS
                    ax.set_xticks(ticks, [f"{t * 100:g}%" if sweep == "tau" else f"{t:g}" for t in ticks], fontsize=7)
                    ax.minorticks_off()
                    ax.set_ylim(-0.03, 1.03)
                    ax.set_title(f"q{k}", fontsize=9)
                    ax.set_xlabel("tau (fraction of q(D_s))" if sweep == "tau" else "epsilon", fontsize=8)
                for ax in list(axes.flat)[len(numbers):]:
                    ax.axis("off")
                axes.flat[0].set_ylabel("error")
                axes.flat[0].legend(fontsize=7)
                fixed = f"epsilon = {DEFAULT_EPSILON}" if sweep == "tau" else f"tau = {DEFAULT_TAU * 100:g} %"
                fig.suptitle(f"Adult, {aggregate.upper()} queries, synthetic side {side}: error vs {sweep} ({fixed})")
                fig.tight_layout()
                fig.savefig(out / f"{aggregate}_{sweep}_{side}.png", dpi=90)
                plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "pqd_adult")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20231)
    parser.add_argument("--quick", action="store_true", help="4 queries, 2 settings (the CI smoke run)")
    args = parser.parse_args(argv)
    try:
        run(args.out, args.trials, args.seed, args.quick)
    except DatasetNotFound as exc:
        print(f"pqd_adult: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
