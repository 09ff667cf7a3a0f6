/**
 * Where a device's rows go, whatever the client (Node gRPC or web) and ledger (file or IndexedDB): an
 * ordinary collection takes them itself (a view of a wide collection served here is refused: its devices
 * submit to the wide collection); a wide collection's rows go, projected, to the view the ledger's view key
 * routes the device to; a discovery collection's, as cells, to the open round when it is the device's (else
 * nothing is charged or sent). The sub-collection's served card must be the one the parent's card states; the
 * ledger charges the parent at its ε. The reference's `AsyncClient.submit` (ldpsynth/client/aio.py).
 */
import { pythonEquals } from "./card.js";
import { answeredCollection } from "./collection.js";
import type { SubmitResult } from "./call-options.js";
import type { Charge } from "./device-core.js";
import { DISCOVERY_VERSION, DiscoveryCard, REPORT } from "./discovery-card.js";
import { ValidationError } from "./errors.js";
import type { Collection } from "./gen/ldpsynth/v1/collection_pb.js";
import { parseJson, type JsonObject } from "./json.js";
import type { CollectionInfo } from "./reports.js";
import type { Columns, Row } from "./rows.js";
import { SubmitError } from "./submit-error.js";
import { SEPARATOR, VIEWS_VERSION, WideCard, wideOf } from "./wide-card.js";

/** What a client offers the router: GetCollection, and the ordinary path under a charge. */
export interface Transport {
  fetch(name: string): Promise<Collection>;
  submitTo(info: CollectionInfo, rows: Columns | readonly Row[], charge?: Charge): Promise<SubmitResult>;
}

/** What the router needs of a ledger: the device's keys and its spend. */
export interface DeviceKeys {
  viewKey(collection: string): Uint8Array | Promise<Uint8Array>;
  roundKey(collection: string): Uint8Array | Promise<Uint8Array>;
  spent(collection: string): number | Promise<number>;
}

/** Submit `rows` to `collection` (a name, an ordinary collection's info, or a wide card), as the module says. */
export async function routeSubmission(
  via: Transport,
  collection: string | CollectionInfo | WideCard,
  rows: Columns | readonly Row[],
  ledger: DeviceKeys,
): Promise<SubmitResult> {
  let found: CollectionInfo | WideCard;
  if (typeof collection === "string") {
    const message = await via.fetch(collection);
    if (message.mechanismVersion === DISCOVERY_VERSION) return discovery(via, collection, message, rows, ledger);
    found =
      message.mechanismVersion === VIEWS_VERSION
        ? wideOf(message, collection)
        : answeredCollection(message, collection);
  } else {
    found = collection;
  }
  if (!(found instanceof WideCard)) {
    await refuseAView(via, found.card.schema.name);
    return via.submitTo(found, rows);
  }
  const { index, name } = await found.route(await ledger.viewKey(found.name));
  found.viewCard(index); // the view's card verified in full (E's or an oracle's) before anything is charged
  const projected = found.project(rows, index);
  const info = await stated(via, name, found.views[index]!.card, `the wide collection ${JSON.stringify(found.name)}`);
  return via.submitTo(info, projected, { collection: found.name, epsilon: found.epsilon });
}

/** The info of sub-collection `name`, whose served card must be `card` (what its parent `parent` states). */
async function stated(via: Transport, name: string, card: JsonObject, parent: string): Promise<CollectionInfo> {
  const message = await via.fetch(name);
  if (!pythonEquals(parseJson(message.cardJson, "card", "a JSON mechanism card"), card)) {
    throw new ValidationError(
      "card",
      `the card ${parent} states for ${JSON.stringify(name)}`,
      "the server serves another card for it; nothing was charged or sent",
    );
  }
  return answeredCollection(message, name);
}

/**
 * ValidationError naming `collection` when `name` is a view sub-collection of a wide collection served here
 * (`parent/a+b`): its devices submit to the parent, which routes them and charges its own budget.
 */
async function refuseAView(via: Transport, name: string): Promise<void> {
  if (!name.includes(SEPARATOR)) return;
  const parent = name.slice(0, name.lastIndexOf(SEPARATOR));
  let message: Collection;
  try {
    message = await via.fetch(parent);
  } catch (err) {
    if (err instanceof SubmitError) return; // no such collection here (or not for this credential): not a view
    throw err;
  }
  if (message.mechanismVersion === VIEWS_VERSION && wideOf(message, parent).names.includes(name)) {
    throw new ValidationError(
      "collection",
      `the wide collection ${JSON.stringify(parent)} (each device reports the view its key routes it to, `
        + "charged under the wide collection)",
      `${JSON.stringify(name)} is one of its views; nothing was charged or sent`,
    );
  }
}

/** A discovery collection's submission (src/discovery-card.ts): the device's round only, else a status. */
async function discovery(
  via: Transport,
  collection: string,
  message: Collection,
  rows: Columns | readonly Row[],
  ledger: DeviceKeys,
): Promise<SubmitResult> {
  const card = DiscoveryCard.parse(message.cardJson);
  if (card.name !== collection) {
    throw new ValidationError(
      "collection",
      `the collection asked for (${JSON.stringify(collection)})`,
      "the server answered with another collection",
    );
  }
  const status = await card.turn(await ledger.roundKey(collection));
  if (status !== REPORT) {
    const zero = { rows: 0, sent: 0, acknowledged: 0, duplicates: 0, batches: 0, retries: 0, memoized: 0 };
    return {
      ...zero,
      collection,
      epsilonSpent: 0,
      epsilonTotal: await ledger.spent(collection),
      shuffled: false,
      status,
    };
  }
  if (Array.isArray(rows)) throw new ValidationError("rows", "columns for a discovery collection", "row objects");
  card.roundCard(); // the round's card verified in full (E's or an oracle's) before anything is charged
  const cells = card.roundRows(rows as Columns);
  const open = card.open!;
  const info = await stated(via, open.collection, open.card, `the discovery collection ${JSON.stringify(collection)}`);
  return via.submitTo(info, cells, { collection, epsilon: card.epsilon });
}
