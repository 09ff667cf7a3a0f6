"""E with discretisation vs the smooth-query mechanism vs Laplace on 1- and 2-dimensional continuous data, error vs n.

Data (public bounds, never read from the data):

* UCI Adult (``../shared/data/adult/adult.csv.gz``, 32,561 rows): ``age`` on [17, 90] (1-D) and
  (``age``, ``hours-per-week``) on [17, 90] x [1, 99] (2-D), subsampled to n ∈ {1000, 3000, 10000, 32561};
* WDBC (scikit-learn): ``mean radius`` (1-D) and the pairs (mean radius, mean texture),
  (mean smoothness, mean compactness) (2-D), n = 569, bounds from the data set's published table.

Mechanisms, all at ε = 1 per row / per data set:

* **E** (local ε-DP, WYZ §V-A): each row discretised to k bits per coordinate with
  :math:`2^{k(d+1)} = \\sqrt n` (:mod:`ldpsynth.shared.continuous`), released with E, answered by
  the eq. 17 estimator on the cell centres;
* **smooth** (central ε-DP, JWHZW Alg. 1, ``noise="safe"``, K = 4 by default);
* **Laplace** (central ε-DP): the normalised histogram on E's grid plus Lap(2/(nε)) per cell
  (replace-one ℓ1-sensitivity 2/n), answered on the cell centres.

Queries, in the coordinates normalised to :math:`[-1,1]^d`: Gaussian-kernel mixtures (JWHZW §4,
J = 10; ‖α‖₁ = 1 as in JWHZW Prop. 2.1) with σ ∈ {0.25, 1}, and 2-Lipschitz tent mixtures
:math:`f(x) = \\sum_j \\alpha_j\\max(0, 1 - \\|x - x_j\\|_2/0.5)`. Error: the worst absolute error over
the queries, averaged over the rounds.

Writes to ``--out`` (default ``experiments/results/smooth_lowdim``): ``errors.csv`` (every round),
``summary.md``/``summary.csv`` (means) and one PNG of error vs n per (data set, query family).

    python experiments/smooth_lowdim.py [--out DIR] [--rounds 5] [--queries 1000] [--quick]
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from smooth_arguments import smooth_parser  # experiments/smooth_arguments.py (sys.path[0])

from ldpsynth.evaluation.records import write_records
from ldpsynth.evaluation.smooth.release import UnitCube
from ldpsynth.evaluation.smooth.synth import smooth_synthetic_database
from ldpsynth.shared.continuous import cell_representatives, continuous_schema
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.queries import linear_batch
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

EPSILON = 1.0
ADULT_SIZES = (1000, 3000, 10000, 32561)
FAMILIES = {"gauss-0.25": ("gauss", 0.25), "gauss-1": ("gauss", 1.0), "tent-0.5": ("tent", 0.5)}
MECHANISMS = ("E", "smooth", "laplace")
#: Rows of query values evaluated at once (bounds the (rows, Q * J) distance matrices).
ROWS_PER_CHUNK = 256


@dataclass(frozen=True)
class Dataset:
    name: str
    rows: np.ndarray          # in the attributes' own units
    cube: UnitCube            # the public bounds


def _adult_columns() -> dict[str, np.ndarray]:
    with gzip.open(dataset_path("adult/adult.csv.gz"), "rt") as fh:
        header = [h.strip() for h in fh.readline().split(",")]
        want = [header.index("age"), header.index("hours-per-week")]
        values = np.array([[float(line.split(",")[i]) for i in want] for line in fh if line.strip()])
    return {"age": values[:, 0], "hours-per-week": values[:, 1]}


def datasets(quick: bool) -> list[tuple[Dataset, tuple[int, ...]]]:
    """The data sets with their sample sizes (Adult: a subsample per size; WDBC: all 569 rows)."""
    out: list[tuple[Dataset, tuple[int, ...]]] = []
    sizes = (1000, 32561) if quick else ADULT_SIZES
    try:
        adult = _adult_columns()
        out.append((Dataset("adult age", adult["age"][:, None], UnitCube(np.array([17.0]), np.array([90.0]))), sizes))
        out.append((Dataset("adult age x hours", np.stack([adult["age"], adult["hours-per-week"]], axis=1),
                            UnitCube(np.array([17.0, 1.0]), np.array([90.0, 99.0]))), sizes))
    except DatasetNotFound as exc:
        print(f"skipping Adult: {exc}", file=sys.stderr)
    from sklearn.datasets import load_breast_cancer
    from smooth_wdbc import wdbc_public_bounds  # the same published bounds as the Table 3/4 experiment

    bunch = load_breast_cancer()
    lo, hi = wdbc_public_bounds(bunch.DESCR, bunch.data.shape[1])
    names = list(bunch.feature_names)
    pairs = [("mean radius",), ("mean radius", "mean texture"), ("mean smoothness", "mean compactness")]
    for pair in pairs[:2] if quick else pairs:
        idx = [names.index(a) for a in pair]
        out.append((Dataset("wdbc " + " x ".join(pair), bunch.data[:, idx], UnitCube(lo[idx], hi[idx])), (569,)))
    return out


@dataclass(frozen=True)
class RadialQueries:
    """``Q`` mixtures :math:`\\sum_j \\alpha_j\\,\\rho(\\|x - c_j\\|)` of one radial profile ρ (Gaussian or tent)."""

    centres: np.ndarray   # (Q, J, d)
    weights: np.ndarray   # (Q, J), rows sum to 1
    profile: Callable[[np.ndarray], np.ndarray]

    def mean(self, points: np.ndarray, mass: np.ndarray) -> np.ndarray:
        """:math:`\\sum_p \\mathrm{mass}_p f_q(p)` for every query, in chunks of points."""
        q, j, d = self.centres.shape
        flat = self.centres.reshape(q * j, d)
        total = np.zeros(q)
        for start in range(0, len(points), ROWS_PER_CHUNK):
            p = points[start:start + ROWS_PER_CHUNK]
            dist = np.sqrt(np.maximum((p * p).sum(1)[:, None] + (flat * flat).sum(1)[None] - 2 * p @ flat.T, 0.0))
            total += mass[start:start + ROWS_PER_CHUNK] @ (self.profile(dist) * self.weights.reshape(-1)).reshape(
                len(p), q, j).sum(axis=2)
        return total

    def values(self, points: np.ndarray) -> np.ndarray:
        """:math:`f_q(p)` for every point and query, shape ``(P, Q)`` (for the weight tables of E and Laplace)."""
        q, j, d = self.centres.shape
        dist = np.linalg.norm(points[:, None, :] - self.centres.reshape(q * j, d)[None], axis=2)
        return (self.profile(dist) * self.weights.reshape(-1)).reshape(len(points), q, j).sum(axis=2)


def make_queries(family: str, count: int, d: int, rng: np.random.Generator) -> RadialQueries:
    kind, width = FAMILIES[family]
    alphas = rng.uniform(size=(count, 10))
    centres = rng.uniform(-1, 1, size=(count, 10, d))
    if kind == "gauss":
        def profile(r: np.ndarray) -> np.ndarray:
            return np.exp(-(r * r) / (2 * width * width))
    else:
        def profile(r: np.ndarray) -> np.ndarray:
            return np.maximum(0.0, 1.0 - r / width)
    return RadialQueries(centres, alphas / alphas.sum(axis=1, keepdims=True), profile)


def run_once(data: Dataset, n: int, families: dict[str, RadialQueries], K: float, rng: np.random.Generator
             ) -> list[dict]:
    """One round on one (data set, n): every mechanism answers every query family."""
    rows = data.rows[rng.choice(len(data.rows), size=n, replace=False)] if n < len(data.rows) else data.rows
    z = data.cube.to_unit(rows)
    d = z.shape[1]
    truth = {f: qs.mean(z, np.full(n, 1.0 / n)) for f, qs in families.items()}
    names = [f"x{i}" for i in range(d)]
    schema = continuous_schema(names, data.cube.lo, data.cube.hi, EPSILON, n=n)
    codes = schema.encode_private({name: rows[:, i] for i, name in enumerate(names)})
    cells = data.cube.to_unit(cell_representatives(schema))
    mech = MechanismE(EPSILON, schema.private_domain_size)
    stats = SufficientStatistics.from_schema(schema, None, mech.perturb(codes, rng))
    histogram = np.bincount(codes, minlength=schema.private_domain_size) / n
    noisy_histogram = histogram + rng.laplace(0.0, 2.0 / (n * EPSILON), size=histogram.size)
    release = smooth_synthetic_database(z, EPSILON, K, rng)
    out = []
    for family, qs in families.items():
        table = qs.values(cells)                                             # (|D|, Q)
        answers = {"E": estimate(linear_batch(schema, np.ascontiguousarray(table.T), normalization="mean"),
                                 stats, mech).estimate,
                   "laplace": noisy_histogram @ table,
                   "smooth": qs.mean(release.points, release.counts / release.m)}
        for mechanism in MECHANISMS:
            out.append({"dataset": data.name, "d": d, "n": n, "family": family, "mechanism": mechanism,
                        "worst_abs": float(np.abs(answers[mechanism] - truth[family]).max()),
                        "bits": schema.attributes[0].bits, "smooth_t": release.details["t"],
                        "smooth_N": release.details["N"]})
    return out


def summarise(records: list[dict]) -> list[dict]:
    keys = sorted({(r["dataset"], r["n"], r["family"]) for r in records}, key=lambda k: (k[0], k[2], k[1]))
    rows = []
    for dataset, n, family in keys:
        sel = [r for r in records if (r["dataset"], r["n"], r["family"]) == (dataset, n, family)]
        row = {"dataset": dataset, "n": n, "family": family, "bits": sel[0]["bits"],
               "smooth_t": sel[0]["smooth_t"], "smooth_N": sel[0]["smooth_N"]}
        for m in MECHANISMS:
            row[m] = float(np.mean([r["worst_abs"] for r in sel if r["mechanism"] == m]))
        rows.append(row)
    return rows


def markdown(summary: list[dict], rounds: int, queries: int, K: float) -> str:
    out = [f"# E with discretisation vs smooth (Algorithm 1, K = {K:g}) vs Laplace histogram, ε = 1",
           "", f"Worst absolute error over {queries} queries per family, mean of {rounds} rounds "
           "(E is local DP; smooth and Laplace are central DP).", "",
           "| data set | n | queries | E bits/coord | smooth t, N | E | smooth | Laplace |",
           "|---|---|---|---|---|---|---|---|"]
    for r in summary:
        out.append(f"| {r['dataset']} | {r['n']} | {r['family']} | {r['bits']} | {r['smooth_t']}, {r['smooth_N']} | "
                   f"{r['E']:.4f} | {r['smooth']:.4f} | {r['laplace']:.4f} |")
    return "\n".join(out) + "\n"


def plot(summary: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for dataset in sorted({r["dataset"] for r in summary}):
        sel = [r for r in summary if r["dataset"] == dataset]
        if len({r["n"] for r in sel}) < 2:
            continue
        fig, axes = plt.subplots(1, len(FAMILIES), figsize=(4 * len(FAMILIES), 3.4), sharey=True)
        for ax, family in zip(axes, FAMILIES):
            fam = sorted((r for r in sel if r["family"] == family), key=lambda r: r["n"])
            for m in MECHANISMS:
                ax.loglog([r["n"] for r in fam], [r[m] for r in fam], "-o", label=m)
            ax.set_title(f"{dataset}: {family}", fontsize=9)
            ax.set_xlabel("n")
        axes[0].set_ylabel("worst absolute error")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"{dataset.replace(' ', '_')}.png", dpi=90)
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = smooth_parser(__doc__, "smooth_lowdim", rounds=5, queries=1000, seed=2026,
                           quick_help="1 round, 100 queries, fewer sizes (CI smoke run)")
    parser.add_argument("--K", type=float, default=4.0, help="smoothness order assumed by the smooth mechanism")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.queries = 1, 100
    rng = np.random.default_rng(args.seed)
    records: list[dict] = []
    for data, sizes in datasets(args.quick):
        d = data.rows.shape[1]
        for n in sizes:
            for r in range(args.rounds):
                families = {f: make_queries(f, args.queries, d, rng) for f in FAMILIES}
                records += [rec | {"round": r} for rec in run_once(data, n, families, args.K, rng)]
            print(f"{data.name}, n = {n}: done", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_records(args.out / "errors.csv", records)
    summary = summarise(records)
    write_records(args.out / "summary.csv", summary)
    text = markdown(summary, args.rounds, args.queries, args.K)
    (args.out / "summary.md").write_text(text)
    plot(summary, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
