"""JWHZW Tables 3 and 4 on WDBC: worst-case error of the practical smooth-query mechanism over Gaussian-kernel queries.

Data: Wisconsin Diagnostic Breast Cancer (``sklearn.datasets.load_breast_cancer``: 569 rows, 30
continuous attributes; shipped with scikit-learn, no network). Each attribute is mapped to
:math:`[-1,1]` with **public** bounds: the Min/Max of the data set's published documentation (its
"Summary Statistics" table, parsed from the description scikit-learn ships), widened by 1 % of
their width so that the table's 3-digit rounding cannot put a row outside.

Protocol (JWHZW §4, App. A.5): ε = 1; Table 3 ε-DP, Table 4 (ε, δ = 1e-10)-DP; the practical
variant (:mod:`ldpsynth.evaluation.smooth.practical`) with C = 10^4 PCA-ellipsoid
candidates and R = ⌈0.5 n^{d/(2d+K)}⌉ (resp. ⌈0.5 n^{2d/(3d+2K)}⌉) basis functions, K = σ²;
per round 10,000 random queries :math:`f(x) = \\sum_{j\\le10}\\alpha_j e^{-\\|x - x_j\\|^2/(2\\sigma^2)}`
(:mod:`~ldpsynth.evaluation.smooth.queries`, ‖α‖₁ = 1) for σ ∈ {2, 4, 6, 8, 10}; one release
per (round, σ, setting); worst absolute and relative error over the queries, averaged over 20
rounds; time per release. Four settings (:mod:`~ldpsynth.evaluation.smooth.budget`):

* ``adaptive`` (the default; ε-DP, resp. (ε, δ)-DP, verified): PSI only when its noise is below
  the public eigenvalue bound d (at n = 569, d = 30 it is not, so the ellipsoid is the noisy
  mean alone), the whole budget on one release of the means, no snapping;
* ``fixed-split`` (the previous default; DP): centre ε/8, PSI 3ε/8, basis ε/2, snapped candidates;
* ``as-published`` (the fixed split with the paper's noise: PSI eigenvalues from the exact
  covariance, JWHZW Cor. 3.5, hence **not DP**);
* ``non-private`` (replication, **not DP**): the exact mean and the exact covariance's top-5
  eigenpairs, ε on the basis answers, no snapping.

Writes to ``--out`` (default ``experiments/results/smooth_wdbc``): ``errors.csv`` (every round),
``summary.md`` (our rows beside the paper's, with each setting's ratio to the paper and what it
released), ``summary.csv`` and ``wdbc_errors.png``. Seeds are fixed (``--seed``): these are
reproducible simulations.

    python experiments/smooth_wdbc.py [--out DIR] [--rounds 20] [--queries 10000] [--quick]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
from smooth_arguments import smooth_parser  # experiments/smooth_arguments.py (sys.path[0])

from ldpsynth.evaluation.records import write_records
from ldpsynth.evaluation.smooth.practical import PracticalSettings, practical_smooth_synthetic_database
from ldpsynth.evaluation.smooth.queries import KernelQueries
from ldpsynth.evaluation.smooth.release import UnitCube

SIGMAS = (2.0, 4.0, 6.0, 8.0, 10.0)
EPSILON, DELTA = 1.0, 1e-10
TABLES = {"table3": None, "table4": DELTA}
#: name -> (noise setting, allocation, label in the tables).
SETTINGS = {"adaptive": ("safe", "adaptive", "adaptive (default)"),
            "fixed-split": ("safe", "fixed-split", "fixed split (previous default)"),
            "as-published": ("paper", "fixed-split", "as published"),
            "non-private": ("safe", "non-private", "NON-PRIVATE replication")}
#: JWHZW Tables 3 and 4, WDBC rows (absolute, relative error per sigma; time in seconds).
PAPER = {"table3": {"abs": (0.037, 0.059, 0.039, 0.011, 0.012), "rel": (0.329, 0.110, 0.053, 0.013, 0.014),
                    "time": 1.0},
         "table4": {"abs": (0.045, 0.032, 0.019, 0.018, 0.011), "rel": (0.388, 0.061, 0.026, 0.021, 0.013),
                    "time": 1.2}}
WIDEN = 0.01


def wdbc_public_bounds(description: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Min/Max per attribute from the data set's published Summary Statistics table, widened by 1 % of the width."""
    rows = re.findall(r"^[a-z ]+\((?:mean|standard error|worst)\):\s+([-0-9.]+)\s+([-0-9.]+)\s*$", description,
                      flags=re.MULTILINE)
    if len(rows) != count:
        raise RuntimeError(f"expected {count} rows in the WDBC Summary Statistics table, found {len(rows)}")
    lo, hi = np.array(rows, dtype=np.float64).T
    pad = WIDEN * (hi - lo)
    return lo - pad, hi + pad


