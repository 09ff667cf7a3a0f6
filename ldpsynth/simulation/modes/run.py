"""``ldpsynth simulate --collection FILE``: which mode the file is, which rows its devices hold, and the run.

* a wide collection (a ``"views"`` block): Adult's rows, one device each, the columns of the attributes' names
  (:mod:`.data`);
* a numeric collection (a numeric attribute): Adult's (one device per row) or MovieLens' (one device per user,
  ``rating``) column of the attribute's name, with the public attributes' columns;
* a discovery (a ``"discovery"`` block): one word per device from Debian's word list, Zipf frequencies.

``devices`` devices are drawn (seeded) from the data set, so a run stays small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.simulation.federation import SimulationSettings
from ldpsynth.simulation.modes import data

#: The data sets each mode draws from (the first is the default).
MODE_DATASETS = {"wide": ("adult",), "numeric": ("adult", "movielens"), "discovery": ("words",)}


def mode_of(collection: MechanismCard | WideCard | DiscoverySchema) -> str:
    """``wide``, ``numeric`` or ``discovery``; a :class:`ValidationError` naming ``--collection`` otherwise."""
    if isinstance(collection, WideCard):
        return "wide"
    if isinstance(collection, DiscoverySchema):
        return "discovery"
    if collection.is_numeric:
        return "numeric"
    raise ValidationError("--collection", "a wide, numeric or discovery collection file (an ordinary one is "
                          "simulated with --dataset)", "an ordinary collection")


def _columns(names: list[str], dataset: str, devices: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The named columns of ``devices`` devices drawn from ``dataset`` and each row's device."""
    if dataset == "movielens":
        columns, owner = data.movielens_columns()
    else:
        columns = data.adult_columns()
        owner = np.arange(len(columns["age"]))
    missing = [n for n in names if n not in columns]
    if missing:
        raise ValidationError("--collection", f"attributes named as {dataset}'s columns: {sorted(columns)}",
                              f"no column {missing[0]!r}")
    return data.sample_devices({n: columns[n] for n in names}, owner, devices, seed)


async def simulate_collection(path: Path, dataset: str | None, devices: int, settings: SimulationSettings,
                              vocabulary: int = 300, exponent: float = 1.1) -> dict[str, Any]:
    """Run the collection file at ``path`` (module docstring); the report of its mode."""
    from ldpsynth.aggregator.runtime.config import load_collection

    collection = load_collection(path)
    mode = mode_of(collection)
    dataset = dataset or MODE_DATASETS[mode][0]
    if dataset not in MODE_DATASETS[mode]:
        raise ValidationError("--dataset", f"for a {mode} collection one of {list(MODE_DATASETS[mode])}",
                              f"got {dataset!r}")
    seed = settings.seed
    if isinstance(collection, DiscoverySchema):
        from ldpsynth.simulation.modes.discovery import simulate_discovery

        enc = collection.encoding
        if enc.alphabet is None:
            raise ValidationError("--collection", "a discovery whose string has an alphabet (words are drawn "
                                  "from the list spelled in it)", "utf-8 encoding")
        words = data.zipf_words(enc.alphabet, enc.max_length, vocabulary, devices, exponent, seed)
        return await simulate_discovery(collection, words,
                                        f"{devices} devices, one word each from {data.WORDS_FILE} ({vocabulary} "
                                        f"words, Zipf({exponent:g}), seed {seed})", settings)
    if isinstance(collection, WideCard):
        from ldpsynth.simulation.modes.wide import simulate_wide

        columns, _ = _columns([a.name for a in collection.schema.attributes], dataset, devices, seed)
        return await simulate_wide(collection, columns, f"Adult: {len(columns[collection.schema.attributes[0].name])}"
                                   f" devices (rows drawn with seed {seed}), one row each", settings)
    from ldpsynth.simulation.modes.numeric import simulate_numeric

    columns, owner = _columns([a.name for a in collection.schema.attributes], dataset, devices, seed)
    per = "one row each" if dataset == "adult" else "their ratings"
    return await simulate_numeric(collection, columns, owner, f"{dataset}: {int(owner.max()) + 1} devices (drawn "
                                  f"with seed {seed}), {per}: {len(owner)} rows", settings)
