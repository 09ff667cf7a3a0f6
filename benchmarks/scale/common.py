"""What every part of the scale benchmark shares: the workload (schema, card, methods), progress lines,
and the JSON lines of its child processes."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb

#: The entry point, run again as each child process (--drive, --serve-bare, --worker-run).
SCRIPT = Path(__file__).resolve().parents[1] / "bench_scale.py"
SCHEMA = Schema.from_json({
    "name": "ratings", "epsilon": 1.0,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 99, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
CARD = MechanismCard.for_schema(SCHEMA)
SUBMIT_METHOD = "/" + pb.DESCRIPTOR.services_by_name["CollectionService"].full_name + "/SubmitReports"
BARE_METHOD = "/ldpsynth.bench.Bare/SubmitReports"
#: The bare server's answer to every batch: an ack's size (2 bytes), not parsed from the batch.
BARE_ACK = pb.BatchAck(sequence=0, accepted=10).SerializeToString()
#: Seconds a child process has to answer (warmed up, done).
CLIENT_TIMEOUT = 900.0


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class LineReader:
    """JSON lines of a child's stdout, read with a deadline; its stderr goes to ``log_path``."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path):
        self.proc = proc
        self.log_path = log_path
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def next(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            raise RuntimeError(f"{what}: no answer within {timeout:g} s; {self.tail()}") from None
        if not line:
            raise RuntimeError(f"{what}: the process exited with status {self.proc.wait()}; {self.tail()}")
        return json.loads(line)

    def tail(self) -> str:
        return f"its log ends:\n{self.log_path.read_text(errors='replace')[-3000:]}"
