"""The LDP audit's table (LDP-Auditor, AG24 §4): ε̂ and ε̂_lower of every mechanism on the device path.

Each mechanism, built as a card builds it (``make_mechanism``), is audited by ``ldpsynth.shared.audit.audit``:
N reports of input 0 and N of input k − 1 from its ``perturb_secure`` (the OS CSPRNG, as on a device:
not seeded, so the numbers change from run to run within their Monte Carlo error), the distinguishing
event "0 in the report's support and k − 1 not", Clopper-Pearson bounds one-sided at α/2 each. A second
table audits *mis-labelled* mechanisms: each one's probabilities are those of 1.5·ε while it claims ε,
the kind of error the audit exists to catch. "event's exact ε" is ln(TPR/FPR) computed exactly from
the mechanism's law (what ε̂ estimates; the claimed ε itself for every correct mechanism).

Writes ``ldp_audit.md`` to ``--out`` (default ``experiments/results/ldp_audit``); exits 1 when a
mechanism as shipped shows a violation or a mis-labelled one does not (each has probability at most α,
resp. one minus the audit's power: ``tests/shared/test_ldp_audit.py``), 0 otherwise.

    python experiments/ldp_audit.py [--draws 1000000] [--alpha 0.01] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ldpsynth.shared import audit
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import MECHANISMS, ORACLES, Mechanism, make_mechanism

RESULTS = Path(__file__).resolve().parent / "results" / "ldp_audit"
EPSILONS = (0.5, 1.0, 4.0)
#: Every mechanism at this domain size; E also at LARGE_K.
SMALL_K, LARGE_K = 8, 100
#: The mis-labelled mechanisms' probabilities are those of FACTOR times the ε they claim.
FACTOR = 1.5


def mislabelled(name: str, epsilon: float, domain_size: int, factor: float = FACTOR) -> Mechanism:
    """Mechanism ``name`` whose probabilities are those of ``factor * epsilon`` while it claims ``epsilon``."""
    mechanism: Mechanism = (MechanismE(factor * epsilon, domain_size) if name == "E"
                            else ORACLES[name](factor * epsilon, domain_size))
    mechanism.epsilon = epsilon
    return mechanism


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=audit.DEFAULT_DRAWS, help="reports per input (N)")
    parser.add_argument("--alpha", type=float, default=audit.DEFAULT_ALPHA, help="the audit's level")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def show(result: audit.AuditResult) -> None:
        print(f"{result.mechanism:>3} k={result.domain_size:<4} eps={result.claimed_epsilon:<6.4g} "
              f"eps_hat={result.epsilon_hat:.4f} eps_lower={result.epsilon_lower:.4f} "
              f"violation={result.violation}", file=sys.stderr)

    correct = [make_mechanism(name, eps, SMALL_K) for eps in EPSILONS for name in MECHANISMS]
    correct += [make_mechanism("E", eps, LARGE_K) for eps in EPSILONS]
    wrong = [mislabelled(name, eps, SMALL_K) for eps in EPSILONS for name in MECHANISMS]
    rows = audit.audit_table(correct, args.draws, args.alpha, show)
    bad_rows = audit.audit_table(wrong, args.draws, args.alpha, show)
    seconds = time.perf_counter() - started
    text = (f"# LDP audit (LDP-Auditor, AG24 §4)\n\n"
            f"`python experiments/ldp_audit.py --draws {args.draws} --alpha {args.alpha:g}`: device path "
            f"(`perturb_secure`, OS CSPRNG), inputs v1 = 0 and v2 = k − 1, event \"v1 in the report's support, "
            f"v2 not\", Clopper-Pearson bounds one-sided at α/2 = {args.alpha / 2:g} each; a violation is "
            f"ε̂_lower > claimed ε ({seconds:.0f} s).\n\n"
            f"## The mechanisms as shipped\n\n{audit.markdown_table(rows)}\n"
            f"## Mis-labelled: the probabilities of {FACTOR:g}·ε, claiming ε\n\n{audit.markdown_table(bad_rows)}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ldp_audit.md").write_text(text, encoding="utf-8")
    print(text)
    missed = [r for r, _ in bad_rows if not r.violation]
    false_alarms = [r for r, _ in rows if r.violation]
    return 1 if missed or false_alarms else 0


if __name__ == "__main__":
    sys.exit(main())
