"""Planning a collection before any device reports: the error bars of E and of the frequency oracles.

* :mod:`~ldpsynth.shared.planning.planner`: :func:`plan` (WYZ eqs. 17-20 at a planned population; the
  frequency oracles of :mod:`ldpsynth.shared.mechanisms` beside E, and the mechanism to choose), from
  :mod:`~ldpsynth.shared.planning.moments` (the ε-free sums of a batch),
  :mod:`~ldpsynth.shared.planning.variances` (variances and standard errors),
  :mod:`~ldpsynth.shared.planning.choice` (the oracles beside E, the mechanism to choose) and
  :mod:`~ldpsynth.shared.planning.inverse` (the devices or the ε a target half-width needs);
* :mod:`~ldpsynth.shared.planning.shuffled`: the plan of a collection behind a shuffler (E and the frequency
  oracles), :mod:`~ldpsynth.shared.planning.shuffled_numeric`: a numeric collection's mean behind one;
* :mod:`~ldpsynth.shared.planning.numeric`: a numeric attribute's mean per mechanism, its prior and E's levels
  read with a declared step by :mod:`~ldpsynth.shared.planning.declared_levels`;
* :mod:`~ldpsynth.shared.planning.row_distribution`: a prior over rows (:class:`RowDistribution`);
* :mod:`~ldpsynth.shared.planning.schema_changes`: the error of a changed schema.
"""

from ldpsynth.shared.planning.planner import Plan, plan

__all__ = ["Plan", "plan"]
