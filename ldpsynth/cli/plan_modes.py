"""``ldpsynth plan`` for the collections that are not a domain of categories: a numeric attribute, a discovery.

* A **numeric** collection (docs/numeric.md): the standard error of the attribute's mean and sum per mechanism
  (HM, PM, Duchi, E over levels) and the one to choose (:func:`ldpsynth.shared.planning.numeric.plan_mean`);
  ``--prior ROWS.csv`` holds plausible values in the attribute's column, ``--levels K`` E's levels (default: the
  prior's distinct values when at most :data:`MAX_PRIOR_LEVELS`, else 16 equal buckets). An attribute that declares
  ``step`` is planned on its levels (:func:`ldpsynth.shared.planning.declared_levels.plan_levels`): E over them,
  ``--levels`` refused, the prior checked as the device checks a value; ``--json``: ``"e_levels"`` (count, step,
  from ``"step"``, ``"prior"`` or ``"buckets"``).
  With ``--shuffler`` (and ``--delta``, ``--min-batch``, ``--assume-injected``, ``--target-central-epsilon``):
  per mechanism the central (ε, δ) at the planned ε0, the ε0 for the target central ε and the mean's error there
  beside plain LDP at the target, and the one to choose behind the shuffler
  (:func:`ldpsynth.shared.planning.shuffled_numeric.plan_mean_shuffled`); ``--json``: ``"shuffle"``.
* A **discovery** collection (docs/heavy-hitters.md): the expected recall, precision and F1 of its heavy hitters
  (:func:`ldpsynth.shared.planning.heavy_hitters.plan_recall`); ``--prior ROWS.csv`` holds plausible values of the
  string attribute (weighted by how often each occurs), or distinct values in rank order with ``--zipf S``.
  ``--shuffler`` and its flags are refused (its rounds are planned without a shuffler).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.guarantees import PARTIES
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema, is_discovery_json
from ldpsynth.shared.jsonio import loads
from ldpsynth.shared.planning.declared_levels import plan_levels
from ldpsynth.shared.planning.heavy_hitters import RecallPlan, plan_recall, zipf_weights
from ldpsynth.shared.planning.numeric import MeanChoice, NumericPlan, plan_mean
from ldpsynth.shared.schema import Schema

if TYPE_CHECKING:
    from ldpsynth.shared.planning.shuffled_numeric import ShuffledNumericPlan

__all__ = ["MAX_PRIOR_LEVELS", "SHUFFLE_FLAGS", "register_arguments", "run_mode", "shuffle_flags",
           "shuffle_flags_given"]

#: A numeric prior with at most this many distinct values gives E those values as its levels.
MAX_PRIOR_LEVELS = 64


def register_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the numeric and discovery plans."""
    group = parser.add_argument_group("numeric and discovery collections")
    group.add_argument("--levels", type=int, metavar="K",
                       help="numeric: E's levels, K equal buckets of the range (default: the prior's distinct values "
                            f"when at most {MAX_PRIOR_LEVELS}, else 16); refused when the attribute declares step "
                            "(E is then planned over its levels)")
    group.add_argument("--zipf", type=float, metavar="S",
                       help="discovery: weigh the prior's distinct values by Zipf(S) in their order in the file")
    group.add_argument("--trials", type=int, default=20, help="discovery: emulated discoveries (default 20)")
    group.add_argument("--seed", type=int, default=0, help="discovery: the emulation's seed (default 0)")


def _prior_column(args: argparse.Namespace, name: str) -> list[str] | None:
    if args.prior is None:
        return None
    from ldpsynth.client.rows import read_csv  # the device's CSV reader (imports gRPC: only when needed)

    columns = read_csv(args.prior)
    if name not in columns:
        raise ValidationError("--prior", f"a CSV with a column {name!r}", f"its columns are {sorted(columns)[:20]}")
    return [str(v) for v in columns[name]]


