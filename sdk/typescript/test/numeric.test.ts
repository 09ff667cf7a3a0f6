/**
 * conformance/numeric.json: the exact numeric samplers' weights, laws, draws given U, byte streams, ranges, declared
 * levels.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { floatBits, floatFromBits, nextDown } from "../src/float64.js";
import { ratioAtMostExp } from "../src/exact-exp.js";
import { NumericLevels } from "../src/numeric-levels.js";
import { NumericRange, pythonRepr } from "../src/numeric-range.js";
import {
  Duchi,
  HybridMechanism,
  integerWeightCandidates,
  PiecewiseMechanism,
  perturbNumericWithSource,
  roundToGridGiven,
  SlidingWindow,
  SquareWave,
  type GridLaw,
  type IntegerWeights,
  type NumericSampler,
} from "../src/numeric-samplers.js";
import * as sdk from "../src/index.js";
import { ByteStream, cases, fromHex, str, vectors } from "./vectors.js";
import type { JsonObject } from "../src/json.js";

const doc = vectors("numeric.json");

/** SHA-256 of the law's canonical text (conformance/vectors/numeric.py `law_sha256`). */
function lawSha256(law: GridLaw): string {
  const digest = createHash("sha256");
  for (const row of law.weights) digest.update(`${row.join(",")}\n`);
  digest.update(`${law.denominator}\n`);
  return digest.digest("hex");
}

function float(v: unknown): number {
  return floatFromBits(str((v as JsonObject)["bits"]));
}

function weightsOf(c: JsonObject): IntegerWeights {
  return { keep: BigInt(str(c["keep_weight"])), lie: BigInt(str(c["lie_weight"])) };
}

function candidatesHold(eps: number, high: number, low: number, w: IntegerWeights): boolean {
  return integerWeightCandidates(eps, high, low).some((o) => o.keep === w.keep && o.lie === w.lie);
}

/** A one-component case (Duchi or a window) against a sampler built with the reference's weights. */
function checkComponent(id: string, c: JsonObject, s: Duchi | SlidingWindow): void {
  assert.equal(String(s.denominator), c["denominator"], `${id}: denominator`);
  assert.equal(BigInt(s.reports), c["reports"], `${id}: reports`);
  assert.equal(floatBits(s.epsilon), (c["epsilon_delivered"] as JsonObject)["bits"], `${id}: delivered ε`);
  assert.equal(lawSha256(s.law()), c["law_sha256"], `${id}: law`);
  for (const d of c["draws"] as JsonObject[]) {
    assert.equal(BigInt(s.selectGiven(Number(d["input"]), BigInt(str(d["u"])))), d["output"], `${id}: ${str(d["u"])}`);
  }
}

for (const c of cases(doc, "samplers")) {
  const id = str(c["id"]);
  test(`numeric: ${id}`, () => {
    const eps = float(c["epsilon"]);
    const bits = Number(c["grid_bits"]);
    const exact = (c["exp_used"] as JsonObject)["correctly_rounded"] === true;
    const kind = str(c["mechanism"]);
    if (kind === "duchi") {
      const w = weightsOf(c);
      const steps = 2 ** bits;
      assert.ok(candidatesHold(eps, steps, steps, w), "the reference's weights are a candidate");
      if (exact) assert.deepEqual(new Duchi(eps, bits), new Duchi(eps, bits, w));
      checkComponent(id, c, new Duchi(eps, bits, w));
    } else if (kind === "pm" || kind === "sw") {
      const w = weightsOf(c);
      const make = (pinned?: IntegerWeights): SlidingWindow =>
        kind === "pm" ? new PiecewiseMechanism(eps, bits, pinned) : new SquareWave(eps, bits, pinned);
      const s = make(w);
      assert.equal(BigInt(s.window), c["window"], "window");
      assert.equal(BigInt(s.inputs), c["inputs"], "inputs");
      assert.ok(candidatesHold(eps, s.window, s.reports - s.window, w), "the reference's weights are a candidate");
      if (exact) assert.deepEqual(make(), s);
      checkComponent(id, c, s);
    } else {
      const pm = c["pm"] as JsonObject;
      const du = c["duchi"] as JsonObject;
      const h = new HybridMechanism(eps, bits, { pm: weightsOf(pm), duchi: weightsOf(du) });
      if (exact) assert.deepEqual(new HybridMechanism(eps, bits), h);
      assert.equal(String(h.alphaWeight), c["alpha_weight"], "alpha");
      assert.equal(BigInt(h.reports), c["reports"]);
      assert.equal(floatBits(h.epsilon), (c["epsilon_delivered"] as JsonObject)["bits"], "delivered ε");
      checkComponent(`${id}/pm`, pm, h.pm);
      checkComponent(`${id}/duchi`, du, h.duchi);
      if (c["law_sha256"] !== null) {
        const law = h.law();
        assert.equal(String(law.denominator), c["denominator"]);
        assert.equal(lawSha256(law), c["law_sha256"], "the mixture's law");
      }
      for (const d of pm["draws"] as JsonObject[]) {
        assert.equal(BigInt(h.selectGiven(Number(d["input"]), true, BigInt(str(d["u"])))), d["output"]);
      }
      for (const d of du["draws"] as JsonObject[]) {
        const out = h.selectGiven(Number(d["input"]), false, BigInt(str(d["u"])));
        assert.equal(BigInt(out - h.pm.reports), d["output"]);
      }
    }
  });
}