def load_wdbc() -> np.ndarray:
    """WDBC rows normalised to :math:`[-1,1]^{30}` with the public bounds."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    lo, hi = wdbc_public_bounds(bunch.DESCR, bunch.data.shape[1])
    return UnitCube(lo, hi).to_unit(bunch.data)


def run(z: np.ndarray, rounds: int, queries: int, candidates: int, seed: int,
        progress: bool) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """Every (table, setting, round, sigma) record, and each (table, setting)'s guarantee statement (round 0, σ = 2)."""
    from tqdm import tqdm

    n, d = z.shape
    records, statements = [], {}
    rng = np.random.default_rng(seed)
    uniform = np.full(n, 1.0 / n)
    for r in tqdm(range(rounds), desc="rounds", disable=not progress):
        batch = KernelQueries.random(queries, d, rng)
        truth = batch.answers(z, uniform, SIGMAS)
        for table, delta in TABLES.items():
            for setting, (noise, allocation, _) in SETTINGS.items():
                for i, sigma in enumerate(SIGMAS):
                    release = practical_smooth_synthetic_database(
                        z, EPSILON, sigma * sigma, rng, delta=delta, noise=noise,
                        settings=PracticalSettings(candidates=candidates, allocation=allocation))
                    answer = batch.answers(release.points, release.counts / release.m, (sigma,))[0]
                    gap = np.abs(answer - truth[i])
                    records.append({"table": table, "setting": setting, "sigma": sigma, "round": r,
                                    "abs": float(gap.max()), "rel": float((gap / truth[i]).max()),
                                    "seconds": release.seconds, "epsilon": release.guarantee.epsilon,
                                    "delta": release.guarantee.delta,
                                    "basis": release.details["basis_functions"],
                                    "candidates": release.details["candidates"], "support": len(release.points),
                                    "psi": release.details["psi"] is not None})
                    if r == 0 and i == 0:
                        statements[(table, setting)] = release.guarantee.statement
    return records, statements


def summarise(records: list[dict], statements: dict[tuple[str, str], str]) -> list[dict]:
    """Mean over rounds of the worst-case errors per (table, setting, sigma), their ratio to the paper's
    relative error, time of the slowest sigma, whether PSI ran, and the setting's guarantee statement."""
    rows = []
    for table in TABLES:
        for setting in SETTINGS:
            sel = [x for x in records if x["table"] == table and x["setting"] == setting]
            if not sel:
                continue
            row = {"table": table, "setting": setting, "rounds": len({x["round"] for x in sel}),
                   "epsilon": max(x["epsilon"] for x in sel), "delta": sel[0]["delta"]}
            times = []
            for sigma, paper in zip(SIGMAS, PAPER[table]["rel"]):
                at = [x for x in sel if x["sigma"] == sigma]
                row[f"abs_{sigma:g}"] = float(np.mean([x["abs"] for x in at]))
                row[f"rel_{sigma:g}"] = float(np.mean([x["rel"] for x in at]))
                row[f"ratio_{sigma:g}"] = row[f"rel_{sigma:g}"] / paper
                row[f"basis_{sigma:g}"] = at[0]["basis"]
                times.append(float(np.mean([x["seconds"] for x in at])))
            row["seconds"] = max(times)
            row["psi_runs"] = sum(x["psi"] for x in sel)
            row["statement"] = statements[(table, setting)]
            rows.append(row)
    return rows