def _numeric(args: argparse.Namespace, schema: Schema) -> dict[str, Any]:
    attribute = schema.numeric
    assert attribute is not None
    column = _prior_column(args, attribute.name)
    prior_field = f"--prior {args.prior}"
    prior: Any = column
    levels: Any = args.levels
    if attribute.step is None and column is not None:
        try:
            prior = np.array([float(v) for v in column])
        except ValueError:
            raise ValidationError(f"{prior_field}: {attribute.name}", "numbers", "a value is not a number") from None
        if levels is None and len(np.unique(prior)) <= MAX_PRIOR_LEVELS:
            levels = np.unique(prior)
    chosen = plan_levels(attribute, prior, levels, prior_field=prior_field, levels_field="--levels")
    source = "step" if chosen.step is not None else "buckets" if isinstance(chosen.levels, int) else "prior"
    used = {"count": chosen.count, "step": chosen.step, "from": source}
    if not getattr(args, "shuffler", False):
        if shuffle_flags_given(args):
            raise ValidationError("--shuffler", "given with " + ", ".join(shuffle_flags_given(args)), "missing")
        p = plan_mean(args.epsilon or schema.epsilon, args.devices, attribute.range, prior=chosen.prior,
                      levels=chosen.levels)
        return _numeric_json(p, attribute.name, attribute.mechanism, used)
    if args.rows_per_device != 1:
        raise ValidationError("--rows-per-device", "1 with --shuffler for a numeric collection (one value per device)",
                              f"got {args.rows_per_device}")
    from ldpsynth.shared.planning.shuffled_numeric import plan_mean_shuffled  # scipy: the [aggregator] extra

    with shuffle_flags():
        sp = plan_mean_shuffled(schema, args.devices, epsilon=args.epsilon, prior=chosen.prior, levels=chosen.levels,
                                delta=args.delta, min_batch=args.min_batch, assume_injected=args.assume_injected,
                                target_central_epsilon=args.target_central_epsilon)
    out = _numeric_json(sp.planned, attribute.name, attribute.mechanism, used)
    out["shuffle"] = _shuffled_numeric_json(sp)
    return out


def _shuffled_numeric_json(sp: ShuffledNumericPlan) -> dict[str, Any]:
    """The ``"shuffle"`` object of a numeric plan with ``--shuffler``: per mechanism its bound, the guarantees at
    the planned ε0, the ε0 for the target and the mean's error there beside plain LDP at the target."""
    spec = sp.spec

    def figures(c: MeanChoice, prefix: str) -> dict[str, float]:
        return {f"{prefix}se": c.std_error, f"{prefix}bias": c.bias, f"{prefix}rmse": c.rmse,
                f"{prefix}se_worst": c.worst_case_std_error}

    return {"delta": spec.delta, "min_batch": spec.min_batch, "assume_injected": spec.injected,
            "shuffler": spec.shuffler, "rows_per_device": 1, "target_central_epsilon": sp.target,
            "groups": [{"group": label, "reports": c, "below_min_batch": b}
                       for label, c, b in zip(sp.labels, sp.planned_reports, sp.below_min_batch)],
            "any_group_below_min_batch": any(sp.below_min_batch),
            "mechanisms": [{"mechanism": r.mechanism, "card_mechanism": r.card_mechanism, "bound": r.bound,
                            "domain_size": r.domain_size,
                            "against": {party: r.at_planned.against(party).to_json() for party in PARTIES},
                            "epsilon0_for_target": r.epsilon0, "central_epsilon_at_epsilon0": r.central_at_epsilon0,
                            "central_delta_at_epsilon0": spec.delta,
                            **figures(r.shuffled, "shuffled_"), **figures(r.plain, "plain_ldp_")} for r in sp.rows],
            "recommended": sp.recommended, "recommendation": sp.recommendation}


#: The flags of ``--shuffler`` by the field their value is checked as.
SHUFFLE_FLAGS = {"shuffle.delta": "--delta", "shuffle.min_batch": "--min-batch",
                 "shuffle.assume_injected": "--assume-injected", "target_central_epsilon": "--target-central-epsilon"}