test("numeric: the vectors include platforms' exp off by one ulp, and the SDK still finds their weights", () => {
  const off = cases(doc, "samplers").filter((c) => (c["exp_used"] as JsonObject)["correctly_rounded"] !== true);
  assert.ok(off.length >= 3);
});

test("numeric: input rounding given its 53-bit draw", () => {
  const all = cases(doc, "rounding");
  assert.ok(all.length >= 100);
  for (const r of all) {
    const x = float(r["x"]);
    const points = Number(r["points"]);
    const i = roundToGridGiven(x, points, Number(str(r["draw"])));
    assert.equal(BigInt(i), r["index"], `x=${x} points=${points} draw=${str(r["draw"])}`);
  }
});

function streamSampler(name: string): NumericSampler {
  if (name === "duchi") return new Duchi(1.0);
  if (name === "pm") return new PiecewiseMechanism(1.0);
  if (name === "sw") return new SquareWave(1.0);
  return new HybridMechanism(1.0);
}

test("numeric: one value per call on a given byte stream reads what the reference reads", () => {
  const made = new Map<string, NumericSampler>();
  for (const c of cases(doc, "streams")) {
    const id = str(c["id"]);
    const name = id.split("-")[0]!;
    if (!made.has(name)) made.set(name, streamSampler(name));
    const stream = new ByteStream(fromHex(str(c["random_hex"])));
    const out = perturbNumericWithSource(made.get(name)!, [float(c["x"])], stream.source);
    assert.deepEqual(out.map(BigInt), [c["output"]], id);
    assert.equal(stream.read, stream.data.length, `${id}: every byte of the stream is read`);
  }
});

for (const c of cases(doc, "ranges")) {
  test(`numeric range: ${str(c["id"])}`, () => {
    const lo = floatFromBits(str(c["lo"]));
    const hi = floatFromBits(str(c["hi"]));
    const values = (c["values"] as string[]).map(floatFromBits);
    const error = c["error"] as JsonObject | undefined;
    const run = (): number[] => new NumericRange(lo, hi, str(c["field"])).toUnit(values);
    if (error === undefined) {
      const r = new NumericRange(lo, hi, str(c["field"]));
      assert.equal(floatBits(r.halfWidth), c["half_width"]);
      assert.deepEqual(run().map(floatBits), c["unit"]);
      return;
    }
    assert.throws(run, (err: unknown) => {
      assert.ok(err instanceof ValidationError);
      assert.equal(err.field, error["field"]);
      assert.equal(err.legal, error["legal"]);
      assert.equal(err.position === undefined ? null : BigInt(err.position), error["position"]);
      if (error["position"] !== null) assert.equal(err.message, error["message"]);
      return true;
    });
  });
}

for (const c of cases(doc, "levels")) {
  test(`numeric levels: ${str(c["id"])}`, () => {
    const [lo, hi, step] = [c["lo"], c["hi"], c["step"]].map((b) => floatFromBits(str(b))) as [number, number, number];
    const error = c["error"] as JsonObject | undefined;
    const make = (): NumericLevels => new NumericLevels(lo, hi, step, str(c["field"]));
    if (error !== undefined) {
      assert.throws(make, (err: unknown) => {
        assert.ok(err instanceof ValidationError);
        assert.deepEqual([err.field, err.legal], [error["field"], error["legal"]]);
        return true;
      });
      return;
    }
    const levels = make();
    assert.equal(BigInt(levels.intervals), c["intervals"]);
    assert.equal(levels.count, levels.intervals + 1);
    assert.deepEqual(levels.values.map(floatBits), c["levels"]);
    const values = (c["values"] as string[]).map(floatFromBits);
    assert.deepEqual(
      values.map((v) => BigInt(levels.index(v))),
      c["index"],
    );
  });
}

