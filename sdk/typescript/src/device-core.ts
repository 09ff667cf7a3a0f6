/**
 * A device's rows to the reports it may send, whatever keeps its ledger (a file in Node, IndexedDB in
 * a browser): identical rows share one report, a memoized row reuses its report (same id, same
 * perturbed code), every other row gets a fresh id and a fresh perturbation. The only place where
 * raw private codes meet randomness. The caller charges the fresh reports in the same ledger
 * transaction in which it looked up the memo, before anything is sent; reports of a shuffled
 * collection sent sealed through a shuffler are recorded there with the guarantee the collection
 * promises them ({@link promisedGuarantee}).
 */
import { perturbCodes, type Card } from "./any-card.js";
import { ValidationError } from "./errors.js";
import * as frac from "./fraction.js";
import type { CentralGuarantee } from "./ledger-rules.js";
import type { ShuffleSpec } from "./shuffle-spec.js";
import { newReportIds, REPORT_ID_BYTES } from "./random.js";
import { oracleOf, type Reports } from "./reports.js";
import type { EncodedRows } from "./rows.js";

/** A memoized report: its collection, its id, its perturbed code and how it was sent. */
export interface MemoEntry {
  readonly collection: string;
  readonly reportId: Uint8Array;
  readonly privateCode: bigint;
  /** First sent sealed through a shuffler (true) or in clear (false; so are reports memoized before paths were kept). */
  readonly sealed: boolean;
}

/** How a submission's reports travel: sealed through a shuffler, or (default) in clear. */
export interface PathOptions {
  readonly sealed?: boolean;
}

/** Whose budget a submission is charged to: a wide collection's view charges the wide collection, at its ε. */
export interface Charge {
  readonly collection: string;
  readonly epsilon: number;
}

/** A submission's path and, when not the card's collection at its ε, whom it charges. */
export interface PrepareOptions extends PathOptions {
  readonly charge?: Charge | undefined;
}

/**
 * The account and the ε per new report of a submission to `card`'s collection (the reference's
 * `prepare_reports`): `charge`, which must be at least the card's delivered ε, else the card's collection at
 * its ε; ValidationError naming `epsilon` otherwise.
 */
export function chargeOf(card: Card, charge: Charge | undefined): Charge {
  if (charge === undefined) return { collection: card.schema.name, epsilon: card.epsilon };
  if (!(charge.epsilon >= card.epsilon)) {
    throw new ValidationError(
      "epsilon",
      `at least the mechanism's ${card.epsilon} (what each report costs)`,
      `a charge of ${charge.epsilon} under ${JSON.stringify(charge.collection)}`,
    );
  }
  return charge;
}

/** The reports of one submission, already charged and memoized in the ledger. */
export interface PreparedReports {
  /** One report per distinct row, in the order of first appearance (identical rows share theirs). */
  readonly reports: Reports;
  readonly rows: number;
  /** Rows that reused a memoized report (from an earlier submission or an identical earlier row). */
  readonly memoized: number;
  /** ε charged by this submission (new reports × the card's delivered ε). */
  readonly epsilonSpent: number;
  /** ε spent on the collection by this device, this submission included. */
  readonly epsilonTotal: number;
  /**
   * The guarantee the ledger records for the collection with this submission (sealed through a
   * shuffler to a shuffled collection, every earlier report too); undefined otherwise.
   */
  readonly central?: CentralGuarantee | undefined;
}

/**
 * The guarantee a shuffled collection (`spec`) promises a device that has sent it `reports` reports
 * (docs/shuffle-accountant.md §6; the reference's `promised_guarantee`): at the pool floor, `min_batch`
 * less F = the spec's `assume_injected`, composed over m = `rows_per_device`, or `reports` when the device
 * has sent more; against the operator only with an independent shuffler. The central ε and δ are not
 * computed (null): this SDK has no accountant.
 */
export function promisedGuarantee(spec: ShuffleSpec, reports: number): CentralGuarantee {
  const rows = Number(spec.rowsPerDevice);
  return {
    delta: spec.delta,
    minBatch: Number(spec.minBatch),
    assumeInjected: Number(spec.injected),
    rowsPerDevice: Math.max(rows, reports),
    centralEpsilon: null,
    centralDelta: null,
    operator: spec.independent,
  };
}

/** The distinct memo keys of a submission, in order of first appearance, and the first row of each. */
export interface ReportPlan {
  readonly distinct: readonly string[];
  readonly rowOf: readonly number[];
}

export function planReports(keys: readonly string[]): ReportPlan {
  const firstRow = new Map<string, number>();
  keys.forEach((key, i) => {
    if (!firstRow.has(key)) firstRow.set(key, i);
  });
  return { distinct: [...firstRow.keys()], rowOf: [...firstRow.values()] };
}

/** A submission's reports, and the fresh ones the ledger must record (their keys, ids and codes). */
export interface FilledReports {
  readonly reports: Reports;
  readonly freshKeys: string[];
  readonly freshIds: Uint8Array;
  readonly freshCodes: bigint[];
}

/** Memoized reports where `known` has them, fresh ids and perturbations (the CSPRNG) elsewhere. */
export function fillReports(
  card: Card,
  rows: EncodedRows,
  plan: ReportPlan,
  known: ReadonlyMap<string, MemoEntry>,
): FilledReports {
  const { distinct, rowOf } = plan;
  const ids = new Uint8Array(REPORT_ID_BYTES * distinct.length);
  const codes = new Array<bigint>(distinct.length);
  const freshAt = distinct.flatMap((key, j) => (known.has(key) ? [] : [j]));
  distinct.forEach((key, j) => {
    const memo = known.get(key);
    if (memo) {
      ids.set(memo.reportId, REPORT_ID_BYTES * j);
      codes[j] = memo.privateCode;
    }
  });
  const freshIds = newReportIds(freshAt.length);
  const freshCodes = perturbCodes(
    card,
    freshAt.map((j) => rows.privateCodes[rowOf[j]!]!),
  );
  freshAt.forEach((j, k) => {
    ids.set(freshIds.subarray(REPORT_ID_BYTES * k, REPORT_ID_BYTES * (k + 1)), REPORT_ID_BYTES * j);
    codes[j] = freshCodes[k]!;
  });
  return {
    reports: {
      reportIds: ids,
      privateCodes: codes,
      publicCodes: rows.publicCodes.map((col) => rowOf.map((i) => col[i]!)),
      oracle: oracleOf(card),
    },
    freshKeys: freshAt.map((j) => distinct[j]!),
    freshIds,
    freshCodes,
  };
}

/** The result of a submission that charged its fresh reports `epsilon` each and left its account at `total` ε spent. */
export function prepared(epsilon: number, rows: EncodedRows, filled: FilledReports, total: number): PreparedReports {
  const fresh = filled.freshKeys.length;
  return {
    reports: filled.reports,
    rows: rows.privateCodes.length,
    memoized: rows.privateCodes.length - fresh,
    epsilonSpent: frac.toFloat(frac.times(frac.fromFloat(epsilon), BigInt(fresh))),
    epsilonTotal: total,
  };
}
