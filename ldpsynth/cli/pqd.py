"""``ldpsynth pqd``: is a synthetic answer within τ of the private one? (DP-PQD, Patwa et al., PVLDB 2023)

::

    ldpsynth pqd --private D.csv --synthetic S.csv \\
        --query "SELECT COUNT(*) FROM t WHERE sex = 'Male' AND age BETWEEN 30 AND 39" \\
        --tau 0.032 --relative --epsilon 0.25 [--decider LM_count ...] [--domain age=0:100] \\
        [--card card.json] [--trials N] [--seed S] [--json]

Prints the decision of each decider (1: "distance bound satisfied", 0: "unmet"); each decision
is ε-DP in the private table, so k deciders spend k·ε (sequential composition). The synthetic
answer :math:`q(D_s)` is the query on ``--synthetic`` (any CSV/Parquet table, e.g. an MWEM or
AIM sample), or, with ``--card``, the companion estimate of an ldpsynth release (its export and
mechanism card), or ``--synthetic-answer`` given directly. ``--domain NAME=LO:HI[:STEP]`` is the
public domain of the aggregated attribute (SUM: :math:`GS_q`; MEDIAN: EM_med's candidates).

``--trials N`` is the *evaluation mode*: it runs N independent executions, reads the truth
:math:`q(D)` and prints the empirical and the exact error. It is not private (N executions
spend N·ε, and the truth is printed): for experiments only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ldpsynth.cli.options import add_command
from ldpsynth.shared.errors import ValidationError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``pqd`` subcommand."""
    parser = add_command(
        subparsers, "pqd", run,
        help="privately decide whether a synthetic answer is within tau of the private one (DP-PQD)",
        description="DP-PQD per-query deciders (Patwa et al., PVLDB 17(1)): decide under epsilon-DP whether "
                    "|q(D) - q(D_s)| < tau for a COUNT, SUM or MEDIAN query.")
    parser.add_argument("--private", required=True, type=Path, help="the private table D (.csv, .csv.gz, .parquet)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--synthetic", type=Path, help="the synthetic table D_s (.csv, .csv.gz, .parquet), or with "
                                                       "--card the CSV export of an ldpsynth release")
    source.add_argument("--synthetic-answer", type=float, help="q(D_s) itself")
    parser.add_argument("--card", type=Path, help="mechanism card: --synthetic is an ldpsynth release, q(D_s) its "
                                                  "companion estimate (WYZ eq. 17)")
    parser.add_argument("--query", required=True, help="SELECT COUNT(*)|SUM(A)|MEDIAN(A)|QUANTILE_CONT(A, q) FROM t "
                                                       "[WHERE conjunction], or the JSON form")
    parser.add_argument("--tau", required=True, type=float, help="distance bound (absolute, or a fraction of "
                                                                  "|q(D_s)| with --relative)")
    parser.add_argument("--relative", action="store_true", help="tau is a fraction of |q(D_s)| (0.032 = 3.2 %%)")
    parser.add_argument("--epsilon", required=True, type=float, help="privacy budget of each decision")
    parser.add_argument("--decider", action="append", help="decider name (repeatable; default: the deciders DP-PQD "
                                                           "evaluates for the aggregate)")
    parser.add_argument("--domain", help="public domain of the aggregated attribute: NAME=LO:HI[:STEP]")
    parser.add_argument("--trials", type=int, help="evaluation mode: N executions, empirical and exact error "
                                                   "against the truth (not private)")
    parser.add_argument("--seed", type=int, help="seed of the noise (default: fresh OS entropy)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _synthetic_answer(args: argparse.Namespace, query) -> tuple[float, str]:
    from ldpsynth.evaluation.pqd.release import load_release
    from ldpsynth.evaluation.pqd.table import read_table

    if args.synthetic_answer is not None:
        if args.card is not None:
            raise ValidationError("--card", "only with --synthetic", "given with --synthetic-answer")
        return args.synthetic_answer, "given"
    if args.card is not None:
        return query.answer(load_release(args.synthetic, args.card)), "ldpsynth release (eq. 17 estimate)"
    return query.answer(read_table(args.synthetic, "synthetic")), "synthetic table"


def run(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth pqd``."""
    import numpy as np

    from ldpsynth.evaluation.pqd.deciders import (
        DEFAULT_DECIDERS,
        evaluate,
        get_decider,
        require_private,
        run_decider,
    )
    from ldpsynth.evaluation.pqd.problem import DecisionProblem
    from ldpsynth.evaluation.pqd.query import parse_query
    from ldpsynth.evaluation.pqd.table import parse_domain, read_table

    query = parse_query(args.query)
    domain = parse_domain(args.domain) if args.domain else None
    names = args.decider or list(DEFAULT_DECIDERS[query.aggregate])
    deciders = [get_decider(name) for name in names]
    answer, source = _synthetic_answer(args, query)
    build = DecisionProblem.relative if args.relative else DecisionProblem
    problem = build(query, answer, args.tau, args.epsilon, domain)
    for decider in deciders:
        decider.check(problem)
        if args.trials is None:  # before any decider reads the private table
            require_private(decider)
    private = read_table(args.private, "private")
    rng = np.random.default_rng(args.seed)
    l, r = problem.interval
    header = {"query": query.to_sql(), "synthetic_answer": answer, "synthetic_source": source, "tau": problem.tau,
              "interval": [l, r], "epsilon_per_decision": problem.epsilon}
    rows: list[dict[str, Any]] = []
    if args.trials is None:
        for decider in deciders:
            run_ = run_decider(decider, private, problem, rng)
            rows.append({"decider": decider.name, "decision": int(run_.decisions[0]),
                         "meaning": "distance bound satisfied" if run_.decisions[0] else "distance bound unmet",
                         "epsilon": run_.epsilon_per_run})
        header["epsilon_total"] = sum(row["epsilon"] for row in rows)
    else:
        header["mode"] = f"evaluation: {args.trials} executions per decider read the truth (not private)"
        for decider in deciders:
            rows.append(evaluate(decider, private, problem, rng, args.trials)._asdict())
    if args.json:
        json.dump({**header, "results": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"query           {header['query']}")
    print(f"q(D_s)          {answer:g} ({source})")
    print(f"interval        ({l:g}, {r:g})  tau = {problem.tau:g}")
    if args.trials is None:
        print(f"epsilon         {problem.epsilon:g} per decision, {header['epsilon_total']:g} in total")
        print("\n| decider | decision | meaning |\n|---|---:|---|")
        for row in rows:
            print(f"| {row['decider']} | {row['decision']} | {row['meaning']} |")
    else:
        print(f"mode            {header['mode']}")
        print(f"q(D)            {rows[0]['true_answer']:g} (within tau: {'yes' if rows[0]['satisfied'] else 'no'})")
        print("\n| decider | accepted | empirical error | exact error |\n|---|---:|---:|---:|")
        for row in rows:
            print(f"| {row['decider']} | {row['accepted']}/{row['trials']} | {row['empirical_error']:.4f} | "
                  f"{row['exact_error']:.4f} |")
    return 0
