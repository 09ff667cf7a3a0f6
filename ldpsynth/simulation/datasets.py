"""Populations for simulated federated deployments: who holds which rows.

A :class:`Population` is a collection schema plus raw columns and, for every row, the device
that holds it. Three are built in:

* ``synthetic`` (the default, needs no files): a ratings population generated from a fixed
  seed: devices (users) rate movies 1..5 with a per-movie rating distribution.
* ``movielens``: MovieLens-100k (``movielens-100k/u.data.gz``): rows are ratings, ``movie`` is
  public, ``rating`` 1..5 is private, the ``user`` is the device (so a user's ε spent is the
  sum over their ratings, basic composition).
* ``facebook``: the SNAP ego-Facebook graph (``facebook/facebook_combined.txt.gz``) as in seed
  000 §VI-B: one row per ordered vertex pair (i, j) of the first ``vertices`` vertices (public
  ``i`` and ``j``), private ``edge`` bit; vertex i's device holds the pairs (i, ·). Each pair
  is released with ε (edge-level DP, the paper's neighbour notion); a device with |V| pairs
  spends |V|·ε in total.

The real data sets are read from the folder named by ``$LDPSYNTH_DATA`` or from
``../shared/data`` beside the project; they are never copied into the repository. Where they
are absent, :class:`DatasetNotFound` says so and where to put them.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.schema import BinaryAttribute, IntegerAttribute, Schema
from ldpsynth.shared.validation import check_int

#: Project root when running from a checkout (ldpsynth/simulation/ -> root).
_PROJECT_ROOT = Path(__file__).resolve().parents[2]

MOVIELENS_FILE = "movielens-100k/u.data.gz"
FACEBOOK_FILE = "facebook/facebook_combined.txt.gz"
FACEBOOK_VERTICES = 4039


class DatasetNotFound(LdpsynthError):
    """A real data set is not on this machine."""


@dataclass(frozen=True)
class Population:
    """Rows of a collection and the device that holds each row.

    Attributes
    ----------
    schema:
        The collection schema (its ε is the per-row ε).
    columns:
        Raw values, one array per attribute, all of length n.
    devices:
        Device index (0-based) of every row.
    description:
        One line for summaries.
    """

    schema: Schema
    columns: dict[str, np.ndarray]
    devices: np.ndarray
    description: str

    def __len__(self) -> int:
        return int(self.devices.shape[0])

    @property
    def device_count(self) -> int:
        return int(self.devices.max()) + 1 if len(self) else 0

    def rows_by_device(self) -> list[np.ndarray]:
        """Row indices of every device, in device order."""
        order = np.argsort(self.devices, kind="stable")
        bounds = np.searchsorted(self.devices[order], np.arange(self.device_count + 1))
        return [order[bounds[d]:bounds[d + 1]] for d in range(self.device_count)]

    def true_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(public_keys, private_codes)`` of the true rows (for evaluation only)."""
        return self.schema.encode_public(self.columns), self.schema.encode_private(self.columns)


def data_dir() -> Path:
    """Folder of the shared real data sets: ``$LDPSYNTH_DATA`` or ``../shared/data`` beside the project."""
    env = os.environ.get("LDPSYNTH_DATA")
    if env:
        return Path(env)
    for candidate in (_PROJECT_ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return _PROJECT_ROOT.parent / "shared" / "data"


def dataset_path(relative: str) -> Path:
    """Path of a real data file, or :class:`DatasetNotFound` naming where it was looked for."""
    path = data_dir() / relative
    if not path.is_file():
        raise DatasetNotFound(
            f"data set file not found: {path} (set LDPSYNTH_DATA to the folder holding {relative}; "
            "see ../shared/data/README.md for the sources)")
    return path


def ratings_schema(epsilon: float, movies: int, name: str = "ratings") -> Schema:
    """Public ``movie`` in 1..movies, private ``rating`` in 1..5."""
    return Schema(name, epsilon, (IntegerAttribute("movie", True, 1, movies), IntegerAttribute("rating", False, 1, 5)))


def synthetic_ratings(devices: int = 2000, movies: int = 50, ratings_per_device: int = 10, epsilon: float = 1.0,
                      seed: int = 7) -> Population:
    """A seeded synthetic ratings population (no files needed).

    Movie popularity is Zipf-like; each movie has its own rating distribution (a Dirichlet draw
    tilted towards 3-4 stars), and every device rates ``ratings_per_device`` distinct movies.
    """
    check_int(devices, "devices", 1)
    check_int(movies, "movies", 2)
    check_int(ratings_per_device, "ratings_per_device", 1, movies)
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, movies + 1) ** 0.8
    popularity /= popularity.sum()
    rating_pmf = rng.dirichlet([1.0, 2.0, 4.0, 5.0, 3.0], size=movies)
    movie_cols = np.concatenate([rng.choice(movies, size=ratings_per_device, replace=False, p=popularity)
                                 for _ in range(devices)])
    cdf = np.cumsum(rating_pmf[movie_cols], axis=1)
    ratings = 1 + (rng.random(movie_cols.size)[:, None] > cdf).sum(axis=1)
    return Population(
        schema=ratings_schema(epsilon, movies),
        columns={"movie": movie_cols + 1, "rating": np.minimum(ratings, 5)},
        devices=np.repeat(np.arange(devices), ratings_per_device),
        description=f"synthetic ratings: {devices} devices x {ratings_per_device} ratings of {movies} movies "
                    f"(seed {seed})",
    )


