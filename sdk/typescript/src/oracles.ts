/**
 * The frequency oracles OUE, OLH and HR on the device, exactly as the reference's
 * `ldpsynth.shared.mechanisms` (`oue.py`, `olh.py`, `hadamard.py`) compute their parameters and sample
 * (the draws of oracle-coins.ts, so a byte stream gives the same reports in both SDKs: conformance/oracles.json).
 * A report is one bigint, as the reference's layout keeps it (`registry.layout_of`):
 *
 * - OUE (WBLJ17 §4.3): the k-bit set B, bit v of the integer = value v; B_x = 1 with probability 1/2 and every
 *   other bit with q* = small/2^64, small the least integer with (2^64 − small)/small <= e^ε (`dyadic_split`).
 *   All n·k other bits are drawn first (row-major), then the n true bits.
 * - OLH (WBLJ17 §4.4): seed << s | z, the seed uniform below 2^(2t) (t = ⌈log2 k⌉ field bits), z = H_seed(x)
 *   with probability A/(A + (g − 1)L), else uniform among the g − 1 other buckets (g = 2^s; A, L the
 *   reference's `ratio_weights(ε, 1, g − 1)`; s minimizes (e^ε + g − 1)^2/(g − 1), WBLJ17 eq. 4). Drawn: the n
 *   seeds, the n coins, the n other buckets.
 * - HR: 2j + b, the row j uniform on [1, K) (K = 2^⌈log2 k⌉), b = ⟨j, x⟩ mod 2 kept with probability
 *   big/2^64 (`dyadic_split`), else flipped. Drawn: the n rows, then the n coins.
 *
 * The parameters that the reference derives from a float exp (OLH's s and weights) are computed for both
 * faithful roundings of e^ε, as weights.ts does for E; oracle-card.ts keeps the one the card states.
 */
import { ValidationError } from "./errors.js";
import { faithfulExp, leastFloatAtLeastLn, ratioAtMostExp } from "./exact-exp.js";
import { nextDown, nextUp, pythonFloorDiv } from "./float64.js";
import { fraction, type Fraction } from "./fraction.js";
import { localHash, type LocalHash } from "./gf2.js";
import type { JsonObject } from "./json.js";
import { ArrayCoins } from "./oracle-coins.js";
import { secureRandomBytes, type RandomSource } from "./random.js";
import { SPACE } from "./weights.js";

export const ORACLE_NAMES = ["OUE", "OLH", "HR"] as const;
export type OracleName = (typeof ORACLE_NAMES)[number];

/** Denominator of the dyadic coins (one 64-bit word). */
const DYADIC = 1n << 64n;
/** Relative margin below e^ε when choosing OLH's keep weight (the reference's `_MARGIN`). */
const MARGIN = 2 ** -50;
/** Largest number of OLH hash bits. */
const MAX_HASH_BITS = 10;
/** Cells (rows × a row's width: k for OUE, else 1) sampled per chunk, as the reference chunks. */
const CHUNK_CELLS = 1 << 22;

/** Largest |D| of each oracle (the reference's `max_domain_size`). */
export const ORACLE_MAX_DOMAIN: Record<OracleName, bigint> = { OUE: 1n << 24n, OLH: 1n << 24n, HR: 1n << 26n };

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

const mul = (a: Fraction, b: Fraction): Fraction => fraction(a.num * b.num, a.den * b.den);
const add = (a: Fraction, b: Fraction): Fraction => fraction(a.num * b.den + b.num * a.den, a.den * b.den);
const minus = (a: Fraction): Fraction => fraction(a.den - a.num, a.den); // 1 − a
const rational = (a: Fraction): string => `${a.num}/${a.den}`;

/**
 * `[big, small]`, big + small = 2^64, small the least integer with big/small <= e^ε exactly (the reference's
 * `dyadic_split`); ValidationError naming `epsilon` below the resolution of a 64-bit coin.
 */