@contextlib.contextmanager
def shuffle_flags() -> Iterator[None]:
    """Re-raise a :class:`ValidationError` of a shuffle field naming its flag (:data:`SHUFFLE_FLAGS`)."""
    try:
        yield
    except ValidationError as exc:
        flag = next((f for field, f in SHUFFLE_FLAGS.items() if exc.field.endswith(field)), None)
        if flag is None:
            raise
        raise ValidationError(flag, exc.legal, exc.problem, exc.position) from None


def shuffle_flags_given(args: argparse.Namespace) -> list[str]:
    """The flags of ``--shuffler`` given (``--shuffler`` itself first)."""
    given = ["--shuffler"] if getattr(args, "shuffler", False) else []
    return given + [flag for flag in SHUFFLE_FLAGS.values()
                    if getattr(args, flag[2:].replace("-", "_"), None) is not None]


def _numeric_json(p: NumericPlan, name: str, mechanism: str, levels: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "numeric", "attribute": name, "collected_by": mechanism, "epsilon": p.epsilon,
            "devices": p.devices, "range": [p.value_range.lo, p.value_range.hi], "e_levels": levels,
            "recommended": p.recommended,
            "mean": [{"mechanism": c.mechanism, "se": c.std_error, "bias": c.bias, "rmse": c.rmse,
                      "halfwidth": 1.959963984540054 * c.rmse, "se_worst": c.worst_case_std_error,
                      "sum_se": p.devices * c.std_error} for c in p.choices]}


def _discovery(args: argparse.Namespace, schema: DiscoverySchema) -> dict[str, Any]:
    given = shuffle_flags_given(args)
    if given:
        raise ValidationError(given[0], "absent for a discovery collection (its rounds are planned without a "
                              "shuffler)", "given")
    column = _prior_column(args, schema.word)
    if column is None:
        raise ValidationError("--prior", "a CSV of plausible values of the string attribute (a discovery's plan "
                              "emulates its rounds over them)", "missing")
    if args.zipf is not None:
        values = list(dict.fromkeys(column))
        weights = zipf_weights(len(values), args.zipf)
    else:
        counts = Counter(column)
        values, weights = list(counts), np.array(list(counts.values()), np.float64)
    d = schema.discovery
    p = plan_recall(schema.encoding, schema.schedule, args.epsilon or schema.epsilon, args.devices, values, weights,
                    top_k=d.top_k, threshold=d.threshold, cap=d.cap, mechanism=schema.round_mechanism,
                    trials=args.trials, rng=np.random.default_rng(args.seed))
    return _discovery_json(p, schema, args.epsilon or schema.epsilon, args.devices)


def _discovery_json(p: RecallPlan, schema: DiscoverySchema, epsilon: float, devices: int) -> dict[str, Any]:
    d = schema.discovery
    return {"kind": "discovery", "attribute": schema.word, "epsilon": epsilon, "devices": devices,
            "rounds": schema.schedule.rounds, "devices_per_round": p.devices_per_round,
            "find": {"top_k": d.top_k} if d.top_k is not None else {"threshold": d.threshold}, "wanted": p.wanted,
            "trials": p.trials, "recall": p.recall, "recall_se": p.recall_se, "precision": p.precision,
            "precision_se": p.precision_se, "f1": p.f1, "f1_se": p.f1_se,
            "found_by_rank": p.found_by_rank.tolist()}


