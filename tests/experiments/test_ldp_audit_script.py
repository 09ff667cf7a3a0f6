"""experiments/ldp_audit.py: the LDP audit's table (both tables, every row, the exit status)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "ldp_audit.py"


def test_a_small_run_writes_both_tables(tmp_path):
    """50,000 draws per input at α = 1e-6 (so that neither a false alarm nor a miss is plausible: exit 0)."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--draws", "50000", "--alpha", "1e-6", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "ldp_audit.md").read_text(encoding="utf-8")
    shipped, _, wrong = text.partition("## Mis-labelled")
    rows = [line for line in shipped.splitlines() if line.startswith("| ") and "---" not in line][1:]
    bad = [line for line in wrong.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 18 and len(bad) == 15
    assert all(line.endswith("| no |") for line in rows) and all(line.endswith("| **yes** |") for line in bad)
    assert "50,000" in rows[0] and "| E | 100 |" in rows[-1]
