"""Privacy primitives shared by the central mechanisms (one place for each idea).

* :mod:`.guarantee` — :class:`~.guarantee.PrivacyGuarantee`: (ε, δ) and the neighbouring relation
  (:class:`~.guarantee.Neighbours`) under which it holds, and how it was obtained;
* :mod:`.composition` — basic and advanced composition (DRV10), zCDP (BS16, CKS20) and Gaussian DP
  (DRS22) conversions, and composition checked against a budget;
* :mod:`.selection` — the exponential mechanism (MT07; Gumbel-max and inverse-CDF sampling, its
  exact probabilities) and report-noisy-max (DR14 Claim 3.9);
* :mod:`.mwem` — the MWEM loop (HLM12) on batches of histograms with linear queries in [0, 1].
"""
