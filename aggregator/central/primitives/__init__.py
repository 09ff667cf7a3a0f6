"""Privacy primitives shared by the central mechanisms.

* :mod:`.composition` — basic and advanced composition (DRV10), zCDP conversions (BS16, CKS20);
* :mod:`.selection` — the exponential mechanism (MT07) and report-noisy-max (DR14 Claim 3.9).
"""
