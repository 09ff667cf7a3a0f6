/**
 * Exact samplers for one numeric value on [−1, 1] (the reference's `ldpsynth.shared.numeric`:
 * docs/numeric.md): Duchi et al., the Piecewise Mechanism (PM), the Hybrid Mechanism (HM = PM with
 * probability α, else Duchi) and Square Wave (SW). Each rounds its input to a grid point i, then one
 * uniform integer U ∈ [0, W) picks the report, so the law P[y | i] = w_iy / W is a table of integers
 * ({@link GridLaw}), the same table as the reference's for the same ε and grid (conformance/numeric.json).
 *
 * - Weights (`integer_weights`): for `high` weights A and `low` weights L in a space of 2^62,
 *   g = exp(min(ε, 45)), L = max(1, ⌊2^62 / (high·g + low)⌋) (Python's float floor division),
 *   A = min(⌊L·(g(1 − 2^−50))⌋, ⌊(2^62 − low·L)/high⌋), then A is lowered while A/L > e^ε (exact).
 *   The reference takes g from the platform's libm, which is not always correctly rounded: here g is
 *   e^min(ε, 45) correctly rounded by default ({@link integerWeights}), and {@link integerWeightCandidates}
 *   gives the weights of both faithful roundings, so a caller can pin the reference's pair.
 * - Duchi (Wang2019ICDE eq. 3 on the grid): inputs x_i = −1 + 2i/M, i = 0…M; report +B iff
 *   U < iA + (M − i)L, W = M(A + L).
 * - Sliding window (PM, SW): reports j = 0…K − 1, K = n + w − 1 for n inputs; input i has weight A on
 *   the w cells i <= j < i + w and L elsewhere, W = wA + (K − w)L; U < wA gives cell i + ⌊U/A⌋, else
 *   the ⌊(U − wA)/L⌋-th cell outside the window. PM: n = M + 1, w = round(M e^{−ε/2});
 *   SW: n = M buckets, w = round(2bM), b = (εe^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)) (Li2020SIGMOD).
 *   round() is Python's, half to even.
 * - HM (Wang2019ICDE §III-C): α = 1 − e^{−ε/2} above ε* ≈ 0.6094 (eq. 6, 7), else 0, as a multiple
 *   a_α/2^32 of 2^−32; reports: PM's cells, then Duchi's −B, +B as K, K + 1.
 *
 * The device path ({@link perturbNumeric}) draws from `crypto.getRandomValues` only; the draws of one
 * value are those of exact-coins.ts, in the reference's order: the rounding's word, HM's coin, U.
 */
import { ValidationError } from "./errors.js";
import { Coins } from "./exact-coins.js";
import { compareExp, faithfulExp, leastFloatAtLeastLn, ratioAtMostExp } from "./exact-exp.js";
import { floatAsFraction, pythonFloorDiv } from "./float64.js";
import { secureRandomBytes, type RandomSource } from "./random.js";
import { checkEpsilon } from "./validation.js";

/** The probability space: W <= 2^62. */
const SPACE = 1n << 62n;
/** Relative margin below e^ε when choosing A. */
const MARGIN = 2 ** -50;
/** The input rounding's resolution: the up-probability is a multiple of 2^−53. */
export const ROUND_BITS = 53;
/** HM's α is a multiple of 2^−ALPHA_BITS. */
export const ALPHA_BITS = 32;
/** Default grid of PM, HM and Duchi (M = 2^10 steps) and of SW (2^8 buckets). */
export const DEFAULT_GRID_BITS = 10;
export const SW_GRID_BITS = 8;

/** Integer weights A (keep) > L (lie) with A/L <= e^ε exactly. */
export interface IntegerWeights {
  readonly keep: bigint;
  readonly lie: bigint;
}

/** The exact law on the input grid: P[report y | input i] = weights[i][y] / denominator. */
export interface GridLaw {
  readonly weights: bigint[][];
  readonly denominator: bigint;
}

