/**
 * OLH's public hash family (the reference's `ldpsynth.shared.mechanisms.olh`; docs/contract.md §5), built
 * exactly as the reference builds it: GF(2^t) = GF(2)[x]/(f), f the least irreducible binary polynomial of
 * degree t (Rabin's test: f | x^(2^t) − x and gcd(f, x^(2^(t/r)) − x) = 1 for every prime r of t), and for
 * each hash bit j < s the GF(2)-linear map ρ_j of the seed (α << t) | β:
 * ρ_j(seed) = L_{x^j}(α) ⊕ L_{√(x^j)}(β), where L_c(y) is the word m with Tr(c·y·v) = |v ∧ m| mod 2.
 * Bucket bit j of value v is then |v ∧ ρ_j(seed)| mod 2, i.e. Tr(x^j (α v + (β v)^2)).
 *
 * The field arithmetic runs once per card, on bigints; hashing a report reads byte tables of plain numbers.
 */

function bitLength(a: bigint): number {
  return a === 0n ? 0 : a.toString(2).length;
}

function polyMod(a: bigint, f: bigint): bigint {
  const degree = bitLength(f);
  while (bitLength(a) >= degree) a ^= f << BigInt(bitLength(a) - degree);
  return a;
}

function polyMulMod(a: bigint, b: bigint, f: bigint): bigint {
  let product = 0n;
  while (b) {
    if (b & 1n) product ^= a;
    b >>= 1n;
    a <<= 1n;
  }
  return polyMod(product, f);
}

function polyGcd(a: bigint, b: bigint): bigint {
  while (b) [a, b] = [b, polyMod(a, b)];
  return a;
}

function primeFactors(n: number): number[] {
  const out: number[] = [];
  for (let p = 2; p <= n; p++) {
    let prime = true;
    for (let d = 2; d < p; d++) if (p % d === 0) prime = false;
    if (prime && n % p === 0) out.push(p);
  }
  return out;
}

/** The least irreducible binary polynomial of `degree` (bits = coefficients), by Rabin's test. */
export function irreduciblePolynomial(degree: number): bigint {
  for (let f = (1n << BigInt(degree)) | 1n; f < 1n << BigInt(degree + 1); f += 2n) {
    const frobenius = [polyMod(2n, f)]; // x^(2^i) mod f, i = 0 .. degree
    for (let i = 0; i < degree; i++) frobenius.push(polyMulMod(frobenius[i]!, frobenius[i]!, f));
    if (frobenius[degree] !== frobenius[0]) continue;
    if (primeFactors(degree).every((r) => polyGcd(f, frobenius[degree / r]! ^ frobenius[0]!) === 1n)) return f;
  }
  throw new Error(`no irreducible polynomial of degree ${degree}`); // impossible: one exists for every degree
}

/** GF(2^t) as GF(2)[x]/(f), f the least irreducible polynomial of degree t. */
class BinaryField {
  readonly modulus: bigint;
  private readonly traceMask: bigint;

  constructor(readonly bits: number) {
    this.modulus = irreduciblePolynomial(bits);
    let mask = 0n;
    for (let i = 0; i < bits; i++) mask |= this.traceSlow(1n << BigInt(i)) << BigInt(i);
    this.traceMask = mask;
  }

  mul(a: bigint, b: bigint): bigint {
    return polyMulMod(a, b, this.modulus);
  }

  /** Tr(y) = Σ_{i<t} y^(2^i), by squaring. */
  private traceSlow(y: bigint): bigint {
    let total = 0n;
    let term = y;
    for (let i = 0; i < this.bits; i++) {
      total ^= term;
      term = this.mul(term, term);
    }
    return total;
  }

  /** Tr(y): the parity of y ∧ the trace mask (Tr is linear). */
  private trace(y: bigint): bigint {
    let bits = y & this.traceMask;
    let out = 0n;
    for (; bits; bits >>= 1n) out ^= bits & 1n;
    return out;
  }

  /** The word m_c with Tr(c·y) = |y ∧ m_c| mod 2 for every y. */
  traceForm(c: bigint): number {
    let m = 0n;
    for (let i = 0; i < this.bits; i++) m |= this.trace(this.mul(c, 1n << BigInt(i))) << BigInt(i);
    return Number(m);
  }

  /** √y = y^(2^(t−1)): t − 1 squarings. */
  sqrt(y: bigint): bigint {
    for (let i = 1; i < this.bits; i++) y = this.mul(y, y);
    return y;
  }
}

/** A GF(2)-linear map of words of up to 48 bits to words of up to 24 bits, by byte tables (the reference's `LinearMap`). */
class LinearMap {
  private readonly tables: Uint32Array[] = [];

  /** `columns[m]`: the image of the word with only bit m set. */
  constructor(columns: readonly number[]) {
    for (let start = 0; start < columns.length; start += 8) {
      const table = new Uint32Array(256);
      columns.slice(start, start + 8).forEach((column, m) => {
        for (let b = 0; b < 256; b++) if (b & (1 << m)) table[b] = table[b]! ^ column;
      });
      this.tables.push(table);
    }
  }

  /** The image of `word` (an integer below 2^53). */
  apply(word: number): number {
    let out = 0;
    for (const table of this.tables) {
      out ^= table[word % 256]!;
      word = Math.floor(word / 256);
    }
    return out;
  }
}

function parity(x: number): number {
  x ^= x >>> 16;
  x ^= x >>> 8;
  x ^= x >>> 4;
  x ^= x >>> 2;
  x ^= x >>> 1;
  return x & 1;
}

/** The hash family of OLH with t field bits and s hash bits (module comment). */
export class LocalHash {
  /** The field's modulus (the card's `field_modulus`). */
  readonly modulus: bigint;
  private readonly rho: LinearMap[] = [];

  constructor(
    readonly fieldBits: number,
    readonly hashBits: number,
  ) {
    const field = new BinaryField(fieldBits);
    this.modulus = field.modulus;
    for (let j = 0; j < hashBits; j++) {
      const theta = 1n << BigInt(j);
      const root = field.sqrt(theta);
      const beta: number[] = [];
      const alpha: number[] = [];
      for (let m = 0; m < fieldBits; m++) {
        beta.push(field.traceForm(field.mul(root, 1n << BigInt(m))));
        alpha.push(field.traceForm(field.mul(theta, 1n << BigInt(m))));
      }
      this.rho.push(new LinearMap([...beta, ...alpha]));
    }
  }

  /** H_seed(code): bucket bit j is |code ∧ ρ_j(seed)| mod 2 (seed below 2^(2t), code below 2^t). */
  hash(seed: number, code: number): number {
    let out = 0;
    this.rho.forEach((map, j) => (out |= parity(code & map.apply(seed)) << j));
    return out;
  }
}

const HASHES = new Map<string, LocalHash>();

/** The hash family of t field bits and s hash bits, built once per (t, s) (the field setup runs on bigints). */
export function localHash(fieldBits: number, hashBits: number): LocalHash {
  const key = `${fieldBits},${hashBits}`;
  let out = HASHES.get(key);
  if (out === undefined) HASHES.set(key, (out = new LocalHash(fieldBits, hashBits)));
  return out;
}
