/** Pearson's chi-square test: the statistic and its p-value (regularized upper incomplete gamma). */

/** ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; relative error below 1e-14). */
export function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = c[0]!;
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Q(a, x) = Γ(a, x)/Γ(a): series below a + 1, Lentz's continued fraction above. */
export function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  const lead = Math.exp(-x + a * Math.log(x) - logGamma(a));
  if (x < a + 1) {
    let sum = 1 / a;
    let term = sum;
    for (let n = 1; n < 10000 && Math.abs(term) > Math.abs(sum) * 1e-16; n++) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - lead * sum;
  }
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 10000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return lead * h;
}

/** The p-value of observed counts against expected ones (every expected count must be >= 5). */
export function chiSquarePValue(counts: readonly number[], expected: readonly number[]): number {
  if (counts.length !== expected.length) throw new Error("one expected count per bin");
  if (Math.min(...expected) < 5) throw new Error("chi-square needs an expected count >= 5 in every bin");
  let stat = 0;
  counts.forEach((o, i) => {
    stat += (o - expected[i]!) ** 2 / expected[i]!;
  });
  return gammaQ((counts.length - 1) / 2, stat / 2);
}