/** Python's round() of a float to an integer: half to even. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** e^x (0 <= x <= 709) correctly rounded to nearest: the faithful rounding nearer to e^x. */
export function correctlyRoundedExp(x: number): number {
  const [down, up] = faithfulExp(x);
  if (down === up) return down;
  const [p1, q1] = floatAsFraction(down);
  const [p2, q2] = floatAsFraction(up);
  // the midpoint (down + up)/2 as a fraction; e^x is irrational, never on it
  const q = q1 > q2 ? q1 : q2;
  const mid = compareExp(x, p1 * (q / q1) + p2 * (q / q2), 2n * q);
  return mid < 0 ? down : up;
}

/** The reference's `integer_weights(ε, high, low)` for its float g = e^min(ε, 45); undefined if A <= L. */
export function integerWeightsForGrowth(
  epsilon: number,
  high: number,
  low: number,
  growth: number,
): IntegerWeights | undefined {
  const lie = BigInt(Math.max(1, pythonFloorDiv(2 ** 62, growth * high + low)));
  const fromGrowth = BigInt(Math.trunc(Number(lie) * (growth * (1.0 - MARGIN))));
  const cap = (SPACE - BigInt(low) * lie) / BigInt(high);
  let keep = fromGrowth < cap ? fromGrowth : cap;
  while (keep > lie && !ratioAtMostExp(keep, lie, epsilon)) keep -= 1n;
  return keep > lie ? { keep, lie } : undefined;
}

function tooSmall(epsilon: number, high: number, low: number): ValidationError {
  const least = 4 * (MARGIN + (high + low) / 2 ** 62);
  return new ValidationError(
    "epsilon",
    `a finite number >= ${least.toPrecision(2)} for ${high} weights A and ${low} weights L `
      + "(the resolution of the exact sampler)",
    `got ${epsilon}`,
  );
}

function checkCounts(high: number, low: number): void {
  if (!Number.isSafeInteger(high) || high < 1 || !Number.isSafeInteger(low) || low < 0) {
    throw new RangeError("integer weights need high >= 1 and low >= 0");
  }
}

/** Every (A, L) the reference may compute (one per faithful rounding of e^min(ε, 45), distinct). */
export function integerWeightCandidates(epsilon: number, high: number, low: number): IntegerWeights[] {
  const eps = checkEpsilon(epsilon);
  checkCounts(high, low);
  const out: IntegerWeights[] = [];
  for (const growth of new Set(faithfulExp(Math.min(eps, 45)))) {
    const w = integerWeightsForGrowth(eps, high, low, growth);
    if (w && !out.some((o) => o.keep === w.keep && o.lie === w.lie)) out.push(w);
  }
  if (out.length === 0) throw tooSmall(eps, high, low);
  return out;
}

/** (A, L) from e^min(ε, 45) correctly rounded: the same on every platform. */
export function integerWeights(epsilon: number, high: number, low: number): IntegerWeights {
  const eps = checkEpsilon(epsilon);
  checkCounts(high, low);
  const w = integerWeightsForGrowth(eps, high, low, correctlyRoundedExp(Math.min(eps, 45)));
  if (!w) throw tooSmall(eps, high, low);
  return w;
}

/** The weights to use: `pinned` if given (it must be one of the candidates), else {@link integerWeights}. */
function chooseWeights(epsilon: number, high: number, low: number, pinned?: IntegerWeights): IntegerWeights {
  if (pinned === undefined) return integerWeights(epsilon, high, low);
  const ok = integerWeightCandidates(epsilon, high, low).some((w) => w.keep === pinned.keep && w.lie === pinned.lie);
  if (!ok) throw new ValidationError("weights", "the integer weights of ε from a faithful exp", "inconsistent");
  return pinned;
}

function checkGridBits(bits: number, high: number): number {
  if (!Number.isSafeInteger(bits) || bits < 1 || bits > high) {
    throw new ValidationError("grid_bits", `an integer in [1, ${high}]`, "out of range");
  }
  return bits;
}