test("numeric levels: the vectors accept values within 1e-6 step of a level and refuse values just beyond", () => {
  const rating = cases(doc, "levels").find((c) => c["id"] === "rating")!;
  const index = (rating["index"] as bigint[]).map(Number);
  // 3 ± 0.9e-6 on level 2; 3 ± 1.1e-6 off; so the tolerance is tested from both sides.
  assert.deepEqual(index.slice(4, 8), [2, 2, -1, -1]);
  assert.ok(cases(doc, "levels").some((c) => c["error"] === undefined && c["intervals"] === 255n));
  assert.ok(cases(doc, "levels").some((c) => c["id"] === "256-intervals" && c["error"] !== undefined));
});

test("numeric range: Python's repr of a float", () => {
  const expected: [number, string][] = [
    [1e16, "1e+16"],
    [1e-7, "1e-07"],
    [2.5e-5, "2.5e-05"],
    [0.0001, "0.0001"],
    [0.1, "0.1"],
    [123.5, "123.5"],
    [1e15, "1000000000000000.0"],
    [-1.5e300, "-1.5e+300"],
    [5e-324, "5e-324"],
  ];
  for (const [x, text] of expected) assert.equal(pythonRepr(x), text);
});

/** The worst ratio max_i w_iy / min_i w_iy over the law's possible reports, as [p, q]. */
function worstRatio(law: GridLaw): [bigint, bigint] {
  let worst: [bigint, bigint] = [1n, 1n];
  for (let y = 0; y < law.weights[0]!.length; y++) {
    let hi = law.weights[0]![y]!;
    let lo = hi;
    for (const row of law.weights) {
      const w = row[y]!;
      if (w > hi) hi = w;
      if (w < lo) lo = w;
    }
    if (hi === 0n) continue; // impossible from every input (HM's PM cells when α = 0)
    assert.ok(lo > 0n, "a report possible from one input is possible from every input");
    if (hi * worst[1] > worst[0] * lo) worst = [hi, lo];
  }
  return worst;
}

test("numeric: every sampler's law satisfies its delivered ε exactly, and not the float below it", () => {
  const samplers: NumericSampler[] = [0.5, 1, 4].flatMap((eps) => [
    new Duchi(eps, 4),
    new PiecewiseMechanism(eps, 4),
    new SquareWave(eps, 4),
    new HybridMechanism(eps, 4),
  ]);
  for (const s of samplers) {
    const [p, q] = worstRatio(s.law());
    assert.ok(s.epsilon <= s.epsilonRequested);
    assert.ok(ratioAtMostExp(p, q, s.epsilon), "within the delivered ε");
    assert.ok(!ratioAtMostExp(p, q, nextDown(s.epsilon)), "the delivered ε is tight");
  }
  // a sampler built for 1.5 is caught at 1
  const [p, q] = worstRatio(new HybridMechanism(1.5, 4).law());
  assert.ok(!ratioAtMostExp(p, q, 1));
});

test("numeric: weights that are not ε's are refused, naming the field", () => {
  const pm = new PiecewiseMechanism(1.0, 4);
  const bigger = { keep: pm.keep + 1n, lie: pm.lie };
  assert.throws(
    () => new PiecewiseMechanism(1.0, 4, bigger),
    (e: unknown) => e instanceof ValidationError && e.field === "weights",
  );
  const of15 = new PiecewiseMechanism(1.5, 4);
  assert.throws(() => new PiecewiseMechanism(1.0, 4, { keep: of15.keep, lie: of15.lie }), ValidationError);
});

test("numeric: bad inputs are refused before any randomness is drawn, naming the position", () => {
  let calls = 0;
  const source = (n: number): Uint8Array => {
    calls++;
    return new Uint8Array(n);
  };
  for (const bad of [1.5, NaN, -Infinity]) {
    assert.throws(
      () => perturbNumericWithSource(new Duchi(1), [0, bad], source),
      (e: unknown) => e instanceof ValidationError && e.field === "x" && e.position === 1 && !e.message.includes("1.5"),
    );
  }
  assert.equal(calls, 0);
  assert.throws(
    () => new Duchi(1e-16),
    (e: unknown) => e instanceof ValidationError && e.field === "epsilon",
  );
  assert.throws(
    () => new Duchi(1, 21),
    (e: unknown) => e instanceof ValidationError && e.field === "grid_bits",
  );
});

test("numeric: the byte-source hook is not part of the package's API", () => {
  assert.ok(!("perturbNumericWithSource" in sdk));
  assert.equal(typeof sdk.perturbNumeric, "function");
});
