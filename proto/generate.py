"""Regenerate the committed protobuf/gRPC code in ldpsynth/shared/wire/ from proto/.

    python proto/generate.py           # write ldpsynth/shared/wire/*_pb2*.py
    python proto/generate.py --check   # exit 1 if regenerating would change anything

protoc names Python modules after the proto path (``ldpsynth/v1/x.proto`` -> ``ldpsynth.v1``);
the generated imports are rewritten to the package the code lives in, ``ldpsynth.shared.wire``.
Needs the pinned ``grpcio-tools`` of the ``[dev]`` extra so that the output is reproducible.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_PACKAGE = "ldpsynth/v1"
OUT = ROOT / "ldpsynth" / "shared" / "wire"


def generate() -> dict[str, str]:
    """Run protoc into a temporary folder; return {file name: rewritten source}."""
    from grpc_tools import protoc  # a dev-only dependency, needed here only

    protos = sorted((PROTO_ROOT / PROTO_PACKAGE).glob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        include = Path(protoc.__file__).parent / "_proto"
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}", *(str(p.relative_to(PROTO_ROOT)) for p in protos)]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        generated = {}
        for path in sorted((Path(tmp) / PROTO_PACKAGE).iterdir()):
            text = path.read_text(encoding="utf-8")
            generated[path.name] = text.replace("from ldpsynth.v1 import", "from ldpsynth.shared.wire import")
        return generated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    generated = generate()
    if args.check:
        stale = [name for name, text in generated.items()
                 if not (OUT / name).exists() or (OUT / name).read_text(encoding="utf-8") != text]
        if stale:
            print(f"generated code is stale: {', '.join(stale)}; run python proto/generate.py", file=sys.stderr)
            return 1
        print(f"generated code is up to date ({len(generated)} files)")
        return 0
    for name, text in generated.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(generated)} files to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
