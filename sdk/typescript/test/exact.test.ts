/** The exact arithmetic under the card checks: float64 helpers, e^x comparisons, ln rounded up. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { compareExp, faithfulExp, leastFloatAtLeastLn, ratioAtMostExp } from "../src/exact-exp.js";
import { floatAsFraction, floatBits, nextDown, nextUp, pythonFloorDiv, ratioToFloat, ulp } from "../src/float64.js";

test("ratioToFloat rounds to nearest, ties to even", () => {
  // Below 2^53 both operands are exact floats and IEEE division is correctly rounded: compare.
  let seed = 12345n;
  const next = (): bigint => (seed = (seed * 6364136223846793005n + 1442695040888963407n) % (1n << 64n));
  for (let i = 0; i < 2000; i++) {
    const p = (next() % (1n << 53n)) + 1n;
    const q = (next() % (1n << 53n)) + 1n;
    assert.equal(ratioToFloat(p, q), Number(p) / Number(q), `${p}/${q}`);
  }
  // Ties: 2^53 + 1 is halfway between 2^53 and 2^53 + 2 (goes to even, 2^53); 2^53 + 3 goes up.
  assert.equal(ratioToFloat((1n << 53n) + 1n, 1n), 2 ** 53);
  assert.equal(ratioToFloat((1n << 53n) + 3n, 1n), 2 ** 53 + 4);
  // Just above a tie rounds up, whatever the size of the operands.
  const big = 1n << 60n;
  assert.equal(ratioToFloat(((1n << 53n) + 1n) * big + 1n, big), 2 ** 53 + 2);
  assert.equal(ratioToFloat(469186693326110464n, 4439081879881501344n), 0.10569453459566173); // contract §12
  assert.equal(ratioToFloat(172604138545886560n, 4439081879881501344n), 0.038882846321927754);
});

test("float neighbours, ulp, and exact fractions", () => {
  assert.equal(nextUp(1), 1 + 2 ** -52);
  assert.equal(nextDown(1), 1 - 2 ** -53);
  assert.equal(nextUp(0), 5e-324);
  assert.equal(ulp(1e15), 0.125);
  assert.equal(ulp(Number.MAX_VALUE), 2 ** 971);
  const [p, q] = floatAsFraction(0.75);
  assert.equal(p * 4n, 3n * q);
  assert.deepEqual(floatAsFraction(2 ** 60), [1n << 60n, 1n]);
  assert.deepEqual(floatAsFraction(5e-324), [1n, 1n << 1074n]);
  assert.equal(floatBits(1), "3ff0000000000000");
});

test("Python's float floor division", () => {
  assert.equal(pythonFloorDiv(7, 2), 3);
  assert.equal(pythonFloorDiv(2 ** 62, 3.5), Math.floor(2 ** 62 / 3.5));
  assert.equal(pythonFloorDiv(1, 0.1), 9); // 1 // 0.1 == 9.0 in Python (1/0.1 rounds to 10)
  // Values from CPython: 2**62 // 25.000000000000004, 2**62 // 287.14864255605437.
  assert.equal(pythonFloorDiv(2 ** 62, 1 + 2 ** -52 + 24), 1.8446744073709552e17);
  assert.equal(pythonFloorDiv(2 ** 62, 287.14864255605437), 1.6060274488419842e16);
});

test("compareExp decides exactly, also next to e^x", () => {
  assert.equal(compareExp(1, 2718281828459045n, 10n ** 15n), 1); // e = 2.718281828459045235...
  assert.equal(compareExp(1, 2718281828459046n, 10n ** 15n), -1);
  assert.equal(compareExp(0, 1n, 1n), 0);
  assert.equal(compareExp(5e-324, 1n, 1n), 1); // e^x > 1 for the least x > 0
  assert.equal(compareExp(5e-324, (1n << 60n) + 1n, 1n << 60n), -1);
  assert.equal(compareExp(50, 1n << 62n, 1n), 1);
  // ln 2 = 0.693147180559945309417...; the float Math.LN2 is 0.693147180559945286..., just below it.
  const ln2 = Math.LN2;
  assert.equal(compareExp(ln2, 2n, 1n), -1);
  assert.equal(compareExp(nextUp(ln2), 2n, 1n), 1);
  assert.equal(leastFloatAtLeastLn(2n, 1n), nextUp(ln2));
  assert.ok(ratioAtMostExp(469186693326110464n, 172604138545886560n, 1.0));
  assert.ok(!ratioAtMostExp(469186693326110464n, 172604138545886560n, 0.999999999999999));
  assert.equal(leastFloatAtLeastLn(469186693326110464n, 172604138545886560n), 0.9999999999999991); // contract §12
});

test("faithfulExp brackets e^x by adjacent floats", () => {
  for (const x of [1e-300, 1e-10, 0.5, 1, 5.66, 13.08, 22.08, 40, 45]) {
    const [down, up] = faithfulExp(x);
    assert.equal(up, nextUp(down));
    const [pd, qd] = floatAsFraction(down);
    const [pu, qu] = floatAsFraction(up);
    assert.equal(compareExp(x, pd, qd), 1, `e^${x} > down`);
    assert.equal(compareExp(x, pu, qu), -1, `e^${x} < up`);
  }
});
