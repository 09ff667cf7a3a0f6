"""``ldpsynth plan``: the error of every query of a collection, before a single device reports.

::

    ldpsynth plan --collection C.json --devices N --queries Q.json [--rows-per-device R]
                  [--prior rows.csv | --prior-uniform] [--epsilon E] [--level 0.95]
                  [--target-halfwidth H] [--merge ATTR=A+B,C+D ...] [--json]
                  [--views pairs [--views-attributes A,B,C]]
                  [--shuffler [--delta D] [--min-batch B] [--assume-injected F]
                              [--target-central-epsilon E]]

prints, per (compiled) query, the predicted standard error and interval half-width of the eq. 17
estimator, worst case over the private values and (with a prior) under the prior, the eq. 20 bound
and whether the query is hopeless; each frequency oracle (OUE, OLH, HR, SS) beside E, their report
sizes and decoding costs, and the mechanism to choose; the devices and the ε a target half-width
needs; and what making each private attribute public or coarser would do.
Exact closed forms (:mod:`ldpsynth.shared.planning`), no simulation. ``--json`` prints the same
numbers as one JSON object (null where a figure does not apply, e.g. the devices a count needs, or
where an ε beyond 40 would be needed).

``--shuffler``: the collection behind a shuffler (docs/planning.md): the guarantee per device
against each party at the planned ε0 (the shuffler: the local one; the aggregator's operator and analysts:
the central one at the pool floor, ``--min-batch`` reports of one public key less ``--assume-injected``;
docs/shuffle-accountant.md §6), the planned public-key groups and those a release would withhold (below the
minimum batch), the ε0 to choose for a target central ε (default: the plan's ε), and every query's error at
that ε0 beside plain LDP at the same central ε, E's and each frequency oracle's; each frequency oracle behind
the shuffler at the ε0 FMT21's clone bound gives for the target, and which to choose among the mechanisms
behind the shuffler. In ``--json``: ``"shuffle"`` with ``against`` (per party: ``epsilon``, ``delta``,
``basis``), ``groups``, ``behind`` (per oracle: ``bound``, ``epsilon0_for_target``,
``central_epsilon_at_epsilon0``, ``error_ratio``), ``recommended``, and per query ``shuffled_*`` and
``plain_ldp_*`` figures (``shuffled_olh_*``, ``plain_ldp_olh_*``, ... for the oracles). Needs the accountant
(scipy: the ``[aggregator]`` extra).

A numeric or a discovery collection (no ``--queries``): :mod:`ldpsynth.cli.plan_modes` (the mean's error per
mechanism; a discovery's expected recall).

``--views pairs``: the views mode beside the full domain (docs/planning.md, "Wide rows: views"): devices split
evenly across every 2-way view of the private attributes (``--views-attributes``: of those named), each query's
standard error and half-width there (:mod:`ldpsynth.shared.planning.views`; a query no view holds: from the
model, no closed form), and the mode with the smaller typical error. In ``--json``: ``"views"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.cli import plan_modes
from ldpsynth.cli.options import add_command, add_level_argument
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.guarantees import PARTIES
from ldpsynth.shared.planning.choice import Choice, error_ratio
from ldpsynth.shared.planning.inverse import EPSILON_STEP, MAX_EPSILON
from ldpsynth.shared.planning.planner import Plan, plan
from ldpsynth.shared.planning.row_distribution import RowDistribution, SampleRows, UniformRows
from ldpsynth.shared.planning.schema_changes import COARSER, schema_changes
from ldpsynth.shared.planning.variances import Figures
from ldpsynth.shared.planning.views import MODEL, ViewsPlan, plan_views, workload_views
from ldpsynth.shared.queries.json_form import queries_from_json
from ldpsynth.shared.queries.model import NORMALIZATIONS
from ldpsynth.shared.schema import Schema


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``plan`` subcommand."""
    parser = add_command(
        subparsers, "plan", run, help="predict every query's error before collecting (devices, ε, schema)",
        description="Predict the standard error and interval half-width of every query of a collection before "
                    "any device reports: worst case over the data and under a prior, the devices and the ε a "
                    "target half-width needs, the schema's share of the error, and the frequency oracles (OUE, "
                    "OLH, HR, SS) beside E with the mechanism to choose.")
    parser.add_argument("--collection", required=True, type=Path, help="the collection's schema (JSON)")
    parser.add_argument("--devices", required=True, type=int, help="devices that will report")
    parser.add_argument("--rows-per-device", type=int, default=1, help="rows each device reports (default 1)")
    parser.add_argument("--queries", type=Path, help="JSON array of query objects (as for estimate; needed unless the "
                                                      "collection is numeric or a discovery)")
    prior = parser.add_mutually_exclusive_group()
    prior.add_argument("--prior", type=Path, metavar="ROWS.csv",
                       help="CSV of plausible raw rows (header: attribute names; other columns ignored)")
    prior.add_argument("--prior-uniform", action="store_true", help="prior: rows uniform over the whole domain")
    parser.add_argument("--epsilon", type=float, help="plan at this ε instead of the collection's")
    add_level_argument(parser)
    parser.add_argument("--target-halfwidth", type=float, metavar="H",
                        help="also answer: devices needed at the ε, and ε needed at the devices, for half-width H")
    parser.add_argument("--merge", action="append", default=[], metavar="ATTR=A+B,C+D",
                        help="merged values of a private attribute for its 'coarser' alternative (repeatable; "
                             "default: a continuous attribute loses a bit, others merge adjacent pairs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    views = parser.add_argument_group("wide rows")
    views.add_argument("--views", metavar="pairs|queries",
                       help="also plan the views mode, each query's error there and the mode to choose: devices split "
                            "across every 2-way view of the private attributes (pairs), or across the views the "
                            "queries need, one per query's private attributes (queries)")
    views.add_argument("--views-attributes", metavar="A,B,C",
                       help="the views' attributes (private, comma-separated; default: all private attributes)")
    shuffle = parser.add_argument_group("behind a shuffler")
    shuffle.add_argument("--shuffler", action="store_true",
                         help="also plan the collection behind a shuffler: central (ε, δ) per public-key group, "
                              "the ε0 for a target central ε, and the error at it beside plain LDP")
    shuffle.add_argument("--delta", type=float, help="δ of the central guarantee (default: the collection's "
                                                     "shuffle.delta, else 1e-9)")
    shuffle.add_argument("--min-batch", type=int, help="minimum batch: the fewest reports of one public key per pool "
                                                       "(default: the collection's shuffle.min_batch, else 1)")
    shuffle.add_argument("--assume-injected", type=int, metavar="F",
                         help="reports per pool an adversary may inject, not counted as honest (default: the "
                              "collection's shuffle.assume_injected, else one device's quota: --rows-per-device)")
    shuffle.add_argument("--target-central-epsilon", type=float, metavar="E",
                         help="the central ε to reach (default: the planned ε, the same promise made centrally)")
    plan_modes.register_arguments(parser)


def _read_text(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(flag, "a readable UTF-8 file", f"{path}: {exc.strerror or exc}") from None


def parse_merges(specs: list[str]) -> dict[str, list[list[str]]]:
    """``["rating=1+2,4+5"]`` -> ``{"rating": [["1", "2"], ["4", "5"]]}``."""
    merges: dict[str, list[list[str]]] = {}
    for spec in specs:
        name, sep, groups = spec.partition("=")
        if not sep or not name.strip() or not groups.strip() or name.strip() in merges:
            raise ValidationError("--merge", "ATTR=A+B[,C+D...], once per attribute", f"got {spec!r}")
        merges[name.strip()] = [[v.strip() for v in group.split("+")] for group in groups.split(",")]
    return merges


def _prior(args: argparse.Namespace, schema: Schema) -> RowDistribution | None:
    if args.prior_uniform:
        return UniformRows(schema)
    if args.prior is None:
        return None
    from ldpsynth.client.rows import read_csv  # the device's CSV reader (imports gRPC: only when needed)

    try:
        columns = read_csv(args.prior)
    except ValidationError as exc:
        raise ValidationError(f"--prior: {exc.field}", exc.legal, exc.problem, exc.position) from None
    return SampleRows.from_columns(schema, columns, name=str(args.prior))


def make_plan(args: argparse.Namespace) -> Plan:
    """The plan the arguments ask for."""
    schema = Schema.from_json(_read_text(args.collection, "--collection"))
    if args.queries is None:
        raise ValidationError("--queries", "a JSON array of query objects (a collection of categorical attributes is "
                              "planned per query)", "missing")
    queries = queries_from_json(_read_text(args.queries, "--queries"))
    changes = schema_changes(schema, parse_merges(args.merge))
    prior = _prior(args, schema)
    p = plan(schema, queries, args.devices, rows_per_device=args.rows_per_device, prior=prior,
             epsilon=args.epsilon, level=args.level, target_halfwidth=args.target_halfwidth, changes=changes)
    if getattr(args, "shuffler", False):
        from ldpsynth.shared.planning.shuffled import plan_shuffle  # scipy: the [aggregator] extra

        with plan_modes.shuffle_flags():
            p = plan_shuffle(p, schema, p.batch, prior=prior, delta=args.delta, min_batch=args.min_batch,
                             assume_injected=args.assume_injected,
                             target_central_epsilon=args.target_central_epsilon)
    elif any(getattr(args, name, None) is not None for name in ("delta", "min_batch", "assume_injected",
                                                                 "target_central_epsilon")):
        raise ValidationError("--shuffler", "given with --delta, --min-batch, --assume-injected or "
                              "--target-central-epsilon", "missing")
    return _with_views(args, schema, p, prior)


#: The view sets of ``--views``.
VIEW_SETS = ("pairs", "queries")


def _with_views(args: argparse.Namespace, schema: Schema, p: Plan, prior: RowDistribution | None) -> Plan:
    """``p`` with the views mode when ``--views`` asks for it."""
    kind, names = getattr(args, "views", None), getattr(args, "views_attributes", None)
    if kind is None:
        if names is not None:
            raise ValidationError("--views", "given with --views-attributes (one of: " + ", ".join(VIEW_SETS) + ")",
                                  "missing")
        return p
    if kind not in VIEW_SETS:
        raise ValidationError("--views", "one of: " + ", ".join(VIEW_SETS), f"got {kind!r}")
    if p.rows_per_device != 1:
        raise ValidationError("--views", "one row per device (--rows-per-device 1)", f"got {p.rows_per_device}")
    attributes = None if names is None else [a.strip() for a in names.split(",")]
    if kind == "queries" and attributes is not None:
        raise ValidationError("--views-attributes", "absent with --views queries (the queries choose the views)",
                              "given")
    eps = schema.epsilon if args.epsilon is None else args.epsilon
    chosen = workload_views(schema, p.batch) if kind == "queries" else None
    try:
        views = plan_views(schema, p.batch, p.devices, eps, attributes=attributes, prior=prior, views=chosen)
    except ValidationError as exc:
        flag = ("--views" if names is None else "--views-attributes") if exc.field == "attributes" \
            else f"--views: {exc.field}"
        raise ValidationError(flag, exc.legal, exc.problem, exc.position) from None
    return dataclasses.replace(p, views=views)


def views_choice(p: Plan, views: ViewsPlan) -> tuple[str, float, str]:
    """``(mode, ratio, why)``: the views mode when its typical error (the geometric mean, over the queries the
    views hold, of its headline standard error over the recommended full-domain mechanism's) is below 1."""
    best = p.choice(p.recommended).figures
    assert best is not None
    ratio = error_ratio(Figures(views.se_worst, views.se_prior), best)
    held = int(np.isfinite(views.se_worst).sum())
    mode = "views" if ratio < 1 else "full domain"
    why = (f"{mode}: the views' standard errors are {ratio:.3g} x {p.recommended}'s over the full domain "
           f"(geometric mean over the {held} of {len(p)} queries the views hold)")
    if held < len(p):
        why += f"; in the views mode the other {len(p) - held} come {MODEL}"
    return mode, ratio, why


# ----- output --------------------------------------------------------------------------------
def _number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _figures(fig: Figures, p: Plan, j: int, prefix: str) -> dict[str, float | None]:
    out = {f"{prefix}se_worst": _number(fig.se_worst[j]), f"{prefix}halfwidth_worst": _number(p.z * fig.se_worst[j])}
    if fig.se_prior is not None:
        out.update({f"{prefix}se_prior": _number(fig.se_prior[j]),
                    f"{prefix}halfwidth_prior": _number(p.z * fig.se_prior[j])})
    return out


def to_json(p: Plan) -> dict[str, Any]:
    """The plan as a JSON-ready dict: a header and one object per compiled query."""
    queries = []
    for j in range(len(p)):
        item: dict[str, Any] = {"label": p.label(j), "normalization": NORMALIZATIONS[p.normalization[j]],
                                "status": str(p.status[j]), "range": _number(p.range[j]),
                                **_figures(p.e, p, j, ""), "bound": _number(p.bound[j])}
        for choice in p.choices[1:]:
            if choice.figures is not None:
                item.update(_figures(choice.figures, p, j, f"{choice.mechanism.lower()}_"))
        if p.inverse is not None:
            inv = p.inverse
            item["devices_needed_worst"] = _number(inv.devices_worst[j])
            item["epsilon_needed_worst"] = _number(inv.epsilon_worst[j])
            if inv.devices_prior is not None and inv.epsilon_prior is not None:
                item["devices_needed_prior"] = _number(inv.devices_prior[j])
                item["epsilon_needed_prior"] = _number(inv.epsilon_prior[j])
        alternatives = {}
        for alt in p.alternatives:
            entry = {"domain_size": alt.change.domain_size, **_figures(alt.e, p, j, "")}
            if alt.change.kind == COARSER:
                entry["bias_worst"] = _number(alt.bias_worst[j])
                if alt.bias_prior is not None:
                    entry["bias_prior"] = _number(alt.bias_prior[j])
            alternatives[alt.change.description] = entry
        item["alternatives"] = alternatives
        if p.shuffle is not None:
            if p.shuffle.shuffled is not None:
                item.update(_figures(p.shuffle.shuffled, p, j, "shuffled_"))
            item.update(_figures(p.shuffle.plain, p, j, "plain_ldp_"))
            for choice in p.shuffle.oracles:
                if choice.figures is not None:
                    item.update(_figures(choice.figures, p, j, f"plain_ldp_{choice.mechanism.lower()}_"))
            for b in p.shuffle.behind:
                if b.choice.figures is not None:
                    item.update(_figures(b.choice.figures, p, j, f"shuffled_{b.choice.mechanism.lower()}_"))
        queries.append(item)
    out = {"collection": p.batch.schema.name, "domain_size": p.domain_size, "epsilon": p.epsilon, "devices": p.devices,
           "rows_per_device": p.rows_per_device, "rows": p.n, "level": p.level, "z": p.z,
           "composition": p.composition, "recommended": p.recommended, "recommendation": p.recommendation,
           "mechanisms": [_choice_json(c) for c in p.choices],
           "target_halfwidth": None if p.inverse is None else p.inverse.target_halfwidth, "queries": queries}
    if p.shuffle is not None:
        out["shuffle"] = _shuffle_json(p)
    if p.views is not None:
        out["views"] = _views_json(p, p.views)
    return out


def _views_json(p: Plan, v: ViewsPlan) -> dict[str, Any]:
    """The ``"views"`` object of ``--json``: the view set, and per query its figures in the views mode."""
    mode, ratio, why = views_choice(p, v)
    queries = []
    for j in range(len(p)):
        item: dict[str, Any] = {"label": p.label(j), "views": [list(h) for h in v.holding[j]]}
        if np.isfinite(v.se_worst[j]):
            item.update(_figures(Figures(v.se_worst, v.se_prior), p, j, ""))
        else:
            item["answer"] = MODEL
        queries.append(item)
    return {"kind": "pairs", "views": [list(x) for x in v.views], "mechanisms": list(v.mechanisms),
            "devices_per_view": v.devices_per_view, "recommended_mode": mode, "error_ratio": _number(ratio),
            "recommendation": why, "queries": queries}


def _choice_json(c: Choice) -> dict[str, Any]:
    return {"mechanism": c.mechanism, "available": c.available, "why_not": c.why or None,
            "epsilon": c.epsilon if c.available else None, "report_bytes": c.report_bytes if c.available else None,
            "tally_operations_per_report": c.tally_operations if c.available else None,
            "transform_per_key": c.transform if c.available else None,
            "error_ratio": _number(c.error_ratio) if c.available else None}


def _shuffle_json(p: Plan) -> dict[str, Any]:
    """The ``"shuffle"`` object of ``--json``: the guarantee against each party, the planned groups."""
    s = p.shuffle
    assert s is not None
    g = s.at_planned
    return {"local_epsilon": p.epsilon, "rows_per_device": p.rows_per_device, "delta": s.delta,
            "min_batch": s.min_batch, "assume_injected": s.assume_injected, "shuffler": s.shuffler,
            "against": {party: g.against(party).to_json() for party in PARTIES},
            "groups": [{"group": label, "reports": int(c), "below_min_batch": bool(b)}
                       for label, c, b in zip(s.labels, s.planned_reports.tolist(), s.below_min_batch.tolist())],
            "any_group_below_min_batch": bool(s.below_min_batch.any()),
            "target_central_epsilon": s.target, "epsilon0_for_target": s.epsilon0,
            "central_epsilon_at_epsilon0": s.central_at_epsilon0,
            "central_delta_at_epsilon0": None if s.epsilon0 is None else s.delta,
            "behind": [{"mechanism": b.choice.mechanism, "bound": b.bound, "available": b.choice.available,
                        "epsilon0_for_target": b.choice.epsilon if b.choice.available else None,
                        "central_epsilon_at_epsilon0": b.central,
                        "error_ratio": _number(b.choice.error_ratio) if b.choice.available else None}
                       for b in s.behind],
            "recommended": s.recommended, "recommendation": s.recommendation}


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    return f"{x:.4g}" if math.isfinite(x) else "inf"


def _count(x: float) -> str:
    return f"{int(x):,}" if math.isfinite(x) else "n/a"


def _epsilon(x: float) -> str:
    if not math.isfinite(x):
        return f"> {MAX_EPSILON:g}"
    return f"<= {x:.2f}" if x <= EPSILON_STEP else f"{x:.2f}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    align = ["---"] + ["---:"] * (len(head) - 1)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _main_table(p: Plan) -> str:
    level = f"{p.level:.0%}"
    head = ["query", "range", "SE worst", f"±{level} worst"]
    if p.has_prior:
        head += ["SE prior", f"±{level} prior"]
    head += ["eq. 20 RMS", "status"]
    rows = []
    for j in range(len(p)):
        row = [p.label(j), _fmt(p.range[j]), _fmt(p.e.se_worst[j]), _fmt(p.z * p.e.se_worst[j])]
        if p.e.se_prior is not None:
            row += [_fmt(p.e.se_prior[j]), _fmt(p.z * p.e.se_prior[j])]
        rows.append(row + [_fmt(p.bound[j]), str(p.status[j])])
    return _table(head, rows)


def _oracle_table(p: Plan) -> str:
    """Each mechanism's headline standard error per query, then what each costs, and the recommendation."""
    which = "prior" if p.has_prior else "worst"
    usable = [c for c in p.choices if c.figures is not None]
    rows = [[p.label(j)] + [_fmt(c.figures.headline[j]) for c in usable if c.figures is not None]
            for j in range(len(p))]
    text = _table(["query"] + [f"{c.mechanism} SE {which}" for c in usable], rows)
    costs = [[c.mechanism, f"{c.epsilon:.6g}", str(c.report_bytes), f"{c.tally_operations:,}", f"{c.transform:,}",
              _fmt(c.error_ratio)] if c.available else [c.mechanism, "n/a", "n/a", "n/a", "n/a", f"n/a: {c.why}"]
             for c in p.choices]
    text += "\n" + _table(["mechanism", "ε delivered", "bytes per report", "tally operations per report",
                           "transform additions per public key", "SE / E's SE (geometric mean)"], costs)
    return text + f"\nRecommended: {p.recommendation}.\n"


def _inverse_table(p: Plan) -> str:
    inv = p.inverse
    assert inv is not None
    head = ["query", "devices needed (worst)"]
    if inv.devices_prior is not None:
        head.append("devices needed (prior)")
    head.append(f"ε needed at {p.devices:,} devices (worst)")
    if inv.epsilon_prior is not None:
        head.append("ε needed (prior)")
    rows = []
    for j in range(len(p)):
        row = [p.label(j), _count(inv.devices_worst[j])]
        if inv.devices_prior is not None:
            row.append(_count(inv.devices_prior[j]))
        row.append(_epsilon(inv.epsilon_worst[j]))
        if inv.epsilon_prior is not None:
            row.append(_epsilon(inv.epsilon_prior[j]))
        rows.append(row)
    return _table(head, rows)


def _alternatives_table(p: Plan) -> str:
    which = "prior" if p.has_prior else "worst"
    head = ["query", f"as is (k = {p.domain_size:,})"] + \
        [f"{a.change.description} (k = {a.change.domain_size:,})" for a in p.alternatives]
    rows = []
    for j in range(len(p)):
        row = [p.label(j), _fmt(p.z * p.e.headline[j])]
        for alt in p.alternatives:
            cell = _fmt(p.z * alt.e.headline[j])
            if alt.change.kind == COARSER:
                prior = "" if alt.bias_prior is None else f"{_fmt(alt.bias_prior[j])}, "
                cell += f" (bias {prior}≤ {_fmt(alt.bias_worst[j])})"
            row.append(cell)
        rows.append(row)
    bias = "under the prior, and " if p.has_prior else ""
    return (f"±{p.level:.0%} half-width, {which}; a coarser attribute also moves the answer (bias {bias}worst "
            "case):\n\n" + _table(head, rows))


def render(p: Plan) -> str:
    """The plan as text: a header and Markdown tables."""
    privates = ", ".join(a.name for a in p.batch.schema.private_attributes)
    publics = ", ".join(a.name for a in p.batch.schema.public_attributes) or "none"
    text = (f"collection        {p.batch.schema.name}: |D| = {p.domain_size:,} "
            f"(private: {privates}; public: {publics})\n"
            f"epsilon           {p.epsilon:.6g} per row (delivered by E)\n"
            f"rows              {p.devices:,} devices x {p.rows_per_device} = {p.n:,} rows\n"
            f"worst case        any private values; {p.composition}\n"
            f"level             {p.level:.0%} (z = {p.z:.4g}); SE = standard error, ± = interval half-width, "
            "eq. 20 = RMS bound; hopeless: ± >= range\n\n")
    text += "E, the eq. 17 estimator:\n\n" + _main_table(p)
    text += ("\nEach mechanism at the same ε (E, and the frequency oracles for large domains of Wang et al. 2017; "
             "docs/planning.md):\n\n" + _oracle_table(p))
    if p.inverse is not None:
        text += f"\nTarget half-width ±{p.inverse.target_halfwidth:g}:\n\n" + _inverse_table(p)
        if (np.isnan(p.inverse.devices_worst)).any():
            text += ("(n/a: a sum's half-width grows like the square root of the devices; "
                     "a dense query's rows are fixed)\n")
    if p.alternatives:
        text += "\nThe schema's share of the error (same ε): " + _alternatives_table(p)
    if p.shuffle is not None:
        text += _shuffle_text(p)
    if p.views is not None:
        text += _views_text(p, p.views)
    return text


def _views_text(p: Plan, v: ViewsPlan) -> str:
    level = f"{p.level:.0%}"
    which = "prior" if p.has_prior else "worst"
    best = p.choice(p.recommended).figures
    assert best is not None
    used = sorted(set(v.mechanisms))
    ways = sorted({len(view) for view in v.views})
    kind = f"{ways[0]}-way" if len(ways) == 1 else "-, ".join(str(w) for w in ways) + "-way"
    text = (f"\nWide rows, the views mode: {p.devices:,} devices split evenly across {len(v.views)} {kind} views "
            f"({v.devices_per_view:,.1f} devices each), each view's best oracle ({', '.join(used)}) at the full ε; "
            f"±{level} half-width:\n\n")
    head = ["query", f"views ({which})"] + (["views (worst)"] if p.has_prior else []) + \
        [f"E, full domain ({which})"] + ([f"{p.recommended}, full domain ({which})"] if p.recommended != "E" else []) \
        + ["views holding it"]
    rows = []
    for j in range(len(p)):
        if np.isfinite(v.se_worst[j]):
            row = [p.label(j), _fmt(p.z * v.headline[j])] + ([_fmt(p.z * v.se_worst[j])] if p.has_prior else [])
        else:
            row = [p.label(j), MODEL] + (["-"] if p.has_prior else [])
        row.append(_fmt(p.z * p.e.headline[j]))
        if p.recommended != "E":
            row.append(_fmt(p.z * best.headline[j]))
        rows.append(row + ["; ".join("×".join(h) for h in v.holding[j]) or "none"])
    return text + _table(head, rows) + f"\nRecommended mode: {views_choice(p, v)[2]}.\n"


def _shuffle_text(p: Plan) -> str:
    s = p.shuffle
    assert s is not None
    g = s.at_planned
    text = (f"\nBehind a shuffler (δ = {s.delta:g}, minimum batch {s.min_batch:,} reports of one public key per pool, "
            f"{s.assume_injected:,} of them assumed injected, {p.rows_per_device} row(s) per device), per device:\n\n")
    rows = []
    for party in PARTIES:
        got = g.against(party)
        rows.append([party, _fmt(got.epsilon), f"{got.delta:g}", got.basis])
    text += _table(["against", f"ε at ε0 = {p.epsilon:.4g}", "δ", "why"], rows)
    rows = [[label, f"{int(c):,}", "withheld (below the minimum batch)" if b else "released"]
            for label, c, b in zip(s.labels, s.planned_reports.tolist(), s.below_min_batch.tolist())]
    text += "\n" + _table(["public-key group", "planned reports", "in answers and exports"], rows)
    if s.epsilon0 is None:
        return text + (f"\nThe pool floor ({s.min_batch:,} less {s.assume_injected:,} injected) holds fewer honest "
                       f"reports than one per row of a device: no ε0 reaches central ε = {s.target:g}.\n")
    text += (f"\nTarget central ε = {s.target:g} (δ = {s.delta:g}): choose ε0 = {s.epsilon0:.6g} (central ε there "
             f"{_fmt(s.central_at_epsilon0 or 0.0)} at the pool floor). ±{p.level:.0%} half-width:\n\n")
    which = "prior" if p.has_prior else "worst"
    assert s.shuffled is not None
    oracles = [c for c in s.oracles if c.figures is not None]
    rows = [[p.label(j), _fmt(p.z * s.shuffled.headline[j]), _fmt(p.z * s.plain.headline[j])]
            + [_fmt(p.z * c.figures.headline[j]) for c in oracles if c.figures is not None] for j in range(len(p))]
    text += _table(["query", f"E behind the shuffler, ε0 = {s.epsilon0:.4g} ({which})",
                    f"plain LDP, ε = {s.target:g} ({which})"]
                   + [f"{c.mechanism}, ε = {s.target:g} ({which})" for c in oracles], rows)
    behind = [b for b in s.behind if b.choice.figures is not None]
    if behind:
        text += ("\nThe frequency oracles behind the shuffler (FMT21's clone bound, any ε0-LDP mechanism; "
                 f"docs/shuffle-accountant.md §9), at the ε0 for central ε = {s.target:g}:\n\n")
        rows = [[b.choice.mechanism, b.bound, f"{b.choice.epsilon:.4g}", _fmt(b.central or 0.0),
                 _fmt(b.choice.error_ratio)] for b in behind]
        text += _table(["mechanism", "bound", "ε0", "central ε there", "SE / E's behind the shuffler"], rows)
        rows = [[p.label(j)] + [_fmt(p.z * b.choice.figures.headline[j]) for b in behind
                                if b.choice.figures is not None] for j in range(len(p))]
        text += "\n" + _table(["query"] + [f"{b.choice.mechanism} behind the shuffler, ε0 = {b.choice.epsilon:.4g} "
                                           f"({which})" for b in behind], rows)
    return text + f"\nRecommended at central ε = {s.target:g}: {s.recommendation}.\n"


def run(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth plan``."""
    other = plan_modes.run_mode(args, _read_text(args.collection, "--collection"))
    if other is not None:
        return other
    p = make_plan(args)
    if args.json:
        json.dump(to_json(p), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(p))
    return 0