export function dyadicSplit(epsilon: number): [bigint, bigint] {
  let small = BigInt(Math.max(1, Math.ceil(2 ** 64 / (1.0 + Math.exp(Math.min(epsilon, 45.0))))));
  while (small > 1n && ratioAtMostExp(DYADIC - small + 1n, small - 1n, epsilon)) small -= 1n;
  while (!ratioAtMostExp(DYADIC - small, small, epsilon)) small += 1n;
  if (small >= DYADIC / 2n) {
    throw new ValidationError("epsilon", "a finite number >= 2^-60 (the resolution of a 64-bit coin)", "too small");
  }
  return [DYADIC - small, small];
}

/** The reference's `ratio_weights(ε, 1, others)` for its float g = e^min(ε, 45); undefined when A <= L. */
function ratioWeights(epsilon: number, others: bigint, growth: number): [bigint, bigint] | undefined {
  const lie = BigInt(Math.max(1, pythonFloorDiv(2 ** 62, growth + Number(others))));
  const fromGrowth = BigInt(Math.trunc(Number(lie) * growth * (1.0 - MARGIN)));
  const cap = SPACE - others * lie;
  let keep = fromGrowth < cap ? fromGrowth : cap;
  while (keep > lie && !ratioAtMostExp(keep, lie, epsilon)) keep -= 1n;
  return keep > lie ? [keep, lie] : undefined;
}

/** The s in [1, min(t, 10)] minimizing (e + 2^s − 1)^2/(2^s − 1), the smaller on a tie, for the float e. */
function hashBitsFor(e: number, fieldBits: number): number {
  let best = 1;
  let bestFactor = Infinity;
  for (let s = 1; s <= Math.min(fieldBits, MAX_HASH_BITS); s++) {
    const g = 2 ** s;
    const factor = (e + g - 1.0) ** 2 / (g - 1.0);
    if (factor < bestFactor || s === 1) [best, bestFactor] = [s, factor];
  }
  return best;
}

/** Check every code before any randomness is drawn (the message names the position, not the value). */
function checkCodes(codes: readonly bigint[], domainSize: bigint): number[] {
  return codes.map((x, i) => {
    if (typeof x !== "bigint" || x < 0n || x >= domainSize) {
      throw new ValidationError("codes", `integer codes in [0, ${domainSize - 1n}]`, "out of range", i);
    }
    return Number(x);
  });
}

/** Little-endian bytes of unsigned integers, `width` bytes each. */
function littleEndian(values: readonly bigint[], width: number): Uint8Array {
  const out = new Uint8Array(width * values.length);
  values.forEach((v, i) => {
    for (let b = 0; b < width; b++, v >>= 8n) out[width * i + b] = Number(v & 0xffn);
  });
  return out;
}

/** The private part of reports on the wire (ReportBatch fields), the reference's `private_to_wire`. */
export interface OracleWire {
  readonly reportBitmaps?: Uint8Array;
  readonly olhSeeds?: Uint8Array;
  readonly olhBuckets?: Uint8Array;
  readonly hadamardReports?: Uint8Array;
}

/** What every oracle offers: its card fields, its sampler and its wire encoding. */
export abstract class FrequencyOracle {
  abstract readonly name: OracleName;
  /** The ε delivered: the least float >= the worst log-ratio of the exact output law. */
  abstract readonly epsilon: number;
  /** Bytes of one report in its compact form (the card's `report_bytes`). */
  abstract readonly reportBytes: number;
  /** Every report is an integer in [reportLow, reportBound) (the reference's `ReportLayout`). */
  abstract readonly reportLow: bigint;
  abstract readonly reportBound: bigint;
  /** Wire bytes of one report's private part, and the number of its bytes fields. */
  abstract readonly wireBytes: number;
  abstract readonly wireColumns: number;

  constructor(
    readonly epsilonRequested: number,
    readonly domainSize: bigint,
  ) {}

  /** The exact p*, q*, π1, π2 of the pure protocol. */
  protected abstract protocol(): [Fraction, Fraction, Fraction, Fraction];
  /** The card's `sampler` block. */
  protected abstract samplerFields(): JsonObject;
  /** Reports of checked codes (numbers below k) drawn from `coins`, one chunk. */
  protected abstract sampleChunk(codes: number[], coins: ArrayCoins): bigint[];
  /** Cells of work per row (sets the chunk size). */
  protected rowWidth(): number {
    return 1;
  }
  abstract wire(reports: readonly bigint[]): OracleWire;

