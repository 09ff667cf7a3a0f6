/**
 * Exact one-sided Clopper-Pearson bounds (CP34, docs/references.md) of a binomial proportion, for the LDP
 * audit (ldp-audit.test.ts): the beta quantile by bisection on the regularized incomplete beta
 * I_x(a, b) (continued fraction), and an exact binomial tail sum to check it (no normal approximation).
 */
import { logGamma } from "./chi-square.js";

/** ln B(a, b). */
function logBeta(a: number, b: number): number {
  return logGamma(a) + logGamma(b) - logGamma(a + b);
}

/** The continued fraction of I_x(a, b) (modified Lentz), converging for x < (a + 1)/(a + b + 2). */
function betaFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 1_000_000; m++) {
    const m2 = 2 * m;
    let an = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + an * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    an = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + an * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-16) return h;
  }
  throw new Error(`the incomplete beta did not converge (a=${a}, b=${b}, x=${x})`);
}

/** The regularized incomplete beta I_x(a, b) = P[Beta(a, b) <= x], a, b > 0. */
export function betaI(a: number, b: number, x: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(a * Math.log(x) + b * Math.log1p(-x) - logBeta(a, b));
  return x < (a + 1) / (a + b + 2) ? (front * betaFraction(a, b, x)) / a : 1 - (front * betaFraction(b, a, 1 - x)) / b;
}

/** The q-quantile of Beta(a, b): bisection on x ↦ I_x(a, b) (increasing) down to adjacent floats. */
export function betaQuantile(q: number, a: number, b: number): number {
  let lo = 0;
  let hi = 1;
  for (;;) {
    const mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) return mid;
    if (betaI(a, b, mid) < q) lo = mid;
    else hi = mid;
  }
}

/**
 * One-sided Clopper-Pearson bounds at `level` each: `lower` with P_p[X >= x] = level (the level-quantile of
 * Beta(x, n − x + 1); 0 when x = 0), `upper` with P_p[X <= x] = level (the (1 − level)-quantile of
 * Beta(x + 1, n − x); 1 when x = n).
 */
export function clopperPearson(successes: number, trials: number, level: number): [number, number] {
  if (!(
    Number.isInteger(trials)
    && trials >= 1
    && Number.isInteger(successes)
    && successes >= 0
    && successes <= trials
    && level > 0
    && level < 1
  )) {
    throw new RangeError("clopperPearson needs 0 <= successes <= trials, trials >= 1, 0 < level < 1");
  }
  const x = successes;
  const n = trials;
  const lower = x === 0 ? 0 : betaQuantile(level, x, n - x + 1);
  const upper = x === n ? 1 : betaQuantile(1 - level, x + 1, n - x);
  return [lower, upper];
}

/** P[X >= x] for X ~ Bin(n, p), 0 < p < 1, summed term by term from x up (pmf ratios), to 1e-17 relative. */
export function binomialUpperTail(x: number, n: number, p: number): number {
  if (x <= 0) return 1;
  if (x > n) return 0;
  const logTerm = logGamma(n + 1) - logGamma(x + 1) - logGamma(n - x + 1) + x * Math.log(p) + (n - x) * Math.log1p(-p);
  const odds = p / (1 - p);
  let term = Math.exp(logTerm);
  let sum = term;
  for (let j = x; j < n; j++) {
    term *= ((n - j) / (j + 1)) * odds;
    sum += term;
    if (j > n * p && term < sum * 1e-17) break; // past the mode the terms only shrink
  }
  return sum;
}
