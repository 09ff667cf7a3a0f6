"""Rebuild the language-neutral conformance vectors in conformance/ from the Python reference.

    python conformance/generate.py           # write conformance/*.json
    python conformance/generate.py --check   # exit 1 if rebuilding would change any file

Every expected value is computed by the reference (ldpsynth.shared and ldpsynth.client); only the
inputs are chosen, one module of conformance/vectors/ per file (imported from this script's folder).
Deterministic: the byte streams come from seeded ``random.Random`` generators, never from the OS.
conformance/README.md says what each file holds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from vectors.cards import card_vectors
from vectors.collections import collection_vectors
from vectors.encoding import encoding_vectors
from vectors.errors import error_vectors
from vectors.numeric import numeric_vectors
from vectors.oracles import oracle_vectors
from vectors.samplers import sampler_vectors
from vectors.sealed import sealed_vectors
from vectors.wide import wide_vectors
from vectors.wire import wire_vectors

HERE = Path(__file__).resolve().parent


def build() -> dict[str, str]:
    """{file name: text} of every vector file."""
    files = {"encoding.json": encoding_vectors(), "errors.json": error_vectors(), "cards.json": card_vectors(),
             "sampler.json": sampler_vectors(), "wire.json": wire_vectors(), "sealed.json": sealed_vectors(),
             "wide.json": wide_vectors(), "oracles.json": oracle_vectors(),
             "numeric.json": numeric_vectors(), "collections.json": collection_vectors()}
    return {name: json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n" for name, doc in files.items()}


def stale(built: Mapping[str, str]) -> list[str]:
    return [name for name, text in built.items()
            if not (HERE / name).exists() or (HERE / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    built = build()
    if args.check:
        names = stale(built)
        if names:
            print(f"conformance vectors are stale: {', '.join(names)}; run python conformance/generate.py",
                  file=sys.stderr)
            return 1
        print(f"conformance vectors are up to date ({len(built)} files)")
        return 0
    for name, text in built.items():
        (HERE / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(built)} files to conformance/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
