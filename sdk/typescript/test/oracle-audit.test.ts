/**
 * The LDP audit (LDP-Auditor, AG24 §4; docs/references.md) against the SDK's oracles as a device runs them
 * (`perturb`, crypto.getRandomValues), as test/ldp-audit.test.ts audits E: N reports of v1 = 0 and N of v2 = 1
 * (k = 2), a distinguishing event, TP and FP its counts, Clopper-Pearson bounds one-sided at ALPHA/2 each,
 * ε̂_lower = ln(TPR_lo / FPR_hi); a violation is ε̂_lower > the card's ε. The events are the tight ones (their
 * TPR/FPR is the oracle's worst ratio, exactly): HR's "b = <1, v1>", OUE's "bit v1 set and bit v2 not",
 * OLH's "z = H_seed(v1) != H_seed(v2)". ALPHA = 1e-6 per cell (the CSPRNG cannot be seeded; never retried). An
 * oracle sampling with the parameters of 1.5·ε while its card claims ε is caught (ε̂ sd about 0.005 at these N,
 * the bound's margin about 5 sd: 1.5 − 0.03 > 1).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  HadamardResponse,
  OptimizedLocalHashing,
  OptimizedUnaryEncoding,
  type FrequencyOracle,
} from "../src/oracles.js";
import { clopperPearson } from "./clopper-pearson.js";

const ALPHA = 1e-6;
const DRAWS = 200_000;
const EPSILON = 1.0;

/** The tight event of each oracle over k = 2, on a report of the sampler `o`. */
function event(o: FrequencyOracle): (r: bigint) => boolean {
  if (o instanceof HadamardResponse) return (r) => r === 2n; // row 1, bit 0 = <1, 0>
  if (o instanceof OptimizedUnaryEncoding) return (r) => r === 1n; // bit 0 set, bit 1 not
  const olh = o as OptimizedLocalHashing;
  return (r) => {
    const seed = Number(r >> BigInt(olh.hashBits));
    const z = Number(r & BigInt(olh.hashRange - 1));
    const h1 = olh.hash.hash(seed, 0);
    return z === h1 && h1 !== olh.hash.hash(seed, 1);
  };
}

/** ε̂_lower of the distinguishing game on `sampler`. */
function epsilonLower(sampler: FrequencyOracle): number {
  const hit = event(sampler);
  const count = (v: bigint): number => sampler.perturb(new Array<bigint>(DRAWS).fill(v)).filter(hit).length;
  const [tprLower] = clopperPearson(count(0n), DRAWS, ALPHA / 2);
  const [, fprUpper] = clopperPearson(count(1n), DRAWS, ALPHA / 2);
  return Math.log(tprLower) - Math.log(fprUpper);
}

const ORACLES: [string, (eps: number) => FrequencyOracle][] = [
  ["HR", (eps) => new HadamardResponse(eps, 2n)],
  ["OUE", (eps) => new OptimizedUnaryEncoding(eps, 2n)],
  ["OLH", (eps) => new OptimizedLocalHashing(eps, 2n)],
];

for (const [name, make] of ORACLES) {
  test(`${name} passes the audit at its card's epsilon (k = 2, N = ${DRAWS})`, () => {
    const oracle = make(EPSILON);
    assert.ok(oracle.epsilon <= EPSILON);
    const lower = epsilonLower(oracle);
    assert.ok(lower <= oracle.epsilon, `ε̂_lower = ${lower} > ${oracle.epsilon}`);
    assert.ok(lower > oracle.epsilon - 0.1, `the event is tight: ε̂_lower = ${lower}`);
  });

  test(`a mis-labelled ${name} (sampling at 1.5·ε, claiming ε) is caught`, () => {
    const claimed = make(EPSILON).epsilon;
    const lower = epsilonLower(make(1.5 * EPSILON));
    assert.ok(lower > claimed, `ε̂_lower = ${lower} <= ${claimed}`);
  });
}
