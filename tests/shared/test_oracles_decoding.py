"""Fast decoding equals brute force exactly; statistics merge as concatenation; malformed input is refused."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms import OLH, OUE, HadamardResponse, OracleStatistics, SubsetSelection
from ldpsynth.shared.mechanisms import olh as olh_module

from .oracle_reference import support_counts

CLASSES = [OUE, OLH, HadamardResponse, SubsetSelection]


def arbitrary_reports(oracle, n: int, rng: np.random.Generator) -> np.ndarray:
    """Valid reports drawn without regard to any input (every seed, bucket, row and subset possible)."""
    k = oracle.domain_size
    if isinstance(oracle, OUE):
        return np.packbits(rng.random((n, k)) < 0.5, axis=1, bitorder="little")
    if isinstance(oracle, SubsetSelection):
        ranks = np.argsort(rng.random((n, k)), axis=1)
        return np.packbits(ranks < oracle.subset_size, axis=1, bitorder="little")
    if isinstance(oracle, HadamardResponse):
        return 2 * rng.integers(1, oracle.size, n) + rng.integers(0, 2, n)
    width = 2 * oracle.field_bits + oracle.hash_bits
    return rng.integers(0, 1 << width, n, dtype=np.uint64)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k, eps", [(2, 1.0), (3, 0.5), (7, 2.0), (16, 1.0), (33, 3.0), (100, 4.5)])
def test_support_counts_equal_brute_force(cls, k, eps):
    """S(v) from the tally (bit counts, Walsh-Hadamard transforms) equals the sum of each report's support
    evaluated from the definition (oracle_reference), for sampled reports (seed k) and arbitrary valid ones."""
    oracle, rng = cls(eps, k), np.random.default_rng(k)
    for reports in (oracle.perturb(rng.integers(0, k, 300), rng), arbitrary_reports(oracle, 300, rng)):
        stats = oracle.statistics(reports)
        assert stats.n == 300
        np.testing.assert_array_equal(stats.support_counts(), support_counts(oracle, reports))


@pytest.mark.parametrize("eps", [0.5, 4.5])
def test_olh_tally_in_many_blocks_equals_brute_force(monkeypatch, eps):
    """OLH's tally is counted in blocks of reports (olh._BLOCK_CELLS): with blocks of a few reports (one of
    them partial), the support counts and the per-group tallies are those of brute force and of each group."""
    oracle, rng = OLH(eps, 100), np.random.default_rng(5)
    reports = np.concatenate([oracle.perturb(rng.integers(0, 100, 150), rng), arbitrary_reports(oracle, 151, rng)])
    groups = rng.integers(0, 3, len(reports))
    monkeypatch.setattr(olh_module, "_BLOCK_CELLS", 0)     # blocks of max(1, 2 * 2^t * count / g) reports
    np.testing.assert_array_equal(oracle.statistics(reports).support_counts(), support_counts(oracle, reports))
    tallies = oracle.group_tallies(reports, groups, 3)
    for g in range(3):
        np.testing.assert_array_equal(tallies[g], oracle.statistics(reports[groups == g]).tally)


@pytest.mark.parametrize("cls", CLASSES)
def test_merge_is_concatenation(cls):
    """Statistics of parts merged (in any order, with the empty ones) are those of the concatenated reports."""
    oracle, rng = cls(1.5, 50), np.random.default_rng(11)
    parts = [oracle.perturb(rng.integers(0, 50, n), rng) for n in (0, 1, 40, 333)]
    whole = oracle.statistics(np.concatenate(parts))
    merged = OracleStatistics.empty(oracle)
    for part in reversed(parts):
        merged = merged.merge(oracle.statistics(part))
    assert merged.n == whole.n == 374
    np.testing.assert_array_equal(merged.tally, whole.tally)
    np.testing.assert_array_equal(merged.support_counts(), whole.support_counts())
    np.testing.assert_array_equal(merged.count_estimates(), whole.count_estimates())


def test_merge_refuses_statistics_of_another_oracle():
    a = OUE(1.0, 8).statistics(np.zeros((1, 1), np.uint8))
    for other in (OUE(2.0, 8), OUE(1.0, 9), SubsetSelection(1.0, 8), HadamardResponse(1.0, 8)):
        with pytest.raises(ValidationError, match="other"):
            a.merge(OracleStatistics.empty(other))
    assert a.merge(OracleStatistics.empty(OUE(1.0, 8))).n == 1


@pytest.mark.parametrize("cls", CLASSES)
def test_estimates_are_the_pure_protocol_estimates(cls):
    """count_estimates = (S - n q*)/(p* - q*); linear_estimates = W @ that (WBLJ17 §3)."""
    oracle, rng = cls(1.0, 20), np.random.default_rng(2)
    stats = oracle.statistics(oracle.perturb(rng.integers(0, 20, 1000), rng))
    p, q = float(oracle.protocol.p), float(oracle.protocol.q)
    expected = (stats.support_counts() - 1000 * q) / (p - q)
    np.testing.assert_allclose(stats.count_estimates(), expected, rtol=1e-12)
    w = rng.normal(size=(4, 20))
    np.testing.assert_allclose(stats.linear_estimates(w), w @ expected, rtol=1e-10)


def test_malformed_reports_are_refused_naming_the_row():
    cases = [
        (OUE(1.0, 10), np.array([[0, 0], [0, 4]], np.uint8), "bit beyond"),        # bit 10 of a 10-value domain
        (OUE(1.0, 10), np.zeros((2, 3), np.uint8), "shape"),
        (OUE(1.0, 10), np.array([[0, 256]]), "out of range"),
        (SubsetSelection(1.0, 10), np.array([[3, 0], [1, 0]], np.uint8), "not such a subset"),
        (HadamardResponse(1.0, 10), np.array([2, 1]), "out of range"),
        (HadamardResponse(1.0, 10), np.array([2, 32]), "out of range"),
        (OLH(1.0, 10), np.array([1 << 62], np.uint64), "out of range"),
        (OLH(1.0, 10), np.array([-1]), "out of range"),
        (OLH(1.0, 10), np.array([1.0]), "integers"),
    ]
    for oracle, reports, problem in cases:
        with pytest.raises(ValidationError, match=problem) as info:
            oracle.statistics(reports)
        assert info.value.field == "reports"
    assert SubsetSelection(1.0, 10).subset_size == 2


@pytest.mark.parametrize("oracle", [OLH(2.0, 16), HadamardResponse(1.0, 16)], ids=["OLH", "HR"])
def test_a_tally_that_is_no_sum_of_reports_is_refused(oracle):
    stats = oracle.statistics(oracle.perturb(np.arange(16), np.random.default_rng(0)))
    broken = OracleStatistics(oracle, stats.n, stats.tally + np.eye(oracle.tally_size, dtype=np.int64)[3])
    with pytest.raises(ValidationError, match="tally"):
        broken.support_counts()