def _guarantee(row: dict) -> str:
    if not np.isfinite(row["epsilon"]):
        return "not DP"
    return f"ε = {row['epsilon']:.3g}" + (f", δ = {row['delta']:g}" if row["delta"] else "")


def markdown(summary: list[dict], rounds: int, queries: int, candidates: int, seed: int) -> str:
    head = "| source | setting | guarantee | error | " + " | ".join(f"σ={s:g}" for s in SIGMAS) + " | time (s) |"
    rule = "|" + "---|" * (len(SIGMAS) + 5)
    out = [f"# JWHZW Tables 3 and 4 on WDBC (n = 569, d = 30, ε = 1, C = {candidates}, {queries} queries, "
           f"mean of {rounds} rounds, seed {seed})", "",
           "rel ÷ paper: our mean worst-case relative error over the paper's.", ""]
    for table, title in (("table3", "Table 3: ε-DP"), ("table4", "Table 4: (ε, δ = 1e-10)-DP")):
        out += [f"## {title}", "", head, rule]
        paper = PAPER[table]
        for kind in ("abs", "rel"):
            cells = " | ".join(f"{v:.3f}" for v in paper[kind])
            out.append(f"| paper | as published | claimed | {kind} | {cells} | {paper['time']:.1f} |")
        rows = [x for x in summary if x["table"] == table]
        for row in rows:
            label = SETTINGS[row["setting"]][2]
            for kind, fmt in (("abs", ".3f"), ("rel", ".3f"), ("ratio", ".2f")):
                cells = " | ".join(f"{row[f'{kind}_{s:g}']:{fmt}}" for s in SIGMAS)
                name = "rel ÷ paper" if kind == "ratio" else kind
                out.append(f"| ldpsynth | {label} | {_guarantee(row)} | {name} | {cells} | {row['seconds']:.2f} |")
        basis = ", ".join(str(rows[0][f"basis_{s:g}"]) for s in SIGMAS)
        out += ["", f"R (basis functions) per σ: {basis}. What each setting released (round 0, σ = 2; PSI ran in "
                    "how many of its releases):", ""]
        out += [f"- **{SETTINGS[row['setting']][2]}** (PSI in {row['psi_runs']} of {row['rounds'] * len(SIGMAS)}): "
                f"{row['statement']}" for row in rows]
        out.append("")
    return "\n".join(out) + "\n"


def plot(summary: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for col, table in enumerate(TABLES):
        for row_i, kind in enumerate(("abs", "rel")):
            ax = axes[row_i, col]
            ax.plot(SIGMAS, PAPER[table][kind], "k--o", label="paper")
            for row in (x for x in summary if x["table"] == table):
                ax.plot(SIGMAS, [row[f"{kind}_{s:g}"] for s in SIGMAS], "-o", label=SETTINGS[row["setting"]][2])
            ax.set_yscale("log")
            ax.set_title(f"{'Table 3 (ε-DP)' if table == 'table3' else 'Table 4 ((ε,δ)-DP)'}: worst {kind} error")
            ax.set_xlabel("kernel width σ")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = smooth_parser(__doc__, "smooth_wdbc", rounds=20, queries=10_000, seed=2014,
                           quick_help="2 rounds, 300 queries, 1000 candidates (CI smoke run)")
    parser.add_argument("--candidates", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.queries, args.candidates = 2, 300, 1000
    z = load_wdbc()
    records, statements = run(z, args.rounds, args.queries, args.candidates, args.seed,
                              progress=sys.stderr.isatty())
    args.out.mkdir(parents=True, exist_ok=True)
    write_records(args.out / "errors.csv", records)
    summary = summarise(records, statements)
    write_records(args.out / "summary.csv", summary)
    text = markdown(summary, args.rounds, args.queries, args.candidates, args.seed)
    (args.out / "summary.md").write_text(text)
    plot(summary, args.out / "wdbc_errors.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
