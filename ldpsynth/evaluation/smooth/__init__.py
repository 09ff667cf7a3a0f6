"""The smooth-query mechanism of JWHZW (central DP): a synthetic database for smooth queries on [-1, 1]^d.

* :mod:`.chebyshev` — the tensor Chebyshev basis (JWHZW Algorithm 1);
* :mod:`.params` — the sizes t, N, k of Algorithm 1 and the practical basis size;
* :mod:`.noise` — the noise on the basis answers, as published and calibrated ("safe");
* :mod:`.lp` — the L1 linear program of Algorithm 1 step 20;
* :mod:`.release` — the release value, the unit cube, grids and snapping;
* :mod:`.synth` — Algorithm 1 end to end;
* :mod:`.private_pca` — private subspace iteration (JWHZW Algorithm 2, Hardt13);
* :mod:`.moments` — private means for the ellipsoid's centre and the basis answers;
* :mod:`.budget` — how the practical variant (JWHZW §3.4) splits its budget;
* :mod:`.practical` — the practical variant end to end;
* :mod:`.queries` — the smooth (kernel) queries the experiments answer.

Guarantees and accounting come from :mod:`..primitives` (neighbours: replace one row).
"""
