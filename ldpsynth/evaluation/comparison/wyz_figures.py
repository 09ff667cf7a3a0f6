"""Built-in experiments of the comparison harness: WYZ Figs. 2-4 on MovieLens-100k (the protocol of WYZ §VI-A).

Data: MovieLens-100k (``../shared/data/movielens-100k``, read in place): rows are ratings, public
``movie`` (the label), private ``rating`` 1..5 (k = 5); the 128 most-rated movies hold 35,631
ratings. WYZ used Netflix (162,567 ratings of 128 movies); MovieLens is the data we have.

* **Fig. 2** (:func:`fig2`): heterogeneity h ∈ {1, 2, 4, …, 128}. One run draws a random
  assignment of the 128 movies to h blocks of 128/h movies and 200 statistical queries; query j
  has one row function per block, ``X_1..X_5 ~ U[0,1]`` divided by ``max X − min X`` (so every row
  has c_i = 1), normalised by eq. 10. Worst-case absolute error over the 200 queries, averaged
  over the runs; ε = 1.
* **Fig. 3** (:func:`fig3`): linear query sets of size 64 … 1,048,576 (powers of 4 times 64), the
  same row-function recipe with one function for every row; the worst case over the queries and
  over 50 single-movie databases (the 50 most-rated movies, 276–583 ratings each; WYZ's had
  1,000–2,000, §VI-A-2), averaged over the runs.
* **Fig. 4** (:func:`fig4`): E only, the worst-case *squared* error of 200 linear queries against
  the database size n ∈ {15,000 … 230,000} with the bound of eq. 20, and the log-log slope (theory:
  −1). MovieLens has 100,000 ratings: sizes up to 100,000 are uniform subsamples without
  replacement of the real ratings, larger ones a bootstrap (draws with replacement), stated in
  the output.

Mechanism names for :func:`mechanisms` (E is always added): ``laplace`` (Laplace on the workload
answers), ``laplace-histogram``, ``mwem``, ``mwem-subdb``, ``dpfw`` (paper mode), ``dpfw-practical``, ``dpam``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ldpsynth.evaluation.comparison.harness import Mechanism, compare, summarize, write_report
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.shared.errors import ValidationError
from ldpsynth.simulation.datasets import movielens_100k

MOVIES = 128
K = 5
HETEROGENEITY = (1, 2, 4, 8, 16, 32, 64, 128)
QUERY_SET_SIZES = tuple(64 * 4**i for i in range(8))       # 64 ... 1,048,576
DATABASE_SIZES = (15_000, 30_000, 60_000, 100_000, 150_000, 230_000)
MECHANISM_NAMES = ("laplace", "laplace-histogram", "mwem", "mwem-subdb", "dpfw", "dpfw-practical", "dpam",
                   "e-shuffled", "e-shuffled-private-label")


def ratings(top_movies: int | None = MOVIES) -> tuple[np.ndarray, np.ndarray]:
    """0-based movie labels (by popularity rank) and 0-based ratings of MovieLens-100k's most-rated movies."""
    population = movielens_100k(top_movies=top_movies)
    return population.columns["movie"] - 1, population.columns["rating"] - 1


