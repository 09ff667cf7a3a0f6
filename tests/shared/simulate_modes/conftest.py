"""The session's Ray cluster for the hosted simulations (the aggregator tests' fixture)."""

from ...aggregator.conftest import ray_address  # noqa: F401  (fixture)