def _render(out: dict[str, Any]) -> str:
    if out["kind"] == "numeric":
        lines = [f"Numeric attribute {out['attribute']!r} on [{out['range'][0]:g}, {out['range'][1]:g}], "
                 f"collected by {out['collected_by']}; ε = {out['epsilon']:g}, {out['devices']:,} devices.", "",
                 "| mechanism | SE of the mean | bucketing bias | ±95% | worst-case SE | SE of the sum |",
                 "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {m['mechanism']} | {m['se']:.4g} | {m['bias']:.3g} | {m['halfwidth']:.4g} | {m['se_worst']:.4g} "
                  f"| {m['sum_se']:.4g} |" for m in out["mean"]]
        lines += ["", _levels_line(out), "",
                  f"Recommended for the mean and sum: {out['recommended']} (docs/numeric.md, \"Planning\")."]
        if "shuffle" in out:
            lines += _shuffled_numeric_lines(out)
        if out["collected_by"] == "SW":
            fitted = (f", fitted on its {out['e_levels']['count']} declared levels" if out["e_levels"]["step"]
                      is not None else "")
            lines.append(f"This attribute is collected by SW for its distribution and quantiles{fitted}; their error "
                         "is not predicted in closed form (docs/numeric.md).")
        return "\n".join(lines) + "\n"
    find = f"top {out['find']['top_k']}" if "top_k" in out["find"] else f"share ≥ {out['find']['threshold']:g}"
    lines = [f"Discovery of {out['attribute']!r} ({find}; {out['wanted']} values of the prior): "
             f"ε = {out['epsilon']:g}, {out['devices']:,} devices in {out['rounds']} rounds "
             f"({out['devices_per_round']:,.0f} each).",
             f"Emulated {out['trials']} times: recall {out['recall']:.3f} ± {out['recall_se']:.3f}, precision "
             f"{out['precision']:.3f} ± {out['precision_se']:.3f}, F1 {out['f1']:.3f} ± {out['f1_se']:.3f} "
             "(± one standard error over the trials).",
             "Found in each trial, by rank: " + ", ".join(f"{x:.2f}" for x in out["found_by_rank"][:20])
             + (" ..." if len(out["found_by_rank"]) > 20 else "")]
    return "\n".join(lines) + "\n"


def _levels_line(out: dict[str, Any]) -> str:
    """Which levels E is planned over, and so whether it has a bucketing bias."""
    used = out["e_levels"]
    if used["from"] == "step":
        return (f"E is planned over the attribute's {used['count']} levels, every {used['step']:g} from "
                f"{out['range'][0]:g} (its declared step): no bucketing bias.")
    if used["from"] == "prior":
        return f"E is planned over the prior's {used['count']} distinct values as its levels."
    return (f"E is planned over {used['count']} equal buckets of the range (its bucketing bias in the table is at the "
            "prior's values; none without a prior).")


def _shuffled_numeric_lines(out: dict[str, Any]) -> list[str]:
    s = out["shuffle"]
    lines = ["", f"Behind a shuffler (δ = {s['delta']:g}, minimum batch {s['min_batch']:,}, {s['assume_injected']:,} "
                 f"of them assumed injected, shuffler: {s['shuffler']}); target central ε = "
                 f"{s['target_central_epsilon']:g}:", "",
             f"| mechanism | bound | central ε vs analysts at ε0 = {out['epsilon']:g} | vs operator "
             "| ε0 for the target | central ε there | SE of the mean at ε0 | ±95% at ε0 | worst-case SE at ε0 "
             "| plain LDP SE at the target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in s["mechanisms"]:
        analysts, operator = m["against"]["analysts"], m["against"]["operator"]
        lines.append(f"| {m['mechanism']} | {m['bound']} | {analysts['epsilon']:.4g} | {operator['epsilon']:.4g} | "
                     f"{m['epsilon0_for_target']:.4g} | {m['central_epsilon_at_epsilon0']:.4g} | "
                     f"{m['shuffled_se']:.4g} | {1.959963984540054 * m['shuffled_rmse']:.4g} | "
                     f"{m['shuffled_se_worst']:.4g} | {m['plain_ldp_se']:.4g} |")
    withheld = sum(g["below_min_batch"] for g in s["groups"])
    if withheld:
        lines.append(f"\n{withheld} public-key group(s) below the minimum batch would be withheld.")
    lines += ["", f"Recommended behind the shuffler: {s['recommendation']}."]
    return lines


def run_mode(args: argparse.Namespace, text: str) -> int | None:
    """Plan a numeric or discovery collection (the collection file's ``text``) and print it; ``None`` for any other
    collection (the categorical plan)."""
    obj = loads(text, "--collection", "a JSON schema")
    if is_discovery_json(obj):
        out = _discovery(args, DiscoverySchema.from_json(obj))
    else:
        schema = Schema.from_json(obj)
        if schema.numeric is None:
            return None
        out = _numeric(args, schema)
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_render(out))
    return 0