  /** The card's mechanism fields (the reference's `oracle_fields`). */
  fields(): JsonObject {
    const [p, q, pairTrue, pairOther] = this.protocol();
    return {
      epsilon_requested: this.epsilonRequested,
      epsilon: this.epsilon,
      domain_size: this.domainSize,
      protocol: { p: rational(p), q: rational(q), pair_true: rational(pairTrue), pair_other: rational(pairOther) },
      sampler: this.samplerFields(),
      report_bytes: BigInt(this.reportBytes),
    };
  }

  /** Reports of `codes` with words from `source` (the reference's `_sample_chunks`); every code checked first. */
  perturbWithSource(codes: readonly bigint[], source: RandomSource): bigint[] {
    const x = checkCodes(codes, this.domainSize);
    const coins = new ArrayCoins(source);
    const rows = Math.max(1, Math.floor(CHUNK_CELLS / this.rowWidth()));
    let out: bigint[] = [];
    for (let start = 0; start < x.length; start += rows) {
      out = out.concat(this.sampleChunk(x.slice(start, start + rows), coins));
    }
    return out;
  }

  /** Reports of `codes`, drawing only from the platform's CSPRNG (`crypto.getRandomValues`). */
  perturb(codes: readonly bigint[]): bigint[] {
    return this.perturbWithSource(codes, secureRandomBytes);
  }
}

/** Optimized unary encoding (module comment). */
export class OptimizedUnaryEncoding extends FrequencyOracle {
  readonly name = "OUE";
  readonly reportLow = 0n;
  readonly reportBound: bigint;
  readonly big: bigint;
  readonly small: bigint;
  readonly epsilon: number;
  readonly reportBytes: number;
  readonly wireBytes: number;
  readonly wireColumns = 1;

  constructor(epsilonRequested: number, domainSize: bigint) {
    super(epsilonRequested, domainSize);
    [this.big, this.small] = dyadicSplit(epsilonRequested);
    this.epsilon = leastFloatAtLeastLn(this.big, this.small);
    this.reportBytes = this.wireBytes = Math.ceil(Number(domainSize) / 8);
    this.reportBound = 1n << domainSize;
  }

  protected protocol(): [Fraction, Fraction, Fraction, Fraction] {
    const p = fraction(1n, 2n);
    const q = fraction(this.small, DYADIC);
    return [p, q, mul(p, q), mul(q, q)];
  }

  protected samplerFields(): JsonObject {
    return { true_bit: "1/2", other_bit: `${this.small}/${DYADIC}` };
  }

  protected override rowWidth(): number {
    return Number(this.domainSize);
  }

  protected sampleChunk(codes: number[], coins: ArrayCoins): bigint[] {
    const k = Number(this.domainSize);
    const bits = coins.bernoulli(this.small, DYADIC, codes.length * k);
    const truth = coins.bernoulli(1n, 2n, codes.length);
    return codes.map((x, i) => {
      const bytes = new Uint8Array(this.reportBytes);
      for (let v = 0; v < k; v++) if (v === x ? truth[i] : bits[i * k + v]) bytes[v >> 3]! |= 1 << (v & 7);
      let report = 0n;
      for (let b = bytes.length - 1; b >= 0; b--) report = (report << 8n) | BigInt(bytes[b]!);
      return report;
    });
  }

  wire(reports: readonly bigint[]): OracleWire {
    return { reportBitmaps: littleEndian(reports, this.reportBytes) };
  }
}

