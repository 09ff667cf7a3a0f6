"""experiments/shuffle_parties.py: the guarantee against the operator before and after pools per public key."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "shuffle_parties.py"


def test_a_small_run_shows_the_stated_guarantee_was_stronger_than_the_real_one_and_now_equals_it(tmp_path):
    """50,000 reports over 5 keys: before, every key's stated ε is below its real one (the fewest reports of the
    key in a pool, never more than the whole group); after, every stored key gets the pool floor, stated and
    real alike, and no key's reports are both stored and waiting for more than one pool."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--reports", "50000", "--keys", "5", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "shuffle_parties.md").is_file() and (tmp_path / "shuffle_parties.png").stat().st_size > 0
    with open(tmp_path / "shuffle_parties.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 10 and sum(int(r["reports"]) for r in rows if r["T"] == "1000") == 50_000
    for r in rows:
        assert float(r["before_stated"]) <= float(r["before_real"])
        assert int(r["before_fewest_in_a_pool"]) <= int(r["reports"])
        assert int(r["after_forwarded"]) + int(r["after_waiting"]) == int(r["reports"])
        assert int(r["after_waiting"]) < 1.25 * int(r["T"]) + 1
    floors = {r["after_stated_and_real"] for r in rows if r["T"] == "1000"}
    assert len(floors) == 1 and float(floors.pop()) < 4.0