/**
 * The grid index of x ∈ [−1, 1] on `points` points x_i = −1 + 2i/(points − 1), given the rounding's
 * uniform 53-bit draw: t = (x + 1)(points − 1)/2, base = min(⌊t⌋, points − 2), up with probability
 * ⌊(t − base)·2^53⌋ / 2^53 (so E[x_I] = x).
 */
export function roundToGridGiven(x: number, points: number, draw: number): number {
  const steps = points - 1;
  const t = (x + 1.0) * (steps / 2.0);
  const base = Math.min(Math.floor(t), steps - 1);
  const up = Math.floor((t - base) * 2 ** ROUND_BITS);
  return base + (draw < up ? 1 : 0);
}

function roundToGrid(x: number, points: number, coins: Coins): number {
  return roundToGridGiven(x, points, Number(coins.below(1n << BigInt(ROUND_BITS))));
}

/** What every numeric sampler offers. */
export interface NumericSampler {
  readonly epsilonRequested: number;
  /** The delivered ε: the least float >= the law's worst log-ratio (never above the one asked). */
  readonly epsilon: number;
  /** Number of report codes. */
  readonly reports: number;
  /** The exact law on the input grid. */
  law(): GridLaw;
  /** The report of x ∈ [−1, 1] drawn with `coins` (internal: the device path is {@link perturbNumeric}). */
  sample(x: number, coins: Coins): number;
}

/** Duchi et al. on 2^gridBits + 1 input points (module comment). */
export class Duchi implements NumericSampler {
  readonly epsilonRequested: number;
  readonly epsilon: number;
  readonly steps: number;
  readonly keep: bigint;
  readonly lie: bigint;
  readonly denominator: bigint;
  readonly reports = 2;

  constructor(epsilon: number, gridBits = DEFAULT_GRID_BITS, weights?: IntegerWeights) {
    this.epsilonRequested = checkEpsilon(epsilon);
    this.steps = 2 ** checkGridBits(gridBits, 20);
    ({ keep: this.keep, lie: this.lie } = chooseWeights(this.epsilonRequested, this.steps, this.steps, weights));
    this.denominator = BigInt(this.steps) * (this.keep + this.lie);
    this.epsilon = leastFloatAtLeastLn(this.keep, this.lie);
  }

  /** P[+B | i] weight: iA + (M − i)L. */
  private plus(i: number): bigint {
    return BigInt(i) * this.keep + BigInt(this.steps - i) * this.lie;
  }

  /** Report 1 (+B) iff U < iA + (M − i)L, else 0 (−B). */
  selectGiven(i: number, u: bigint): number {
    return u < this.plus(i) ? 1 : 0;
  }

  sample(x: number, coins: Coins): number {
    const i = roundToGrid(x, this.steps + 1, coins);
    return this.selectGiven(i, coins.below(this.denominator));
  }

  law(): GridLaw {
    const weights = Array.from({ length: this.steps + 1 }, (_, i) => {
      const plus = this.plus(i);
      return [this.denominator - plus, plus];
    });
    return { weights, denominator: this.denominator };
  }
}

/** A window of `window` cells of weight A sliding over `inputs` input points (module comment). */
export class SlidingWindow implements NumericSampler {
  readonly epsilonRequested: number;
  readonly epsilon: number;
  readonly inputs: number;
  readonly window: number;
  readonly reports: number;
  readonly keep: bigint;
  readonly lie: bigint;
  readonly denominator: bigint;

  constructor(epsilon: number, inputs: number, window: number, weights?: IntegerWeights) {
    this.epsilonRequested = checkEpsilon(epsilon);
    if (!Number.isSafeInteger(inputs) || inputs < 2) throw new ValidationError("inputs", "an integer >= 2", "");
    if (!Number.isSafeInteger(window) || window < 1) throw new ValidationError("window", "an integer >= 1", "");
    this.inputs = inputs;
    this.window = window;
    this.reports = inputs + window - 1;
    const w = chooseWeights(this.epsilonRequested, window, this.reports - window, weights);
    this.keep = w.keep;
    this.lie = w.lie;
    this.denominator = BigInt(window) * this.keep + BigInt(this.reports - window) * this.lie;
    this.epsilon = leastFloatAtLeastLn(this.keep, this.lie);
  }