/** Optimized local hashing (module comment); `growth` is the float e^min(ε, 45) the weights start from. */
export class OptimizedLocalHashing extends FrequencyOracle {
  readonly name = "OLH";
  readonly reportLow = 0n;
  readonly reportBound: bigint;
  readonly fieldBits: number;
  readonly hashBits: number;
  readonly hashRange: number;
  readonly keepWeight: bigint;
  readonly lieWeight: bigint;
  readonly totalWeight: bigint;
  readonly epsilon: number;
  readonly reportBytes: number;
  readonly wireBytes = 8 + 2;
  readonly wireColumns = 2;
  readonly hash: LocalHash;

  constructor(epsilonRequested: number, domainSize: bigint, hashBits?: number, growth?: number) {
    super(epsilonRequested, domainSize);
    this.fieldBits = Math.max(1, bitLength(domainSize - 1n));
    this.hashBits = hashBits ?? hashBitsFor(Math.exp(Math.min(epsilonRequested, 700.0)), this.fieldBits);
    this.hashRange = 2 ** this.hashBits;
    const weights = ratioWeights(
      epsilonRequested,
      BigInt(this.hashRange - 1),
      growth ?? Math.exp(Math.min(epsilonRequested, 45.0)),
    );
    if (weights === undefined) {
      throw new ValidationError("epsilon", "a larger epsilon (the resolution of the exact sampler)", "too small");
    }
    [this.keepWeight, this.lieWeight] = weights;
    this.totalWeight = this.keepWeight + BigInt(this.hashRange - 1) * this.lieWeight;
    this.epsilon = leastFloatAtLeastLn(this.keepWeight, this.lieWeight);
    this.reportBytes = Math.ceil((2 * this.fieldBits + this.hashBits) / 8);
    this.reportBound = 1n << BigInt(2 * this.fieldBits + this.hashBits);
    this.hash = localHash(this.fieldBits, this.hashBits);
  }

  /**
   * Every OLH the reference may compute for ε and k: each faithful rounding of the floats e^ε it starts from (the
   * ones this platform's exp gives first).
   */
  static candidates(epsilon: number, domainSize: bigint): OptimizedLocalHashing[] {
    const t = Math.max(1, bitLength(domainSize - 1n));
    const e = Math.exp(Math.min(epsilon, 700.0));
    const bits = [...new Set([hashBitsFor(e, t), hashBitsFor(nextDown(e), t), hashBitsFor(nextUp(e), t)])];
    const x = Math.min(epsilon, 45.0);
    const growths = [...new Set([Math.exp(x), ...faithfulExp(x)])]; // this platform's exp first
    const out: OptimizedLocalHashing[] = [];
    for (const s of bits) {
      for (const g of growths) {
        try {
          out.push(new OptimizedLocalHashing(epsilon, domainSize, s, g));
        } catch (e) {
          if (!(e instanceof ValidationError)) throw e;
        }
      }
    }
    if (!out.length)
      throw new ValidationError("epsilon", "a larger epsilon (the resolution of OLH's sampler)", "too small");
    return out;
  }

  protected protocol(): [Fraction, Fraction, Fraction, Fraction] {
    const p = fraction(this.keepWeight, this.totalWeight);
    const q = fraction(1n, BigInt(this.hashRange));
    return [p, q, mul(p, q), mul(q, q)];
  }

  protected samplerFields(): JsonObject {
    return {
      hash_family: OLH_HASH_FAMILY,
      field_bits: BigInt(this.fieldBits),
      field_modulus: this.hash.modulus,
      seed_bits: BigInt(2 * this.fieldBits),
      hash_bits: BigInt(this.hashBits),
      hash_range: BigInt(this.hashRange),
      keep_weight: String(this.keepWeight),
      lie_weight: String(this.lieWeight),
      total_weight: String(this.totalWeight),
    };
  }

  protected sampleChunk(codes: number[], coins: ArrayCoins): bigint[] {
    const n = codes.length;
    const seeds = coins.belowBig(1n << BigInt(2 * this.fieldBits), n);
    const keep = coins.bernoulli(this.keepWeight, this.totalWeight, n);
    const other = coins.below(this.hashRange - 1, n);
    return codes.map((x, i) => {
      const hashed = this.hash.hash(Number(seeds[i]!), x);
      const z = keep[i] ? hashed : other[i]! + (other[i]! >= hashed ? 1 : 0);
      return (seeds[i]! << BigInt(this.hashBits)) | BigInt(z);
    });
  }

