/**
 * The files of the Node ledger (./ledger.ts, format: ./ledger-format.ts): durable writes (a whole new file,
 * fsynced, renamed or linked into place, the directory fsynced), the ledger's creation and upgrade, its
 * marker `<ledger>.created`, and the lock `<ledger>.lock` of its one writer.
 */
import { createHmac, randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import * as frac from "../fraction.js";
import type { JsonValue } from "../json.js";
import { type Budget, ID_DOMAIN, MARKER_SUFFIX, markerRecord, SECRET_BYTES } from "../ledger-rules.js";
import { FORMAT, readState, refused, serialise, type State } from "./ledger-format.js";

const LOCK_SUFFIX = ".lock";
const LOCK_WAIT_MS = 30_000;

/** The ledger's id, recorded in its marker: an HMAC of a constant under its secret. */
export function ledgerId(secret: Buffer): string {
  return createHmac("sha256", secret).update(ID_DOMAIN).digest().subarray(0, 16).toString("hex");
}

function fsyncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write `text` to a fresh file next to `path` (owner-only, fsynced) and return its name. */
function staged(path: string, text: string): string {
  const name = join(dirname(path), `${basename(path)}.new-${randomBytes(8).toString("hex")}`);
  const fd = openSync(name, "wx", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return name;
}

/** Put `state` in place of the ledger at `path`, durably. */
export function replaceLedger(path: string, state: State): void {
  renameSync(staged(path, serialise(state)), path);
  fsyncDirectory(dirname(path));
}

/** Write the marker `<ledger>.created` of the ledger `id` (and a reset's record) durably. */
export function writeMarker(path: string, id: string, reset?: JsonValue): void {
  const marker = `${path}${MARKER_SUFFIX}`;
  renameSync(staged(marker, `${JSON.stringify(markerRecord(basename(path), id, reset))}\n`), marker);
  fsyncDirectory(dirname(path));
}

/** Refuse a ledger that is not the one its marker names (a missing marker is written). */
export function checkMarker(path: string, id: string): void {
  const marker = `${path}${MARKER_SUFFIX}`;
  let recorded: unknown;
  try {
    recorded = (JSON.parse(readFileSync(marker, "utf-8")) as Record<string, unknown>)["ledger_id"];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      writeMarker(path, id); // a ledger whose creation stopped between the link and the marker
      return;
    }
    throw refused(path, `its marker ${basename(marker)} is not a ledger marker`);
  }
  if (recorded !== id) {
    throw refused(path, `it is not the ledger its marker ${basename(marker)} was written for: the ledger was replaced`);
  }
}

/** Whether anything (a file, a link, even a dangling one) is at `path`. */
export function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Build a complete new ledger under a temporary name and link it into place (never over a file). */
export function createLedger(path: string, budget: Budget, device: Record<string, JsonValue> = {}): Buffer {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const secret = randomBytes(SECRET_BYTES);
  const built = staged(
    path,
    serialise({
      format: FORMAT,
      secret,
      device,
      budget,
      pinned: new Map(),
      spend: new Map(),
      memo: new Map(),
      central: new Map(),
    }),
  );
  try {
    linkSync(built, path);
  } finally {
    unlinkSync(built);
  }
  fsyncDirectory(dirname(path));
  return secret;
}

/**
 * Format 1 or 2 -> 3 under the lock: (1 -> 2) store `budget`, pin each collection's ε at its spend per
 * report; (2 -> 3) write the (empty) table of promises and each memoized report's path, in clear.
 */
export function upgrade(path: string, budget: Budget): State {
  return locked(path, () => {
    const state = readState(path);
    if (state.format === FORMAT) return state; // another process just did it
    if (state.budget === undefined) {
      state.budget = budget;
      for (const [collection, spend] of state.spend) {
        if (spend.reports > 0) {
          state.pinned.set(collection, frac.fraction(spend.epsilon.num, spend.epsilon.den * BigInt(spend.reports)));
        }
      }
    }
    replaceLedger(path, state);
    state.format = FORMAT;
    return state;
  });
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return false; // transactions are synchronous: a lock of this pid is a leftover
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Hold `<ledger>.lock` while `body` runs (one writer at a time; a dead writer's lock is taken over). */
export function locked<T>(path: string, body: () => T): T {
  const lock = `${path}${LOCK_SUFFIX}`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(lock, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
        throw refused(path, `cannot lock it (${(err as Error).message})`);
      }
      let holder: number;
      try {
        holder = Number(readFileSync(lock, "utf-8"));
      } catch {
        continue; // released meanwhile
      }
      if (Number.isSafeInteger(holder) && !processAlive(holder)) {
        try {
          unlinkSync(lock);
        } catch {
          // another process took it over first
        }
        continue;
      }
      if (Date.now() > deadline) throw refused(path, `locked by process ${holder} for over ${LOCK_WAIT_MS / 1000} s`);
      sleep(20);
    }
  }
  try {
    return body();
  } finally {
    unlinkSync(lock);
  }
}
