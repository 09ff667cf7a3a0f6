"""The device path of a numeric collection: values checked and mapped to [-1, 1], perturbed by the card's exact
sampler from the OS CSPRNG, memoized and charged in the ledger as E's rows are; reports in the output set, with
the sampler's exact law (chi-square). Also the answers from counts, against the reports' estimator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.numeric import HybridMechanism, SquareWave
from ldpsynth.shared.numeric.collection import numeric_means, numeric_quantiles, release_means
from ldpsynth.shared.numeric.estimators import estimate_mean
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema

#: α of every chi-square test here.
ALPHA = 1e-3


def card(mechanism: str = "HM", epsilon: float = 1.0) -> MechanismCard:
    return MechanismCard.for_schema(Schema.from_json({"name": "c", "epsilon": epsilon, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism},
        {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]}))


def test_values_are_checked_naming_the_field_and_range_never_the_value() -> None:
    schema = card().schema
    for bad in (99.5, -0.001, float("nan"), float("inf"), "abc"):
        with pytest.raises(ValidationError) as info:
            encode_columns(schema, {"hours": [12.5, bad], "region": ["north", "south"]})
        assert info.value.field == "hours" and info.value.position == 1
        assert "[0.0, 99.0]" in str(info.value) and str(bad) not in str(info.value).replace("99.0", "")


def test_codes_are_the_values_on_the_unit_scale() -> None:
    c = card()
    codes = encode_columns(c.schema, {"hours": [0, 49.5, 99, 24.75], "region": ["north"] * 4}).private_codes
    assert c.mechanism.unit(codes).tolist() == [-1.0, 0.0, 1.0, -0.5]


def test_submission_is_perturbed_memoized_and_charged(tmp_path: Path) -> None:
    c = card()
    info = CollectionInfo(c, Limits())
    rows = encode_columns(c.schema, {"hours": [12.5, 99, 0, 12.5], "region": ["north", "south", "north", "north"]})
    with PrivacyLedger(tmp_path / "ledger.sqlite", budget=10.0) as ledger:
        first = prepare_reports(info, rows, ledger)
        again = prepare_reports(info, rows, ledger)
        spent = ledger.spent("c")
    assert len(first.reports) == 3 and first.memoized == 1           # the repeated row shares its report
    assert ((first.reports.private_codes >= 0) & (first.reports.private_codes < c.mechanism.domain_size)).all()
    assert first.epsilon_spent == pytest.approx(3 * c.mechanism.epsilon) == spent
    assert again.epsilon_spent == 0.0 and (again.reports.private_codes == first.reports.private_codes).all()


def _chi_square(counts: np.ndarray, probabilities: np.ndarray, minimum: float = 5.0) -> float:
    """The p-value of observed ``counts`` against ``probabilities``, neighbouring cells merged (in order) until
    each merged cell expects at least ``minimum``."""
    n = counts.sum()
    edges, expected = [0], 0.0
    for j, p in enumerate(probabilities):
        expected += n * p
        if expected >= minimum:
            edges.append(j + 1)
            expected = 0.0
    edges[-1] = len(probabilities)
    observed = np.add.reduceat(counts, edges[:-1])
    wanted = np.add.reduceat(probabilities, edges[:-1]) * n
    assert wanted.min() >= minimum
    return float(stats.chisquare(observed, wanted).pvalue)


@pytest.mark.parametrize("mechanism, epsilon, hours, point", [
    ("HM", 1.0, 49.5, 512),          # x = 0: input grid point 512 of 1025
    ("HM", 2.0, 99.0, 1024),         # x = 1, the end of the range
    ("HM", 0.5, 24.75, 256),         # below ε*: HM is Duchi
    ("SW", 1.0, 0.0, 0),             # bucket 0 of 256
])
def test_device_reports_follow_the_samplers_exact_law(mechanism: str, epsilon: float, hours: float,
                                                      point: int) -> None:
    """The device's draws (card.mechanism.perturb_secure, what prepare_reports calls, on os.urandom) of a value on
    an input grid point against that point's row of the exact law (chi-square, α = 1e-3, ≥ 5 expected per cell)."""
    c = card(mechanism, epsilon)
    sampler = HybridMechanism(epsilon) if mechanism == "HM" else SquareWave(epsilon)
    assert c.mechanism.epsilon == sampler.epsilon and c.mechanism.domain_size == sampler.reports
    codes = encode_columns(c.schema, {"hours": [hours], "region": ["north"]}).private_codes
    n = 60_000
    reports = c.mechanism.perturb_secure(np.repeat(codes, n))
    assert reports.min() >= 0 and reports.max() < sampler.reports
    law = sampler.law().probabilities()[point]
    assert _chi_square(np.bincount(reports, minlength=sampler.reports), law) > ALPHA