  /** U < wA: cell i + ⌊U/A⌋; else the ⌊(U − wA)/L⌋-th cell outside the window. */
  selectGiven(i: number, u: bigint): number {
    const inside = BigInt(this.window) * this.keep;
    if (u < inside) return i + Number(u / this.keep);
    const outside = Number((u - inside) / this.lie);
    return outside < i ? outside : outside + this.window;
  }

  /** The input grid index of x (PM: rounded at random; SW: its bucket). */
  protected index(x: number, coins: Coins): number {
    return roundToGrid(x, this.inputs, coins);
  }

  sample(x: number, coins: Coins): number {
    const i = this.index(x, coins);
    return this.selectGiven(i, coins.below(this.denominator));
  }

  law(): GridLaw {
    const weights = Array.from({ length: this.inputs }, (_, i) =>
      Array.from({ length: this.reports }, (_, j) => (j >= i && j < i + this.window ? this.keep : this.lie)),
    );
    return { weights, denominator: this.denominator };
  }
}

/** PM on 2^gridBits + 1 input points, window round(M e^{−ε/2}) cells. */
export class PiecewiseMechanism extends SlidingWindow {
  readonly steps: number;

  constructor(epsilon: number, gridBits = DEFAULT_GRID_BITS, weights?: IntegerWeights) {
    const eps = checkEpsilon(epsilon);
    const steps = 2 ** checkGridBits(gridBits, 20);
    super(eps, steps + 1, Math.max(1, roundHalfEven(steps * Math.exp(-eps / 2))), weights);
    this.steps = steps;
  }
}

/** SW's half-width b on [0, 1] (Li2020SIGMOD). */
export function squareWaveB(epsilon: number): number {
  const eps = checkEpsilon(epsilon);
  const e = Math.exp(eps);
  return (eps * e - e + 1.0) / (2.0 * e * (e - 1.0 - eps));
}

/** SW with the input bucketed into 2^gridBits buckets (bucket i: [−1 + 2i/M, −1 + 2(i + 1)/M), the last closed). */
export class SquareWave extends SlidingWindow {
  readonly buckets: number;

  constructor(epsilon: number, gridBits = SW_GRID_BITS, weights?: IntegerWeights) {
    const eps = checkEpsilon(epsilon);
    const buckets = 2 ** checkGridBits(gridBits, 16);
    super(eps, buckets, Math.max(1, roundHalfEven(2 * squareWaveB(eps) * buckets)), weights);
    this.buckets = buckets;
  }

  protected override index(x: number): number {
    return Math.min(Math.floor((x + 1.0) * (this.buckets / 2.0)), this.buckets - 1);
  }
}

/** ε* of Wang2019ICDE eq. 6 (≈ 0.6094), computed as the reference computes it. */
export function hybridCrossover(): number {
  const root = Math.sqrt(241.0);
  const low = (6353.0 - 405.0 * root) ** (1 / 3);
  const high = (6353.0 + 405.0 * root) ** (1 / 3);
  return Math.log((-5.0 + 2.0 * low + 2.0 * high) / 27.0);
}

const CROSSOVER = hybridCrossover();

/** HM's probability of PM (eq. 7): 1 − e^{−ε/2} above ε*, else 0. */
export function hybridAlpha(epsilon: number): number {
  const eps = checkEpsilon(epsilon);
  return eps > CROSSOVER ? -Math.expm1(-eps / 2.0) : 0.0;
}

/** HM: PM with probability alphaWeight/2^32, Duchi otherwise, on a shared grid of 2^gridBits + 1 points. */
export class HybridMechanism implements NumericSampler {
  readonly epsilonRequested: number;
  readonly epsilon: number;
  readonly pm: PiecewiseMechanism;
  readonly duchi: Duchi;
  readonly alphaWeight: bigint;
  readonly steps: number;
  readonly reports: number;

