/**
 * The LDP audit (LDP-Auditor, AG24 §4; docs/references.md) against the SDK's mechanism E as a device runs
 * it: `perturb`, drawing from crypto.getRandomValues. N reports of v1 = 0 and N of v2 = k − 1; the
 * distinguishing event "the report is v1"; TP and FP its counts; Clopper-Pearson bounds (CP34) one-sided
 * at ALPHA/2 each (clopper-pearson.ts); ε̂_lower = ln(TPR_lo / FPR_hi). A violation is ε̂_lower > the
 * claimed ε. The same audit as ldpsynth/shared/audit.py (tests/shared/test_ldp_audit.py).
 *
 * The CSPRNG cannot be seeded: each audit is a statistical test at a stated level, never retried. At
 * AG24's α = 0.01 a correct E at ε = 4 would fail about 0.4 % of runs (its TPR/FPR is exactly e^ε), so
 * each cell here runs at ALPHA = 1e-6: the exact false-alarm probabilities of the four passing cells
 * (ldpsynth.shared.audit.audit_power at their exact TPR and FPR) add up to 2.0e-7. The mis-labelled E
 * (the weights of 1.5·ε, claiming ε) is caught with a computed power above 1 − 1e-14 in each cell (the
 * miss probability is below the float resolution of the computation).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ratioAtMostExp } from "../src/exact-exp.js";
import { perturb, type SamplerWeights } from "../src/sampler.js";
import { derive, weightCandidates } from "../src/weights.js";
import { binomialUpperTail, clopperPearson } from "./clopper-pearson.js";

const ALPHA = 1e-6;
const DRAWS = 200_000;
const SMALL_K = 5;

interface Mechanism extends SamplerWeights {
  /** The ε its card claims. */
  readonly epsilon: number;
}

/** E at `epsilon` over `domainSize` codes, as the SDK computes a card's weights. */
function mechanismE(epsilon: number, domainSize: number): Mechanism {
  const k = BigInt(domainSize);
  const w = weightCandidates(epsilon, k)[0]!;
  const d = derive(w, k);
  return {
    domainSize: k,
    keepWeight: w.keepWeight,
    lieWeight: w.lieWeight,
    totalWeight: d.totalWeight,
    epsilon: d.epsilon,
  };
}

/** E whose weights are those of 1.5·ε while it claims ε. */
function mislabelled(epsilon: number, domainSize: number): Mechanism {
  return { ...mechanismE(1.5 * epsilon, domainSize), epsilon };
}

interface AuditResult {
  truePositives: number;
  falsePositives: number;
  epsilonHat: number;
  epsilonLower: number;
  violation: boolean;
}

function countOf(outputs: readonly bigint[], value: bigint): number {
  let n = 0;
  for (const y of outputs) if (y === value) n++;
  return n;
}

/** The distinguishing game on the shipped sampler (`perturb`, crypto.getRandomValues). */
function audit(m: Mechanism, draws: number, alpha: number): AuditResult {
  const v1 = 0n;
  const v2 = m.domainSize - 1n;
  const tp = countOf(perturb(m, new Array<bigint>(draws).fill(v1)), v1);
  const fp = countOf(perturb(m, new Array<bigint>(draws).fill(v2)), v1);
  const [tprLower] = clopperPearson(tp, draws, alpha / 2);
  const [, fprUpper] = clopperPearson(fp, draws, alpha / 2);
  const epsilonLower = Math.log(tprLower) - Math.log(fprUpper);
  return {
    truePositives: tp,
    falsePositives: fp,
    epsilonHat: Math.log(tp) - Math.log(fp),
    epsilonLower,
    violation: epsilonLower > m.epsilon,
  };
}

/** The delta-method sd of ε̂ = ln(TP/FP): sqrt((1−TPR)/(N TPR) + (1−FPR)/(N FPR)), TPR = A/N, FPR = L/N. */
function epsilonHatSd(m: Mechanism, draws: number): number {
  const tpr = Number(m.keepWeight) / Number(m.totalWeight);
  const fpr = Number(m.lieWeight) / Number(m.totalWeight);
  return Math.sqrt((1 - tpr) / (draws * tpr) + (1 - fpr) / (draws * fpr));
}