def test_the_chi_square_catches_a_wrong_law() -> None:
    """The same test rejects the device's reports of x = 0 against the law of x = 0.1 (input point 563)."""
    c = card()
    codes = encode_columns(c.schema, {"hours": [49.5], "region": ["north"]}).private_codes
    reports = c.mechanism.perturb_secure(np.repeat(codes, 60_000))
    law = HybridMechanism(1.0).law().probabilities()[563]
    assert _chi_square(np.bincount(reports, minlength=c.mechanism.domain_size), law) < ALPHA


def test_means_from_counts_equal_the_reports_estimator_overall_and_per_group() -> None:
    c = card()
    rng = np.random.default_rng(7)
    hours = np.concatenate([rng.uniform(0, 40, 3000), rng.uniform(50, 99, 2000)])
    region = np.repeat(["north", "south"], [3000, 2000])
    rows = encode_columns(c.schema, {"hours": hours, "region": region})
    reports = c.mechanism.perturb(rows.private_codes, rng)
    keys = rows.public_codes[:, 0]
    sampler = c.mechanism.sampler
    assert isinstance(sampler, HybridMechanism)
    (overall,) = numeric_means(c.schema, keys, reports)
    reference = estimate_mean(sampler, reports, c.schema.numeric.range)  # type: ignore[union-attr]
    assert overall.value is None
    assert overall.estimate.mean == pytest.approx(reference.mean, rel=1e-12)
    assert overall.estimate.standard_error == pytest.approx(reference.standard_error, rel=1e-12)
    north, south = numeric_means(c.schema, keys, reports, by="region")
    assert (north.value, south.value) == ("north", "south") and (north.estimate.n, south.estimate.n) == (3000, 2000)
    for group, rows_of in ((north, slice(0, 3000)), (south, slice(3000, 5000))):
        ref = estimate_mean(sampler, reports[rows_of], c.schema.numeric.range)  # type: ignore[union-attr]
        assert group.estimate.mean == pytest.approx(ref.mean, rel=1e-12)
        assert group.estimate.sum == pytest.approx(ref.mean * ref.n, rel=1e-12)


def test_means_are_refused_for_sw_an_unknown_group_and_bad_reports() -> None:
    sw = card("SW")
    with pytest.raises(ValidationError) as info:
        numeric_means(sw.schema, [0], [0])
    assert info.value.field == "mechanism"
    hm = card()
    with pytest.raises(ValidationError) as info:
        numeric_means(hm.schema, [0], [0], by="hours")
    assert info.value.field == "by"
    with pytest.raises(ValidationError) as info:
        numeric_means(hm.schema, [0], [hm.mechanism.domain_size])
    assert info.value.field == "reports"


def test_a_release_keeps_its_reports_and_categorical_estimators_refuse_it(tmp_path: Path) -> None:
    c = card()
    release = Release(c, {"region": np.array([0, 1, 0])}, None, np.array([1, 2, c.mechanism.domain_size - 1]))
    release.write(tmp_path, parquet=False)
    back = Release.read(tmp_path)
    assert back.card.is_numeric and back.reports is not None and back.reports.tolist() == [1, 2, 1646]
    assert [g.estimate.n for g in release_means(back, by="region")] == [2, 1]
    with pytest.raises(ValidationError) as info:
        estimate_release(back, [{"kind": "linear", "weights": [1.0] * c.mechanism.domain_size}])
    assert info.value.field == "queries[0].kind" and "mean, sum" in info.value.legal  # the numeric kinds answer it


def test_quantiles_of_an_sw_collection_per_region_are_near_the_truth() -> None:
    """SW at ε = 2, 6,000 values (seeded sampler): each region's quartiles within 4 bootstrap SEs of the data's
    (α ≈ 6e-5 per quartile if the SEs were exact; EMS's smoothing bias is not counted)."""
    c = card("SW", 2.0)
    rng = np.random.default_rng(1)
    region = rng.integers(0, 2, 6000)
    hours = 99.0 * rng.beta(np.where(region == 0, 3.0, 6.0), np.where(region == 0, 6.0, 4.0))
    names = np.array(["north", "south"])[region]
    rows = encode_columns(c.schema, {"hours": hours, "region": names})
    reports = c.mechanism.perturb(rows.private_codes, rng)
    q = [0.25, 0.5, 0.75]
    groups = numeric_quantiles(c.schema, rows.public_codes[:, 0], reports, q, rng, by="region", replicates=40)
    assert [g.value for g in groups] == ["north", "south"]
    for g in groups:
        truth = np.quantile(hours[names == g.value], q)
        assert g.n == int((names == g.value).sum())
        assert (g.estimate.standard_error > 0).all()
        assert (np.abs(g.estimate.value - truth) <= 4 * g.estimate.standard_error).all(), (g.value, truth)
    with pytest.raises(ValidationError) as info:
        numeric_quantiles(card().schema, [0], [0], q, rng)
    assert info.value.field == "mechanism"
