/**
 * Retries of SubmitReports against an in-process gRPC server (connect-node on 127.0.0.1) that fails
 * streams on purpose: a retry resends exactly the unacknowledged batches, with the same report ids;
 * final statuses are not retried; a server that keeps failing ends in SubmitError after maxAttempts.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { Code, ConnectError, createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { CollectionService, type ReportBatch } from "../src/gen/ldpsynth/v1/collection_pb.js";
import { RetryPolicy } from "../src/retry.js";
import { streamReports, SubmitError } from "../src/node/streamer.js";
import type { Reports } from "../src/reports.js";

/** What the fake server does with a stream: its attempt number, the batches it saw, when it fails. */
let failWith: (attempt: number, batch: ReportBatch) => ConnectError | undefined = () => undefined;
let attempt = 0;
const seen: { attempt: number; sequence: bigint; ids: string }[] = [];
const stored = new Set<string>();

function routes(router: ConnectRouter): void {
  router.service(CollectionService, {
    getCollection() {
      throw new ConnectError("not served here", Code.FailedPrecondition);
    },
    async *submitReports(requests) {
      const mine = ++attempt;
      for await (const batch of requests) {
        const ids = Buffer.from(batch.reportIds).toString("hex");
        seen.push({ attempt: mine, sequence: batch.sequence, ids });
        const failure = failWith(mine, batch);
        if (failure) throw failure;
        let accepted = 0;
        for (let i = 0; i < ids.length; i += 32) {
          if (!stored.has(ids.slice(i, i + 32))) accepted++;
          stored.add(ids.slice(i, i + 32));
        }
        yield { sequence: batch.sequence, accepted, duplicates: batch.reportIds.length / 16 - accepted };
      }
    },
  });
}

const server = http2.createServer(connectNodeAdapter({ routes }));
const sessions = new Set<http2.ServerHttp2Session>();
server.on("session", (session) => sessions.add(session));
let client: ReturnType<typeof createClient<typeof CollectionService>>;

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  client = createClient(CollectionService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
});

after(() => {
  for (const session of sessions) session.destroy();
  server.close();
});

function reports(n: number): Reports {
  return {
    reportIds: globalThis.crypto.getRandomValues(new Uint8Array(16 * n)),
    privateCodes: Array.from({ length: n }, (_, i) => BigInt(i % 5)),
    publicCodes: [],
  };
}

const options = {
  collection: "c",
  mechanismVersion: "E/1",
  capacity: 3,
  timeoutMs: 10_000,
  headers: {},
  retry: new RetryPolicy({ maxAttempts: 3, initialBackoffMs: 1, maxBackoffMs: 5 }),
};

function reset(fail: typeof failWith): void {
  failWith = fail;
  attempt = 0;
  seen.length = 0;
  stored.clear();
}

test("after UNAVAILABLE mid-stream only the unacknowledged batches are resent, with the same ids", async () => {
  reset((n, batch) =>
    n === 1 && batch.sequence === 1n ? new ConnectError("shard restarting", Code.Unavailable) : undefined,
  );
  const result = await streamReports(client, reports(8), options);
  assert.deepEqual(
    [result.sent, result.acknowledged, result.duplicates, result.batches, result.retries],
    [8, 8, 0, 3, 1],
  );
  const first = seen.filter((s) => s.attempt === 1);
  const second = seen.filter((s) => s.attempt === 2);
  assert.deepEqual(first.map((s) => s.sequence).slice(0, 2), [0n, 1n]);
  assert.deepEqual(
    second.map((s) => s.sequence),
    [1n, 2n],
  );
  assert.equal(second[0]!.ids, first[1]!.ids);
});

test("a batch stored before the failure but not acknowledged comes back as duplicates", async () => {
  // The server stores batch 1 and then fails before acknowledging it (a commit whose answer was lost).
  reset((n, batch) => {
    if (n === 1 && batch.sequence === 1n) {
      const ids = Buffer.from(batch.reportIds).toString("hex");
      for (let i = 0; i < ids.length; i += 32) stored.add(ids.slice(i, i + 32));
      return new ConnectError("connection lost", Code.Unavailable);
    }
    return undefined;
  });
  const result = await streamReports(client, reports(6), options);
  assert.deepEqual([result.acknowledged, result.duplicates, result.retries], [3, 3, 1]);
});

test("final statuses are not retried; a server that keeps failing ends in SubmitError after maxAttempts", async () => {
  reset(() => new ConnectError("bad batch", Code.InvalidArgument));
  await assert.rejects(
    streamReports(client, reports(4), options),
    (err: unknown) =>
      err instanceof SubmitError
      && err.status === "INVALID_ARGUMENT"
      && err.attempts === 1
      && err.details === "bad batch",
  );
  reset(() => new ConnectError("down", Code.Unavailable));
  await assert.rejects(
    streamReports(client, reports(4), options),
    (err: unknown) =>
      err instanceof SubmitError
      && err.status === "UNAVAILABLE"
      && err.attempts === 3
      && err.sent === 4
      && err.acknowledged === 0,
  );
  assert.equal(attempt, 3);
});