  constructor(
    epsilon: number,
    gridBits = DEFAULT_GRID_BITS,
    weights?: { readonly pm?: IntegerWeights; readonly duchi?: IntegerWeights },
  ) {
    this.epsilonRequested = checkEpsilon(epsilon);
    this.pm = new PiecewiseMechanism(this.epsilonRequested, gridBits, weights?.pm);
    this.duchi = new Duchi(this.epsilonRequested, gridBits, weights?.duchi);
    this.alphaWeight = BigInt(roundHalfEven(hybridAlpha(this.epsilonRequested) * 2 ** ALPHA_BITS));
    this.epsilon = this.alphaWeight ? Math.max(this.pm.epsilon, this.duchi.epsilon) : this.duchi.epsilon;
    this.steps = this.pm.steps;
    this.reports = this.pm.reports + 2;
  }

  /** The report of grid input i for the component (PM iff `usePm`) and its U. */
  selectGiven(i: number, usePm: boolean, u: bigint): number {
    return usePm ? this.pm.selectGiven(i, u) : this.pm.reports + this.duchi.selectGiven(i, u);
  }

  sample(x: number, coins: Coins): number {
    const i = roundToGrid(x, this.steps + 1, coins);
    const usePm = coins.bernoulli(this.alphaWeight, 1n << BigInt(ALPHA_BITS));
    return this.selectGiven(i, usePm, coins.below(usePm ? this.pm.denominator : this.duchi.denominator));
  }

  /** The mixture over the common denominator 2^32 W_PM W_D. */
  law(): GridLaw {
    const pm = this.pm.law();
    const du = this.duchi.law();
    const alpha = this.alphaWeight;
    const rest = (1n << BigInt(ALPHA_BITS)) - alpha;
    const left = alpha * du.denominator;
    const right = rest * pm.denominator;
    const weights = pm.weights.map((row, i) => [...row.map((w) => w * left), ...du.weights[i]!.map((w) => w * right)]);
    return { weights, denominator: (1n << BigInt(ALPHA_BITS)) * pm.denominator * du.denominator };
  }
}

/** Check values on [−1, 1] before any randomness is drawn (the error names the position, not the value). */
function checkUnit(values: readonly number[]): void {
  values.forEach((x, i) => {
    if (typeof x !== "number" || !(x >= -1 && x <= 1)) {
      throw new ValidationError("x", "a number in [-1, 1]", "out of range", i);
    }
  });
}

/** The reports of values on [−1, 1] from the words of `source`, value by value (not exported by the package). */
export function perturbNumericWithSource(
  sampler: NumericSampler,
  values: readonly number[],
  source: RandomSource,
): number[] {
  checkUnit(values);
  const coins = new Coins(source);
  return values.map((x) => sampler.sample(x, coins));
}

/** Words read per value, about (the rounding's, HM's coin, U): the size of one CSPRNG call. */
const POOL_BYTES_PER_VALUE = 32;
const MAX_POOL_BYTES = 65536;

/**
 * `source` read `chunk` bytes at a time and handed out in order (one getRandomValues call costs about
 * as much as a whole draw); the bytes left over when the call ends are dropped, never reused.
 */
function pooled(source: RandomSource, chunk: number): RandomSource {
  let pool: Uint8Array = new Uint8Array(0);
  let at = 0;
  return (n: number) => {
    if (at + n > pool.length) {
      pool = source(Math.max(n, chunk));
      at = 0;
    }
    at += n;
    return pool.subarray(at - n, at);
  };
}

/** The reports of values already on [−1, 1] (NumericRange.toUnit), from the platform's CSPRNG only. */
export function perturbNumeric(sampler: NumericSampler, values: readonly number[]): number[] {
  const chunk = Math.min(MAX_POOL_BYTES, POOL_BYTES_PER_VALUE * Math.max(1, values.length));
  return perturbNumericWithSource(sampler, values, pooled(secureRandomBytes, chunk));
}
