/**
 * Retries of SubmitSealed against an in-process shuffler (connect-node on 127.0.0.1) that fails
 * calls on purpose: a retry resends exactly the unacknowledged SealedBatches, byte for byte the
 * same; final statuses are not retried; a shuffler that keeps answering UNAVAILABLE ends in
 * SubmitError after maxAttempts, with what was acknowledged before.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, test } from "node:test";
import { Code, ConnectError, createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { toBinary } from "@bufbuild/protobuf";
import { SealedBatchSchema, type SealedBatch } from "../src/gen/ldpsynth/v1/collection_pb.js";
import { ShufflerService } from "../src/gen/ldpsynth/v1/shuffler_pb.js";
import { RetryPolicy, statusOf } from "../src/retry.js";
import { cutSealedBatches } from "../src/sealed-batching.js";
import { deliverSealed } from "../src/sealed-delivery.js";
import { SubmitError } from "../src/submit-error.js";

const WIDTH = 84;
/** What the fake shuffler does with a call: the call's number, the batch; a failure or an answer. */
let failWith: (call: number, batch: SealedBatch) => ConnectError | undefined = () => undefined;
let calls = 0;
const seen: { sequence: bigint; bytes: string }[] = [];

function routes(router: ConnectRouter): void {
  router.service(ShufflerService, {
    submitSealed(batch) {
      const call = ++calls;
      seen.push({ sequence: batch.sequence, bytes: Buffer.from(toBinary(SealedBatchSchema, batch)).toString("hex") });
      const failure = failWith(call, batch);
      if (failure) throw failure;
      return { sequence: batch.sequence, accepted: batch.reports.length / WIDTH };
    },
  });
}

const server = http2.createServer(connectNodeAdapter({ routes }));
const sessions = new Set<http2.ServerHttp2Session>();
server.on("session", (session) => sessions.add(session));
let client: ReturnType<typeof createClient<typeof ShufflerService>>;

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  client = createClient(ShufflerService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
});

after(() => {
  for (const session of sessions) session.destroy();
  server.close();
});

beforeEach(() => {
  calls = 0;
  seen.length = 0;
  failWith = () => undefined;
});

/** 10 random "sealed reports" in batches of 3 (4 batches). */
function batches(): Map<bigint, SealedBatch> {
  const sealed = globalThis.crypto.getRandomValues(new Uint8Array(10 * WIDTH));
  return cutSealedBatches(sealed, WIDTH, 3, "demo", new Uint8Array(16).fill(7), new Array<bigint>(10).fill(0n));
}

const options = (maxAttempts: number, concurrency = 2) => ({
  timeoutMs: 10_000,
  headers: {},
  statusOf,
  concurrency,
  retry: new RetryPolicy({ maxAttempts, initialBackoffMs: 1, maxBackoffMs: 2 }),
});

test("UNAVAILABLE: only the unacknowledged batches are resent, byte for byte the same", async () => {
  failWith = (call, batch) =>
    call <= 2 && batch.sequence === 1n ? new ConnectError("pool expired", Code.Unavailable) : undefined;
  const all = batches();
  const result = await deliverSealed(client, all, 10, options(3));
  assert.deepEqual(
    [result.sent, result.acknowledged, result.duplicates, result.batches, result.retries],
    [10, 10, 0, 4, 1],
  );
  // Attempt 1: batches 0 and 1 in flight (2 at once); 1 fails, so no further batch is started.
  // Attempt 2: 1, 2 and 3; batch 0, acknowledged, is not sent again.
  assert.deepEqual(
    seen
      .map((s) => s.sequence)
      .slice(0, 2)
      .sort(),
    [0n, 1n],
  );
  assert.deepEqual(
    seen
      .map((s) => s.sequence)
      .slice(2)
      .sort(),
    [1n, 2n, 3n],
  );
  const sends = seen.filter((s) => s.sequence === 1n);
  assert.equal(sends.length, 2);
  assert.equal(sends[1]!.bytes, sends[0]!.bytes);
  assert.equal(sends[0]!.bytes, Buffer.from(toBinary(SealedBatchSchema, all.get(1n)!)).toString("hex"));
});

test("a final status is not retried: SubmitError with the status and what was acknowledged", async () => {
  failWith = (_call, batch) =>
    batch.sequence === 2n ? new ConnectError("other key", Code.FailedPrecondition) : undefined;
  await assert.rejects(
    deliverSealed(client, batches(), 10, options(5, 1)),
    (err) =>
      err instanceof SubmitError
      && err.method === "SubmitSealed"
      && err.status === "FAILED_PRECONDITION"
      && err.attempts === 1
      && err.acknowledged === 6,
  );
  assert.equal(seen.length, 3);
});

test("a shuffler that keeps answering UNAVAILABLE: SubmitError after maxAttempts without progress", async () => {
  failWith = () => new ConnectError("pool expired", Code.Unavailable);
  await assert.rejects(
    deliverSealed(client, batches(), 10, options(3)),
    (err) => err instanceof SubmitError && err.status === "UNAVAILABLE" && err.attempts === 3 && err.acknowledged === 0,
  );
});
