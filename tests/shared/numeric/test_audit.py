"""The distinguishing game against the numeric samplers: their ε at the boundary, and a mislabelled ε caught.

Each game is one run with a fixed seed (the seeded path runs the device's exact algorithm). At
α = 0.01 an honest sampler is flagged with probability at most 0.01; the mislabelled one (built for
1.5 ε, labelled ε) is flagged with probability > 0.999 at these draws (ε̂_lower ≈ 1.5 ε minus a few
hundredths)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpsynth.shared.numeric import Duchi, HybridMechanism, PiecewiseMechanism, SquareWave
from ldpsynth.shared.numeric.audit import audit, best_event
from ldpsynth.shared.numeric.grid import GridLaw

SAMPLERS = {"duchi": Duchi, "pm": PiecewiseMechanism, "hm": HybridMechanism, "sw": SquareWave}
DRAWS = 200_000


@pytest.mark.parametrize("name", SAMPLERS)
def test_the_event_has_ratio_e_to_the_epsilon(name: str) -> None:
    m = SAMPLERS[name](1.0, 5)
    p = m.law().probabilities()
    event = best_event(m)
    assert p[-1][event].sum() / p[0][event].sum() == pytest.approx(math.e, rel=1e-9)


@pytest.mark.parametrize("name", SAMPLERS)
def test_an_honest_sampler_passes_and_its_epsilon_is_found_near_the_boundary(name: str) -> None:
    m = SAMPLERS[name](1.0)
    result = audit(m, name, DRAWS, m.epsilon, rng=np.random.default_rng(7))
    assert not result.violation
    assert result.epsilon_hat == pytest.approx(1.0, abs=0.1)   # the game sees the full ε, not less


@pytest.mark.parametrize("name", SAMPLERS)
def test_a_sampler_built_for_one_and_a_half_epsilon_but_labelled_epsilon_is_caught(name: str) -> None:
    result = audit(SAMPLERS[name](1.5), name, DRAWS, 1.0, rng=np.random.default_rng(8))
    assert result.violation and result.epsilon_lower > 1.2


def test_the_device_path_passes_the_game() -> None:
    """perturb_secure (the OS CSPRNG, unseeded): a false alarm has probability <= α = 0.01 per run, so this
    test uses α = 1e-6 (the CP bounds at 5e-7 each)."""
    m = PiecewiseMechanism(1.0)
    assert not audit(m, "pm", DRAWS, m.epsilon, alpha=1e-6).violation


def test_a_report_impossible_from_one_end_is_the_event() -> None:
    class Broken:
        def law(self) -> GridLaw:
            return GridLaw(np.array([[1, 1, 0], [0, 1, 1]]), 2)

    assert best_event(Broken()).tolist() == [False, False, True]    # type: ignore[arg-type]
