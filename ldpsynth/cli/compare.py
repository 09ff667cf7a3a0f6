"""``ldpsynth compare``: mechanism E beside central mechanisms on the same data and workload.

::

    ldpsynth compare --experiment fig2|fig3|fig4 [--mechanisms laplace,mwem,mwem-subdb,dpfw,dpam]
                     [--runs R] [--epsilon 1] [--rounds 10] [--seed S] [--out DIR] [--quick]
    ldpsynth compare --experiment fig2-sensitivity [--rounds T] [--runs R] [--epsilon 1] [--seed S] [--out DIR]
                     [--quick]
    ldpsynth compare --data ROWS.csv --label movie --value rating --queries Q.json [--mechanisms ...] ...

The built-in experiments reproduce WYZ Figs. 2-4 on MovieLens-100k
(:mod:`ldpsynth.evaluation.comparison.wyz_figures`). The second form compares on your own data: a CSV
with an integer public ``--label`` column (codes 0..G-1; omit for none) and an integer private
``--value`` column (codes 0..k-1), and a JSON array of table queries (linear, predicate, marginal,
grouped on ``label``; one normalisation) as ``ldpsynth estimate`` reads them; the same queries
every run. Writes ``<name>.md``, ``<name>.csv`` and ``<name>.png`` to ``--out`` and prints the
Markdown. E (local) is always included.

E's ε is a *local* promise (ε-LDP per row), the central mechanisms' a *central* one: not the same
promise. ``e-shuffled`` (labels public) and ``e-shuffled-private-label`` set E behind a shuffler
beside them at the same central ε: ε0 = ``local_epsilon_for(ε, |D|, n, --delta)`` (n: the smallest
label group, or every row when the label is randomised too), then E at ε0; their guarantee reads
(ε, δ)-DP, the Laplace and MWEM rows' pure ε-DP (:mod:`ldpsynth.evaluation.comparison.shuffled_e`).

``fig2-sensitivity`` runs Fig. 2's protocol for a fixed grid of contestants
(:mod:`ldpsynth.evaluation.comparison.subdb_sensitivity`): E, plain MWEM and sub-database MWEM with one
sub-database per movie or the coarsest partition, ε split in parallel or sequentially, at
T ∈ {10, 30} (``--rounds T``: that T only); ``--mechanisms`` does not apply to it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ldpsynth.cli.options import add_command
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int

if TYPE_CHECKING:
    from ldpsynth.evaluation.comparison.workloads import Histogram, Workload

EXPERIMENTS = ("fig2", "fig3", "fig4", "fig2-sensitivity")
DEFAULT_MECHANISMS = "laplace,mwem,mwem-subdb"
QUICK_HETEROGENEITY = (1, 8, 128)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "compare", run, help="compare mechanism E with central mechanisms (WYZ Figs. 2-4, or your data)",
        description="Run mechanism E (local) and central mechanisms on the same data and workloads for R "
                    "repetitions and write Markdown/CSV tables and PNG plots of their errors and times.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiment", choices=EXPERIMENTS, help="a built-in experiment (WYZ Figs. 2-4)")
    source.add_argument("--data", type=Path, metavar="ROWS.csv", help="your data (see --label, --value, --queries)")
    parser.add_argument("--label", help="--data: public label column (integer codes 0..G-1); omit for none")
    parser.add_argument("--value", help="--data: private value column (integer codes 0..k-1)")
    parser.add_argument("--queries", type=Path, metavar="Q.json", help="--data: JSON array of table queries")
    parser.add_argument("--mechanisms",
                        help="comma-separated central mechanisms (laplace, laplace-histogram, mwem, mwem-subdb, dpfw, "
                             "dpfw-practical, dpam) and E behind a shuffler at the same central ε (e-shuffled: labels "
                             f"public; e-shuffled-private-label); E is always included (default: "
                             f"{DEFAULT_MECHANISMS}; not with fig2-sensitivity, whose contestants are fixed)")
    parser.add_argument("--runs", type=int, help="repetitions (default: 20 for fig2/fig3/fig4, 10 for --data)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε of every mechanism (default 1)")
    parser.add_argument("--delta", type=float, default=1e-9,
                        help="δ of E behind a shuffler (e-shuffled, e-shuffled-private-label: E at the local ε0 whose "
                             "central guarantee is (--epsilon, --delta)-DP; default %(default)g)")
    parser.add_argument("--rounds", type=int,
                        help="MWEM rounds T (default 10; fig2-sensitivity: both 10 and 30 unless given)")
    parser.add_argument("--seed", type=int, default=2016, help="seeds workloads and releases (default 2016)")
    parser.add_argument("--out", type=Path, default=Path("compare-results"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="built-in experiments: a few settings, 2 runs "
                                                              "(fig2/fig2-sensitivity: h in {1, 8, 128})")


def _names(text: str) -> list[str]:
    from ldpsynth.evaluation.comparison.wyz_figures import MECHANISM_NAMES

    names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "E"]
    bad = [n for n in names if n not in MECHANISM_NAMES]
    if bad:
        raise ValidationError("--mechanisms", f"names from {', '.join(MECHANISM_NAMES)}", f"got {bad[0]!r}")
    return names


def _read_data(args: argparse.Namespace) -> tuple[Histogram, Workload]:
    import numpy as np

    from ldpsynth.evaluation.comparison.local_e import LABEL, joint_schema
    from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
    from ldpsynth.shared.queries.compiler import compile_queries
    from ldpsynth.shared.queries.json_form import queries_from_json

    if not args.value or not args.queries:
        raise ValidationError("--data", "given with --value and --queries", "missing")
    try:
        with open(args.data, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        text = args.queries.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError("--data/--queries", "readable files", str(exc.strerror)) from None
    columns = [args.value] + ([args.label] if args.label else [])
    for column in columns:
        if not rows or column not in rows[0]:
            raise ValidationError(f"--data {column}", "a column of the CSV header", "missing")
    try:
        values = np.array([int(r[args.value]) for r in rows])
        labels = np.array([int(r[args.label]) for r in rows]) if args.label else None
    except ValueError:
        raise ValidationError("--data", "integer codes in the label and value columns", "not an integer") from None
    k = int(values.max()) + 1
    groups = int(labels.max()) + 1 if labels is not None else 1
    data = Histogram.from_rows(labels, values, groups, max(k, 2))
    schema = joint_schema(groups, data.k, args.epsilon)
    batch = compile_queries(queries_from_json(text.replace(f'"{args.label}"', f'"{LABEL}"') if args.label
                                              else text), schema)
    workload, _ = Workload.from_batch(batch)
    return data, workload


def _command(args: argparse.Namespace, runs: int) -> str:
    """The command that reproduces a built-in experiment's run (effective options, for its report)."""
    parts = ["ldpsynth compare --experiment", args.experiment, f"--runs {runs} --epsilon {args.epsilon:g} "
             f"--seed {args.seed}"]
    parts += [f"--rounds {args.rounds}"] * (args.rounds is not None) + ["--quick"] * args.quick
    return " ".join(parts + [f"--out {args.out}"])


