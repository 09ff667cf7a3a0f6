"""Mechanism E beside central mechanisms on one histogram and workload (WYZ §VI-A, DPSCO).

Every mechanism is a frozen value with validated parameters, a ``guarantee`` and
``release(data, workload, rng) -> CentralRelease``:

* :mod:`.workloads` — the ``(G, k)`` histogram and the dense statistical-query workload;
* :mod:`.releases` — :class:`~.releases.CentralRelease`, what a mechanism returns;
* :mod:`.laplace` — the Laplace mechanism on the answers or on the histogram (DMNS06);
* :mod:`.mwem` — MWEM (HLM12) and WYZ's sub-database MWEM (WYZ §VI-A-1);
* :mod:`.dpfw`, :mod:`.dpam` — DPSCO Algorithms 1 and 2;
* :mod:`.local_e` — mechanism E (local) as a contestant;
* :mod:`.harness` — runs contestants on the same workloads and writes the reports;
* :mod:`.wyz_figures` — WYZ Figs. 2-4 on MovieLens-100k; :mod:`.subdb_sensitivity` — Fig. 2 under
  the choices WYZ leave open.
"""