const CELLS: [number, number, number][] = [
  [0.5, SMALL_K, DRAWS],
  [1.0, SMALL_K, DRAWS],
  [4.0, SMALL_K, DRAWS],
  [1.0, 100, 1_000_000],
];

for (const [eps, k, draws] of CELLS) {
  test(`E passes the audit: eps=${eps}, |D|=${k}, N=${draws}`, () => {
    const m = mechanismE(eps, k);
    assert.ok(ratioAtMostExp(m.keepWeight, m.lieWeight, m.epsilon), "A/L <= e^ε exactly");
    const r = audit(m, draws, ALPHA);
    assert.ok(!r.violation, `ε̂_lower = ${r.epsilonLower} > ${m.epsilon} (ε̂ = ${r.epsilonHat})`);
    assert.ok(r.epsilonLower < r.epsilonHat);
    // ε̂ within 6 of its standard deviations of ln(A/L) = the claimed ε.
    const sd = epsilonHatSd(m, draws);
    assert.ok(Math.abs(r.epsilonHat - m.epsilon) < 6 * sd, `ε̂ = ${r.epsilonHat}, ε = ${m.epsilon}, sd ${sd}`);
  });
}

for (const eps of [0.5, 1.0, 4.0]) {
  test(`a mis-labelled E (the weights of 1.5·ε) is caught: eps=${eps}`, () => {
    const m = mislabelled(eps, SMALL_K);
    assert.ok(!ratioAtMostExp(m.keepWeight, m.lieWeight, m.epsilon), "the exact check fails it too");
    const r = audit(m, DRAWS, ALPHA);
    assert.ok(r.violation, `ε̂_lower = ${r.epsilonLower} <= ${eps} (ε̂ = ${r.epsilonHat})`);
    assert.ok(Math.abs(r.epsilonHat - 1.5 * eps) < 6 * epsilonHatSd(m, DRAWS), `ε̂ = ${r.epsilonHat}`);
  });
}

test("the Clopper-Pearson bounds are scipy's and solve their defining equations", () => {
  // [x, n, level, lower, upper] from scipy.stats.beta.ppf (ldpsynth.shared.audit.clopper_pearson).
  const reference: [number, number, number, number, number][] = [
    [0, 1, 0.005, 0.0, 0.995],
    [1, 100, 0.005, 5.0124161977656416e-5, 0.0719576824016363],
    [37, 100, 0.005, 0.24948706677473803, 0.5032412033347486],
    [100, 100, 0.005, 0.948395970375896, 1.0],
    [12345, 1000000, 5e-7, 0.01181228998869424, 0.012893614470420077],
    [61000, 200000, 5e-7, 0.29997758024766885, 0.31005419822236996],
    [3400, 200000, 5e-7, 0.015622715487904438, 0.018456138112333202],
    [199990, 200000, 5e-7, 0.999823084337934, 0.9999940944062236],
  ];
  for (const [x, n, level, lower, upper] of reference) {
    const [lo, hi] = clopperPearson(x, n, level);
    assert.ok(Math.abs(lo - lower) <= 1e-9 * lower, `lower(${x}, ${n}) = ${lo}, scipy ${lower}`);
    assert.ok(Math.abs(hi - upper) <= 1e-9 * upper, `upper(${x}, ${n}) = ${hi}, scipy ${upper}`);
    // The exact binomial tails at the bounds are the level: P_lo[X >= x] and P_hi[X <= x].
    if (x > 0) assert.ok(Math.abs(binomialUpperTail(x, n, lo) / level - 1) < 1e-8, `tail at lower(${x}, ${n})`);
    if (x < n) assert.ok(Math.abs(binomialUpperTail(n - x, n, 1 - hi) / level - 1) < 1e-8, `tail at upper(${x}, ${n})`);
  }
  assert.throws(() => clopperPearson(3, 2, 0.01), RangeError);
});
