"""DP-PQD: decide under ε-DP whether a synthetic table's answer is within τ of the private answer.

* :mod:`.table` — tables (CSV, Parquet, weighted) and public numeric domains;
* :mod:`.query` — the COUNT / SUM / MEDIAN / quantile queries with a conjunctive WHERE (SQL or JSON);
* :mod:`.access` — the accounted private view: every read inside a privacy step;
* :mod:`.problem` — the decision problem (DP-PQD Def. 3.1) and the decider interface;
* :mod:`.count`, :mod:`.sum`, :mod:`.median` — the deciders of DP-PQD §§4-6 and their exact errors;
* :mod:`.deciders` — the deciders by name, the private runner and the evaluation against the truth;
* :mod:`.noise` — Laplace draws and CDF;
* :mod:`.mwem` — an MWEM synthetic table (the experiment's black-box generator);
* :mod:`.release` — an ldpsynth release as a weighted synthetic table.

Neighbours add or remove one tuple (DP-PQD §2.2).
"""
