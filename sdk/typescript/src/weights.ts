/**
 * Mechanism E's rational weights (docs/contract.md §4): the keep weight A and the lie weight L of a
 * card, recomputed as the reference's `rational_weights` computes them, and everything a card derives
 * from them, exactly.
 *
 * The reference takes g = exp(min(ε, 45)) from the platform's libm, L = max(1, ⌊2^62 / (g + |D|)⌋)
 * (Python's float floor division) and A = min(⌊float(L) · (g · (1 − 2^−50))⌋, 2^62 − (|D| − 1)·L),
 * then lowers A while ln(A/L) > ε. libm's exp is not always correctly rounded, so the candidates
 * here are the weights from both faithful roundings of e^min(ε, 45) (at most two pairs); the
 * lowering uses the exact comparison A ≤ L·e^ε, never a float.
 */
import { ValidationError } from "./errors.js";
import { faithfulExp, leastFloatAtLeastLn, ratioAtMostExp } from "./exact-exp.js";
import { pythonFloorDiv, ratioToFloat } from "./float64.js";

/** Points of the rational probability space: N = A + (|D| − 1)·L is at most this. */
export const SPACE = 1n << 62n;
/** Relative margin below e^ε when choosing A. */
const MARGIN = 2 ** -50;
/** Largest |D| of the exact sampler (a schema's |D| is at most 2^28 anyway). */
export const MAX_SAMPLER_DOMAIN_SIZE = 1n << 40n;

export interface Weights {
  readonly keepWeight: bigint;
  readonly lieWeight: bigint;
}

/** The reference's weights for ε and |D| given its float g = e^min(ε, 45); undefined if A <= L. */
export function weightsForGrowth(epsilon: number, domainSize: bigint, growth: number): Weights | undefined {
  const lie = BigInt(Math.max(1, pythonFloorDiv(2 ** 62, growth + Number(domainSize))));
  const fromGrowth = BigInt(Math.trunc(Number(lie) * (growth * (1.0 - MARGIN))));
  const cap = SPACE - (domainSize - 1n) * lie;
  let keep = fromGrowth < cap ? fromGrowth : cap;
  while (keep > lie && !ratioAtMostExp(keep, lie, epsilon)) keep -= 1n;
  return keep > lie ? { keepWeight: keep, lieWeight: lie } : undefined;
}

/** The smallest ε from which on the sampler always resolves |D| values (stated in errors). */
function minEpsilon(domainSize: bigint): number {
  return 4 * (MARGIN + (Number(domainSize) + 1) / 2 ** 62);
}

/**
 * Every (A, L) the reference may compute for ε and |D| (one per faithful rounding of e^min(ε, 45),
 * duplicates removed). Throws naming `epsilon` when ε is below the sampler's resolution.
 */
export function weightCandidates(epsilon: number, domainSize: bigint): Weights[] {
  if (!(Number.isFinite(epsilon) && epsilon > 0)) {
    throw new ValidationError("epsilon", "a finite number > 0", "out of range");
  }
  if (domainSize < 2n || domainSize > MAX_SAMPLER_DOMAIN_SIZE) {
    throw new ValidationError("domain_size", `an integer in [2, ${MAX_SAMPLER_DOMAIN_SIZE}]`, "out of range");
  }
  const out: Weights[] = [];
  for (const growth of new Set(faithfulExp(Math.min(epsilon, 45)))) {
    const w = weightsForGrowth(epsilon, domainSize, growth);
    if (w && !out.some((o) => o.keepWeight === w.keepWeight && o.lieWeight === w.lieWeight)) out.push(w);
  }
  if (out.length === 0) {
    throw new ValidationError(
      "epsilon",
      `a finite number >= ${minEpsilon(domainSize).toPrecision(2)} for domain_size `
        + `${domainSize} (the resolution of the exact sampler)`,
      "too small",
    );
  }
  return out;
}

/** What a card derives from A, L and |D|: N, the delivered ε and the float probabilities. */
export interface Derived {
  readonly totalWeight: bigint;
  /** The smallest float >= ln(A/L): the privacy loss of one report, rounded up. */
  readonly epsilon: number;
  readonly keepProbability: number;
  readonly lieProbability: number;
}

export function derive(w: Weights, domainSize: bigint): Derived {
  const totalWeight = w.keepWeight + (domainSize - 1n) * w.lieWeight;
  return {
    totalWeight,
    epsilon: leastFloatAtLeastLn(w.keepWeight, w.lieWeight),
    keepProbability: ratioToFloat(w.keepWeight, totalWeight),
    lieProbability: ratioToFloat(w.lieWeight, totalWeight),
  };
}
