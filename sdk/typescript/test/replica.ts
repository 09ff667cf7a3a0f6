/**
 * A real aggregator replica for the tests: `ldpsynth aggregator serve` from the repository's .venv (or
 * `$LDPSYNTH_BIN`) on 127.0.0.1, port 0, with a web port; stopped by its pid (SIGTERM, then SIGKILL).
 * Any other server of the CLI (`ldpsynth shuffler serve`) starts the same way (startServer).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  HadamardResponse,
  OptimizedLocalHashing,
  OptimizedUnaryEncoding,
  type FrequencyOracle,
} from "../src/oracles.js";

const ROOT = new URL("../../../../", import.meta.url).pathname;
export const BIN = process.env["LDPSYNTH_BIN"] ?? join(ROOT, ".venv", "bin", "ldpsynth");
/** Why the tests that need a replica are skipped, or false when they can run. */
export const NO_REPLICA: string | false = existsSync(BIN) ? false : `${BIN} is missing (run make env)`;

export interface Replica {
  readonly address: string;
  /** `http://127.0.0.1:PORT` of the web port. */
  readonly webUrl: string;
  readonly process: ChildProcess;
  /** SIGTERM, then SIGKILL after 60 s; resolves to the exit code. */
  stop(): Promise<number | null>;
  kill(): Promise<void>;
}

/** A server process of the .venv's `ldpsynth` (a replica, a shuffler), once its JSON "listening" line is out. */
export interface Server {
  /** The listening line: `address` (HOST:PORT), and a replica's `web_address`. */
  readonly listening: { address: string; web_address?: string };
  readonly process: ChildProcess;
  /** SIGTERM, then SIGKILL after 60 s; resolves to the exit code. Bound to this server (no `this`). */
  readonly stop: () => Promise<number | null>;
  readonly kill: () => Promise<void>;
}

/** Start `ldpsynth ...args` and wait (up to 180 s) for its listening line; stopped by its pid. */
export async function startServer(args: readonly string[]): Promise<Server> {
  const proc = spawn(BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  const listening = await new Promise<{ address: string; web_address?: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 180 s: ${stderr}`)), 180_000);
    let out = "";
    proc.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n").find((l) => l.includes('"listening"'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line) as { address: string; web_address?: string });
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with ${code}: ${stderr}`));
    });
  });
  return {
    listening,
    process: proc,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill("SIGTERM");
      const timeout = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 60_000).unref());
      if ((await Promise.race([exited, timeout])) === "timeout") proc.kill("SIGKILL");
      return exited;
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
  };
}

/** Start a replica with `args` (besides --host, --port 0 and --web-port, unless args has one). */
export async function startReplica(args: readonly string[]): Promise<Replica> {
  const web = args.includes("--web-port") ? [] : ["--web-port", "0"];
  const server = await startServer([
    "aggregator",
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    ...web,
    "--grace",
    "1",
    ...args,
  ]);
  return {
    address: server.listening.address,
    webUrl: `http://${server.listening.web_address}`,
    process: server.process,
    stop: server.stop,
    kill: server.kill,
  };
}

/** Key of a stored report in {@link storedCounts}: its public codes and perturbed private code. */
export function reportKey(publicCodes: readonly bigint[], privateCode: bigint): string {
  return [...publicCodes, privateCode].join(",");
}

/** How many reports of each (public codes, private code) a replica stores: its Export, over gRPC. */
export async function storedCounts(address: string, collection: string, token?: string): Promise<Map<string, number>> {
  const { createClient } = await import("@connectrpc/connect");
  const { createGrpcTransport } = await import("@connectrpc/connect-node");
  const { QueryService } = await import("../src/gen/ldpsynth/v1/query_pb.js");
  const client = createClient(QueryService, createGrpcTransport({ baseUrl: `http://${address}` }));
  const counts = new Map<string, number>();
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  for await (const chunk of client.export({ collection }, { headers, timeoutMs: 60_000 })) {
    const words = (bytes: Uint8Array): bigint[] => {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return Array.from({ length: bytes.byteLength / 8 }, (_, i) => view.getBigUint64(8 * i, true));
    };
    const priv = words(chunk.privateCodes);
    const pub = chunk.publicCodes.map(words);
    priv.forEach((code, i) => {
      const key = reportKey(
        pub.map((col) => col[i]!),
        code,
      );
      counts.set(key, (counts.get(key) ?? 0) + 1);
    });
  }
  return counts;
}

/** The counts of `reports` as {@link storedCounts} gives them. */
export function countsOf(
  reports: { privateCodes: readonly bigint[]; publicCodes: readonly (readonly bigint[])[] },
  into = new Map<string, number>(),
): Map<string, number> {
  reports.privateCodes.forEach((code, i) => {
    const key = reportKey(
      reports.publicCodes.map((col) => col[i]!),
      code,
    );
    into.set(key, (into.get(key) ?? 0) + 1);
  });
  return into;
}

/**
 * The reports a replica stores for a frequency oracle's collection (its Export, over gRPC), each as the one
 * bigint the oracle's layout gives it (oracles.ts): OUE's bit set, OLH's seed << s | bucket, HR's index.
 */
export async function storedOracleReports(
  address: string,
  collection: string,
  oracle: FrequencyOracle,
): Promise<bigint[]> {
  const { createClient } = await import("@connectrpc/connect");
  const { createGrpcTransport } = await import("@connectrpc/connect-node");
  const { QueryService } = await import("../src/gen/ldpsynth/v1/query_pb.js");
  const client = createClient(QueryService, createGrpcTransport({ baseUrl: `http://${address}` }));
  const out: bigint[] = [];
  const little = (bytes: Uint8Array, width: number): bigint[] =>
    Array.from({ length: bytes.byteLength / width }, (_, i) =>
      bytes.subarray(width * i, width * (i + 1)).reduceRight((v, b) => (v << 8n) | BigInt(b), 0n),
    );
  for await (const chunk of client.export({ collection }, { timeoutMs: 60_000 })) {
    assert.equal(chunk.privateCodes.length, 0, "an oracle's reports travel in its own fields");
    if (oracle instanceof OptimizedUnaryEncoding) out.push(...little(chunk.reportBitmaps, oracle.reportBytes));
    if (oracle instanceof HadamardResponse) out.push(...little(chunk.hadamardReports, 4));
    if (oracle instanceof OptimizedLocalHashing) {
      const buckets = little(chunk.olhBuckets, 2);
      out.push(...little(chunk.olhSeeds, 8).map((seed, i) => (seed << BigInt(oracle.hashBits)) | buckets[i]!));
    }
  }
  return out;
}
