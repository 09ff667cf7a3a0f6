"""Mechanism E on continuous data (WYZ §V-A): bits, cell representatives, Lipschitz queries end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpsynth.shared.continuous import (
    bits_for_dimension,
    cell_representatives,
    continuous_schema,
    discretisation_bound,
    function_weights,
)
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.queries import linear_batch
from ldpsynth.shared.schema import Schema, bits_for_rows


def test_bits_balance_the_two_error_terms() -> None:
    for n in (100, 4096, 65536, 10**6):
        assert bits_for_dimension(n, 1) == bits_for_rows(n)
    assert bits_for_dimension(2**24, 2) == 4          # 2^(4*3) = 2^12 = sqrt(2^24)
    with pytest.raises(ValidationError, match="n"):
        bits_for_dimension(0, 1)


def test_representatives_follow_the_schema_encoding() -> None:
    schema = continuous_schema(["age", "hours"], [17, 1], [90, 99], 1.0, bits=3)
    rows = np.random.default_rng(0).uniform([17, 1], [90, 99], size=(500, 2))
    codes = schema.encode_private({"age": rows[:, 0], "hours": rows[:, 1]})
    centres = cell_representatives(schema)[codes]
    widths = np.array([73 / 8, 98 / 8])
    assert (np.abs(rows - centres) <= widths / 2 + 1e-9).all()
    lower = cell_representatives(schema, "lower")[codes]
    assert ((rows - lower) >= -1e-9).all() and ((rows - lower) <= widths + 1e-9).all()
    assert discretisation_bound(schema, 2.0) == pytest.approx(2.0 * 0.5 * math.hypot(*widths))


def test_schema_json_round_trip_keeps_the_continuous_attributes() -> None:
    schema = continuous_schema(["x"], [0.0], [1.0], 2.0, n=65536)
    assert schema.private_domain_size == 16
    assert Schema.from_json(schema.to_json()) == schema


def test_e_release_answers_lipschitz_and_kernel_queries_within_error_bars() -> None:
    """|estimate - q(x)| <= discretisation bound + 5 standard errors for every query (alpha ~ 6e-7 per query)."""
    rng = np.random.default_rng(1)
    n = 200_000
    rows = np.clip(rng.normal([40, 45], [12, 10], size=(n, 2)), [17, 1], [90, 99])
    schema = continuous_schema(["age", "hours"], [17, 1], [90, 99], 2.0, n=n)
    codes = schema.encode_private({"age": rows[:, 0], "hours": rows[:, 1]})
    mech = MechanismE(schema.epsilon, schema.private_domain_size)
    stats = SufficientStatistics.from_schema(schema, None, mech.perturb(codes, rng))
    centres = rng.uniform([17, 1], [90, 99], size=(20, 2))

    def tents(x: np.ndarray) -> np.ndarray:     # 1/30-Lipschitz in the Euclidean norm, values in [0, 1]
        return np.maximum(0.0, 1.0 - np.linalg.norm(x[:, None, :] - centres[None], axis=2) / 30.0)

    answers = estimate(linear_batch(schema, function_weights(schema, tents), normalization="mean"), stats, mech)
    truth = tents(rows).mean(axis=0)
    bound = discretisation_bound(schema, 1 / 30)
    assert (np.abs(answers.estimate - truth) <= bound + 5 * answers.std_error).all()
    assert answers.std_error.max() < 0.05


def test_invalid_inputs() -> None:
    with pytest.raises(ValidationError, match="bits"):
        continuous_schema(["x"], [0], [1], 1.0)
    with pytest.raises(ValidationError, match="bounds"):
        continuous_schema(["x", "y"], [0], [1], 1.0, bits=2)
    schema = continuous_schema(["x"], [0], [1], 1.0, bits=2)
    with pytest.raises(ValidationError, match="representative"):
        cell_representatives(schema, "middle")
    with pytest.raises(ValidationError, match="function"):
        function_weights(schema, lambda p: np.full((3,), np.nan))
