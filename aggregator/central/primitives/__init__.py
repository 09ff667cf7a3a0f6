"""Privacy primitives shared by the central mechanisms (one place for each idea).

* :mod:`.guarantee` — :class:`~.guarantee.PrivacyGuarantee`: (ε, δ) and the neighbouring relation
  (:class:`~.guarantee.Neighbours`) under which it holds, and how it was obtained;
* :mod:`.composition` — basic and advanced composition (DRV10), zCDP (BS16, CKS20) and Gaussian DP
  (DRS22) conversions, and composition checked against a budget;
* :mod:`.selection` — the exponential mechanism (MT07) and report-noisy-max (DR14 Claim 3.9).
"""