def movielens_100k(epsilon: float = 1.0, *, top_movies: int | None = None) -> Population:
    """MovieLens-100k ratings; ``top_movies`` keeps only the most-rated movies (renumbered 1..k by rank)."""
    raw = np.loadtxt(gzip.open(dataset_path(MOVIELENS_FILE), "rt"), dtype=np.int64)
    users, movies, ratings = raw[:, 0] - 1, raw[:, 1], raw[:, 2]
    movie_count = 1682
    if top_movies is not None:
        check_int(top_movies, "top_movies", 2, movie_count)
        counts = np.bincount(movies, minlength=movie_count + 1)
        ranked = np.argsort(-counts[1:], kind="stable")[:top_movies] + 1
        rank_of = np.zeros(movie_count + 1, np.int64)
        rank_of[ranked] = np.arange(1, top_movies + 1)
        keep = rank_of[movies] > 0
        users, movies, ratings = users[keep], rank_of[movies[keep]], ratings[keep]
        movie_count = top_movies
    _, device = np.unique(users, return_inverse=True)
    label = f"top {top_movies} movies" if top_movies else "all movies"
    return Population(ratings_schema(epsilon, movie_count, "movielens"), {"movie": movies, "rating": ratings},
                      device.astype(np.int64),
                      f"MovieLens-100k ({label}): {len(ratings)} ratings by {device.max() + 1} users")


def facebook_edges() -> np.ndarray:
    """The 88,234 undirected edges of ego-Facebook as an ``(m, 2)`` array of 0-based vertex ids."""
    return np.loadtxt(gzip.open(dataset_path(FACEBOOK_FILE), "rt"), dtype=np.int64).reshape(-1, 2)


def graph_schema(epsilon: float, vertices: int, name: str = "facebook") -> Schema:
    return Schema(name, epsilon, (IntegerAttribute("i", True, 0, vertices - 1),
                                  IntegerAttribute("j", True, 0, vertices - 1), BinaryAttribute("edge", False)))


def adjacency(edges: np.ndarray, vertices: int) -> np.ndarray:
    """Symmetric 0/1 ``uint8`` adjacency matrix of the subgraph induced by the first ``vertices`` vertices."""
    inside = (edges[:, 0] < vertices) & (edges[:, 1] < vertices)
    a = np.zeros((vertices, vertices), np.uint8)
    e = edges[inside]
    a[e[:, 0], e[:, 1]] = 1
    a[e[:, 1], e[:, 0]] = 1
    return a


def facebook_graph(epsilon: float = 1.0, vertices: int = FACEBOOK_VERTICES) -> Population:
    """Vertex-pair rows of the induced subgraph on the first ``vertices`` vertices (WYZ §VI-B)."""
    check_int(vertices, "vertices", 2, FACEBOOK_VERTICES)
    a = adjacency(facebook_edges(), vertices)
    i, j = np.divmod(np.arange(vertices * vertices, dtype=np.int64), vertices)
    return Population(graph_schema(epsilon, vertices), {"i": i, "j": j, "edge": a.reshape(-1).astype(np.int64)},
                      i.copy(),
                      f"ego-Facebook induced on the first {vertices} vertices: {vertices * vertices} vertex pairs")