def run(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth compare``."""
    import numpy as np

    from ldpsynth.evaluation.comparison import wyz_figures
    from ldpsynth.evaluation.comparison.harness import compare, write_report

    if args.experiment == "fig2-sensitivity" and args.mechanisms is not None:
        raise ValidationError("--mechanisms", "omitted with --experiment fig2-sensitivity (fixed contestants)",
                              f"got {args.mechanisms!r}")
    names = _names(args.mechanisms or DEFAULT_MECHANISMS)
    rng = np.random.default_rng(args.seed)
    rounds = 10 if args.rounds is None else check_int(args.rounds, "--rounds", 1)
    default_runs = 2 if args.quick else (10 if args.data else 20)
    runs = default_runs if args.runs is None else check_int(args.runs, "--runs", 1)
    if args.data:
        data, workload = _read_data(args)
        trials = compare(data, lambda _: workload,
                         wyz_figures.mechanisms(names, args.epsilon, rounds=rounds, delta=args.delta),
                         runs=runs, rng=rng, setting=args.data.name, x=1.0, epsilon=args.epsilon)
        paths = write_report(args.out, "compare", trials, title=f"E vs central mechanisms on {args.data.name}",
                             x_label="data set", notes=f"{data.n:,} rows, {workload.size} queries, ε = "
                                                       f"{args.epsilon:g}, {runs} runs.")
    elif args.experiment == "fig2":
        paths = wyz_figures.fig2(args.out, runs=runs, epsilon=args.epsilon, names=names, rng=rng, rounds=rounds,
                                 heterogeneity=QUICK_HETEROGENEITY if args.quick else wyz_figures.HETEROGENEITY,
                                 delta=args.delta)
    elif args.experiment == "fig2-sensitivity":
        from ldpsynth.evaluation.comparison.subdb_sensitivity import ROUNDS, fig2_sensitivity

        paths = fig2_sensitivity(args.out, runs=runs, epsilon=args.epsilon, rng=rng,
                                 rounds=(args.rounds,) if args.rounds else ROUNDS,
                                 heterogeneity=QUICK_HETEROGENEITY if args.quick else wyz_figures.HETEROGENEITY,
                                 command=_command(args, runs))
    elif args.experiment == "fig3":
        paths = wyz_figures.fig3(args.out, runs=runs, epsilon=args.epsilon, names=names, rng=rng, rounds=rounds,
                                 sizes=(64, 1024) if args.quick else wyz_figures.QUERY_SET_SIZES,
                                 databases=5 if args.quick else 50)
    else:
        paths, _ = wyz_figures.fig4(args.out, runs=runs, epsilon=args.epsilon, rng=rng,
                                    sizes=(15_000, 60_000) if args.quick else wyz_figures.DATABASE_SIZES)
    print(next(p for p in paths if p.suffix == ".md").read_text(encoding="utf-8"))
    print(f"[compare] wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0