def row_functions(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """WYZ §VI-A-1: ``X_v ~ U[0,1]`` over the last axis divided by ``max X − min X`` (range exactly 1)."""
    x = rng.random(shape)
    return x / (x.max(axis=-1, keepdims=True) - x.min(axis=-1, keepdims=True))


def heterogeneous_workload(h: int, queries: int = 200,
                           groups: int = MOVIES) -> Callable[[np.random.Generator], Workload]:
    """Fig. 2's workload generator at heterogeneity ``h`` (``groups`` must be a multiple of ``h``)."""
    if h < 1 or groups % h:
        raise ValidationError("h", f"a divisor of the number of movies ({groups})", f"got {h}")

    def draw(rng: np.random.Generator) -> Workload:
        block = rng.permutation(groups) % h                     # movie -> row-function block, 128/h movies each
        functions = row_functions(rng, (queries, h, K))
        return Workload(functions[:, block, :], "range")

    return draw


def linear_workload(size: int) -> Callable[[np.random.Generator], Workload]:
    """Fig. 3's linear query sets: one row function per query for every row."""
    return lambda rng: Workload(row_functions(rng, (size, K)), "range")


def mechanisms(names: Sequence[str], epsilon: float, *, rounds: int = 10, delta: float = 1e-9
               ) -> dict[str, Mechanism]:
    """The named central mechanisms at ``epsilon`` (imported lazily: DPFW/DPAM are optional modules); ``delta``
    is the δ of E behind a shuffler (``e-shuffled``, ``e-shuffled-private-label``: E at the local ε0 a
    shuffler amplifies to central (``epsilon``, ``delta``), :mod:`~ldpsynth.evaluation.comparison.shuffled_e`)."""
    out: dict[str, Mechanism] = {}
    for name in names:
        if name == "laplace":
            from ldpsynth.evaluation.comparison.laplace import LaplaceAnswers
            out[name] = LaplaceAnswers(epsilon)
        elif name == "laplace-histogram":
            from ldpsynth.evaluation.comparison.laplace import LaplaceHistogram
            out[name] = LaplaceHistogram(epsilon)
        elif name == "mwem":
            from ldpsynth.evaluation.comparison.mwem import MWEM
            out[name] = MWEM(epsilon, rounds=rounds)
        elif name == "mwem-subdb":
            from ldpsynth.evaluation.comparison.mwem import SubDatabaseMWEM
            out[name] = SubDatabaseMWEM(epsilon, rounds=rounds)
        elif name == "dpfw":
            from ldpsynth.evaluation.comparison.dpfw import DPFW
            out[name] = DPFW(epsilon)                          # paper mode: constant step, random iterate
        elif name == "dpfw-practical":
            from ldpsynth.evaluation.comparison.dpfw import DPFW
            out[name] = DPFW(epsilon, mode="practical")        # 2/(t+2) steps, last iterate
        elif name == "dpam":
            from ldpsynth.evaluation.comparison.dpam import DPAM
            out[name] = DPAM(epsilon)
        elif name in ("e-shuffled", "e-shuffled-private-label"):
            from ldpsynth.evaluation.comparison.shuffled_e import ShuffledE
            out[name] = ShuffledE(epsilon, delta, private_label=name.endswith("private-label"))
        else:
            raise ValidationError("mechanisms", f"names from {list(MECHANISM_NAMES)}", f"got {name!r}")
    return out


def single_movie_databases(labels: np.ndarray, values: np.ndarray, count: int = 50) -> list[Histogram]:
    """Histograms (G = 1) of the ``count`` most-rated movies' ratings (labels are popularity ranks)."""
    return [Histogram.from_rows(None, values[labels == movie], 1, K) for movie in range(count)]


def database_of_size(values: np.ndarray, n: int, rng: np.random.Generator) -> tuple[Histogram, str]:
    """``n`` ratings: a uniform subsample of the real ones (n <= their number) or a bootstrap sample."""
    if n <= len(values):
        return Histogram.from_rows(None, rng.choice(values, n, replace=False), 1, K), "subsample"
    return Histogram.from_rows(None, rng.choice(values, n, replace=True), 1, K), "bootstrap"


def log_log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def eq20_squared_bound(n: int, epsilon: float) -> float:
    """Eq. 20 (squared) for the Fig. 4 queries (b − a = c = 1 on every row, "range"), from the estimators' code."""
    from ldpsynth.evaluation.comparison.local_e import joint_schema
    from ldpsynth.shared.card import MechanismCard
    from ldpsynth.shared.estimators.formulas import rms_bound

    mechanism = MechanismCard.for_schema(joint_schema(1, K, epsilon)).mechanism_e
    return float(rms_bound(n, 0.0, 1.0, 1.0, "range", n, mechanism) ** 2)


def fig2(out: Path, *, runs: int, epsilon: float, names: Sequence[str], rng: np.random.Generator,
         heterogeneity: Sequence[int] = HETEROGENEITY, queries: int = 200, rounds: int = 10,
         delta: float = 1e-9) -> list[Path]:
    """WYZ Fig. 2 (see the module docstring); ``delta``: that of E behind a shuffler, when named."""
    labels, values = ratings()
    data = Histogram.from_rows(labels, values, MOVIES, K)
    trials = []
    for h in heterogeneity:
        trials += compare(data, heterogeneous_workload(h, queries),
                          mechanisms(names, epsilon, rounds=rounds, delta=delta),
                          runs=runs, rng=rng, setting=f"h={h}", x=h, epsilon=epsilon)
    notes = (f"MovieLens-100k, the {MOVIES} most-rated movies ({data.n:,} ratings; rating 1..5 private, movie "
             f"public); {queries} random statistical queries per run (WYZ §VI-A-1 row functions, normalised by "
             f"WYZ eq. 10); ε = "
             f"{epsilon:g}; {runs} runs; MWEM T = {rounds}. Worst case over the queries, averaged over runs.")
    shuffled = [n for n in names if n.startswith("e-shuffled")]
    if shuffled:
        notes += (f" Not the same promise: E is {epsilon:g}-LDP per row (local, against everyone); the central "
                  f"mechanisms are central ε = {epsilon:g} (pure ε-DP or (ε, δ)-DP, see Guarantees); "
                  f"{', '.join(shuffled)} are E behind a shuffler at the local ε0 whose central guarantee is "
                  f"({epsilon:g}, {delta:g})-DP, the central mechanisms' ε (ε0 in Guarantees).")
    return write_report(out, "fig2", trials, title="WYZ Fig. 2: worst-case |error| vs heterogeneity h",
                        x_label="heterogeneity h (distinct row functions per query)", log_x=True, notes=notes)


def fig3(out: Path, *, runs: int, epsilon: float, names: Sequence[str], rng: np.random.Generator,
         sizes: Sequence[int] = QUERY_SET_SIZES, databases: int = 50, rounds: int = 10) -> list[Path]:
    """WYZ Fig. 3: the worst case over the queries *and* over ``databases`` single-movie databases."""
    labels, values = ratings()
    singles = single_movie_databases(labels, values, databases)
    trials = []
    for size in sizes:
        per_db = []
        for index, db in enumerate(singles):
            per_db.append(compare(db, linear_workload(size), mechanisms(names, epsilon, rounds=rounds), runs=runs,
                                  rng=rng, setting=f"|Q|={size}", x=size, epsilon=epsilon,
                                  progress=lambda line: None))
            print(f"[compare] |Q| = {size:,}: database {index + 1}/{len(singles)} ({db.n} ratings) done",
                  file=sys.stderr, flush=True)
        for run_trials in zip(*per_db):               # the same (run, mechanism) slot across the databases
            worst = max(run_trials, key=lambda t: t.worst_abs)
            trials.append(replace(worst, mean_abs=float(np.mean([t.mean_abs for t in run_trials])),
                                  seconds=float(np.sum([t.seconds for t in run_trials]))))
        print(f"[compare] |Q| = {size:,}: done ({databases} databases x {runs} runs)", file=sys.stderr, flush=True)
    sizes_n = [db.n for db in singles]
    notes = (f"MovieLens-100k, the {databases} most-rated movies as single-movie databases ({min(sizes_n)}–"
             f"{max(sizes_n)} ratings each); random linear queries (WYZ §VI-A row functions); worst case over the "
             f"queries and the databases, averaged over {runs} runs; ε = {epsilon:g}; MWEM T = {rounds}. "
             "Seconds: all databases of one run.")
    return write_report(out, "fig3", trials, title="WYZ Fig. 3: worst-case |error| vs query set size",
                        x_label="query set size |Q|", log_x=True, notes=notes)


def fig4(out: Path, *, runs: int, epsilon: float, rng: np.random.Generator,
         sizes: Sequence[int] = DATABASE_SIZES, queries: int = 200) -> tuple[list[Path], float]:
    """WYZ Fig. 4 (E only): worst-case squared error vs n, the WYZ eq. 20 bound, the log-log slope."""
    _, values = ratings(top_movies=None)
    trials, kinds = [], {}
    for n in sizes:
        data, kinds[n] = database_of_size(values, n, rng)
        trials += compare(data, linear_workload(queries), {}, runs=runs, rng=rng, setting=f"n={n}", x=n,
                          epsilon=epsilon)
    rows = summarize(trials)
    slope = log_log_slope([r["x"] for r in rows], [r["worst_sq"] for r in rows])
    bound = [(n, eq20_squared_bound(n, epsilon)) for n in sizes]
    notes = (f"MovieLens-100k ratings ({len(values):,}); n <= {len(values):,}: uniform subsamples, larger n: "
             f"bootstrap samples ({', '.join(f'{n:,}: {kinds[n]}' for n in sizes)}); {queries} random linear "
             f"queries; ε = {epsilon:g}; {runs} runs. Log-log slope of the worst-case squared error vs n: "
             f"{slope:.3f} (eq. 20: -1). Eq. 20 bound: " + ", ".join(f"{n:,}: {b:.3g}" for n, b in bound) + ".")
    paths = write_report(out, "fig4", trials, title="WYZ Fig. 4: worst-case squared error of E vs n",
                         x_label="database size n", y_field="worst_sq", log_x=True, notes=notes, bound=bound)
    return paths, slope
