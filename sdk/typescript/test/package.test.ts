/** The package as a consumer imports it (its "exports" map, dist/ with declarations). */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import type { Collection, CollectionInfo, ReportBatch, SealedBatch, Sealing } from "@ldpsynth/sdk";

test("the package exports the device API and not the sampler's byte-source hook", async () => {
  const sdk = await import("@ldpsynth/sdk");
  for (const name of [
    "Schema",
    "MechanismCard",
    "encodeColumns",
    "encodeRows",
    "perturb",
    "newReports",
    "encodeReportBatch",
    "decodeCollection",
    "ValidationError",
  ]) {
    assert.ok(name in sdk, name);
  }
  assert.ok(!("perturbWithSource" in sdk));
  const internal: string = "@ldpsynth/sdk/dist/sampler.js"; // a string, not a literal: tsc would refuse to resolve it
  await assert.rejects(import(internal), (err: NodeJS.ErrnoException) => err.code === "ERR_PACKAGE_PATH_NOT_EXPORTED");
  assert.ok(existsSync(new URL("../../dist/index.d.ts", import.meta.url)), "declarations are built");
});

test("the generated protobuf code stays internal: the messages the API takes or returns are exported as types", async () => {
  const sdk = await import("@ldpsynth/sdk");
  const web = await import("@ldpsynth/sdk/web");
  for (const name of [
    "CollectionService",
    "CollectionSchema",
    "ReportBatchSchema",
    "SealedBatchSchema",
    "SealingSchema",
    "BatchAckSchema",
    "GetCollectionRequestSchema",
    "LimitsSchema",
    "ShuffledAckSchema",
    "file_ldpsynth_v1_collection",
  ]) {
    assert.ok(!(name in sdk) && !(name in web), name);
  }
  // Collection, ReportBatch, SealedBatch and Sealing are named from the package: this compiles only while they are.
  const api: [
    (msg: Collection) => CollectionInfo,
    (...args: Parameters<typeof sdk.reportBatch>) => ReportBatch,
    (...args: Parameters<typeof sdk.sealedBatch>) => SealedBatch,
    (info: CollectionInfo) => Sealing | undefined,
  ] = [sdk.collectionInfo, sdk.reportBatch, sdk.sealedBatch, (info) => info.sealing];
  assert.ok(api.every((f) => typeof f === "function"));
});

test("the core bundles for browsers: nothing of Node in @ldpsynth/sdk (the ledger and client are ./node)", async () => {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [new URL("../../src/index.ts", import.meta.url).pathname],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(!inputs.some((p) => p.includes("src/node/") || p.startsWith("node:")), inputs.join(", "));
  const node = await import("@ldpsynth/sdk/node");
  for (const name of ["FileLedger", "Client", "prepareReports", "SubmitError", "PrivacyBudgetExceeded"]) {
    assert.ok(name in node, name);
  }
});

test("the web entry bundles for browsers: nothing of Node, no connect-node (@ldpsynth/sdk/web)", async () => {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [new URL("../../src/web/index.ts", import.meta.url).pathname],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(
    !inputs.some((p) => p.includes("src/node/") || p.includes("connect-node") || p.startsWith("node:")),
    inputs.join(", "),
  );
  assert.ok(inputs.some((p) => p.includes("@connectrpc/connect-web")));
  const web = await import("@ldpsynth/sdk/web");
  for (const name of [
    "IndexedDbLedger",
    "WebClient",
    "prepareReports",
    "SubmitError",
    "CardChanged",
    "PrivacyBudgetExceeded",
    "encodeRows",
    "MechanismCard",
  ]) {
    assert.ok(name in web, name);
  }
});