  wire(reports: readonly bigint[]): OracleWire {
    const s = BigInt(this.hashBits);
    const mask = BigInt(this.hashRange - 1);
    return {
      olhSeeds: littleEndian(
        reports.map((r) => r >> s),
        8,
      ),
      olhBuckets: littleEndian(
        reports.map((r) => r & mask),
        2,
      ),
    };
  }
}

/** What OLH's hash is, on its card (the reference's `OLH_HASH_FAMILY`). */
export const OLH_HASH_FAMILY =
  "seed = (alpha << field_bits) | beta, alpha and beta in GF(2^field_bits) = GF(2)[x]/(field_modulus) "
  + "(bits = coefficients); bucket bit j of value v (j < hash_bits) = Tr(x^j (alpha v + (beta v)^2)), "
  + "Tr the trace to GF(2); docs/contract.md section 5";

/** The Hadamard mechanism (module comment). */
export class HadamardResponse extends FrequencyOracle {
  readonly name = "HR";
  readonly reportLow = 2n;
  readonly reportBound: bigint;
  readonly bits: number;
  readonly size: number;
  readonly big: bigint;
  readonly small: bigint;
  readonly epsilon: number;
  readonly reportBytes: number;
  readonly wireBytes = 4;
  readonly wireColumns = 1;

  constructor(epsilonRequested: number, domainSize: bigint) {
    super(epsilonRequested, domainSize);
    this.bits = Math.max(1, bitLength(domainSize - 1n));
    this.size = 2 ** this.bits;
    [this.big, this.small] = dyadicSplit(epsilonRequested);
    this.epsilon = leastFloatAtLeastLn(this.big, this.small);
    this.reportBytes = Math.ceil((this.bits + 1) / 8);
    this.reportBound = BigInt(2 * this.size);
  }

  protected protocol(): [Fraction, Fraction, Fraction, Fraction] {
    const k = BigInt(this.size);
    const p = fraction(this.big, DYADIC);
    const c = fraction(k / 2n - 1n, k - 1n);
    const q = add(mul(c, p), mul(minus(c), minus(p)));
    const pairOther =
      k >= 4n
        ? mul(add(mul(p, fraction(k / 4n - 1n)), mul(minus(p), fraction(k / 4n))), fraction(1n, k - 1n))
        : mul(q, q);
    return [p, q, mul(p, c), pairOther];
  }

  protected samplerFields(): JsonObject {
    return { size: BigInt(this.size), bits: BigInt(this.bits), keep_bit: `${this.big}/${DYADIC}` };
  }

  protected sampleChunk(codes: number[], coins: ArrayCoins): bigint[] {
    const rows = coins.below(this.size - 1, codes.length).map((r) => 1 + r);
    const keep = coins.bernoulli(this.big, DYADIC, codes.length);
    return codes.map((x, i) => {
      let v = rows[i]! & x;
      let parity = 0;
      for (; v; v &= v - 1) parity ^= 1;
      return BigInt(2 * rows[i]! + (parity ^ (keep[i] ? 0 : 1)));
    });
  }

  wire(reports: readonly bigint[]): OracleWire {
    return { hadamardReports: littleEndian(reports, 4) };
  }
}

/** Every oracle `name` the reference may compute at ε over k codes (one, except OLH near a float tie). */
export function oracleCandidates(name: OracleName, epsilon: number, domainSize: bigint): FrequencyOracle[] {
  if (domainSize < 2n || domainSize > ORACLE_MAX_DOMAIN[name]) {
    throw new ValidationError(
      "domain_size",
      `an integer in [2, ${ORACLE_MAX_DOMAIN[name]}] for ${name}`,
      "out of range",
    );
  }
  if (name === "OUE") return [new OptimizedUnaryEncoding(epsilon, domainSize)];
  if (name === "HR") return [new HadamardResponse(epsilon, domainSize)];
  return OptimizedLocalHashing.candidates(epsilon, domainSize);
}
