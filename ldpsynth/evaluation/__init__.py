"""Central-DP mechanisms for comparison and evaluation (never imported by the serving code).

Three families, each a package with its own interface, on one set of privacy primitives:

* :mod:`.primitives` — what every family uses: the :class:`~.primitives.guarantee.PrivacyGuarantee`
  with its neighbouring relation, composition and accounting (basic, advanced, zCDP, GDP), private
  selection (the exponential mechanism, report-noisy-max) and the MWEM core (HLM12).
* :mod:`.comparison` — central mechanisms beside mechanism E on the same histogram and workload
  (Laplace, MWEM and WYZ's sub-database MWEM, DPFW and DPAM of DPSCO), each a value with
  ``release(data, workload, rng)``, and the harness that reproduces WYZ Figs. 2-4.
* :mod:`.smooth` — the smooth-query mechanism of JWHZW (Algorithms 1 and 2, the practical variant).
* :mod:`.pqd` — the DP-PQD deciders: is a synthetic answer within τ of the private one, under ε-DP.

:mod:`.records` writes the experiments' CSV tables.
"""
