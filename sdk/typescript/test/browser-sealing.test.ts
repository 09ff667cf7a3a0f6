/**
 * Sealing in a real browser (Debian's headless Chromium): its WebCrypto has X25519, and the sealing
 * modules, bundled for the browser, seal every case of conformance/sealed.json to the vectors' bytes
 * (with the case's ephemeral key, DeriveKeyPair(ikm_e)) and pass the checks of Collection.sealing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import type { JsonObject } from "../src/json.js";
import { BLANK_PAGE, launch, NO_BROWSER, sdkBundle, sdkPage, serveStatic } from "./browser-harness.js";
import { cases, str, vectors } from "./vectors.js";

type Sealing = typeof import("./browser-sealing-entry.js");
declare const window: { sdk: Sealing };

const doc = vectors("sealed.json");

describe("sealing in headless Chromium", { skip: NO_BROWSER }, () => {
  let site: Awaited<ReturnType<typeof serveStatic>>;
  let browser: Awaited<ReturnType<typeof launch>>;
  let page: Page;

  before(async () => {
    site = await serveStatic({
      "/test.html": { type: "text/html", body: BLANK_PAGE },
      "/sdk.js": { type: "text/javascript", body: await sdkBundle("test/browser-sealing-entry.ts") },
    });
    browser = await launch();
    page = await sdkPage(browser.context, `${site.origin}/test.html`);
  });

  after(async () => {
    await browser?.close();
    await site?.close();
  });

  test("WebCrypto has X25519, and every case seals to the vectors' bytes", async () => {
    assert.equal(await page.evaluate(() => window.sdk.hasX25519()), true);
    const input = cases(doc, "cases").map((c) => ({
      collection: str(c["collection"]),
      version: str(c["mechanism_version"]),
      id: str(c["report_id"]),
      priv: str(c["private_code"]),
      pub: c["public_codes"] as string[],
      ikm: str(c["ikm_e"]),
    }));
    const publicKey = str((doc["key"] as JsonObject)["public_key"]);
    const sealed = await page.evaluate(
      async ({ input, publicKey }) => {
        const bytes = (h: string): Uint8Array => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
        const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
        const recipient = await window.sdk.importRecipientKey(bytes(publicKey));
        return Promise.all(
          input.map(async (c) => {
            const plaintext = window.sdk.reportPlaintext(
              {
                reportIds: bytes(c.id),
                privateCodes: [BigInt(c.priv)],
                publicCodes: c.pub.map((code) => [BigInt(code)]),
              },
              0,
              c.version,
            );
            return hex(
              await window.sdk.sealPlaintext(
                recipient,
                c.collection,
                plaintext,
                await window.sdk.deriveKeyPair(bytes(c.ikm)),
              ),
            );
          }),
        );
      },
      { input, publicKey },
    );
    assert.deepEqual(
      sealed,
      cases(doc, "cases").map((c) => c["sealed"]),
    );
  });

  test("the published Collection.sealing passes the checks, and a seal has the collection's length", async () => {
    const collectionHex = str((doc["collection"] as JsonObject)["hex"]);
    const lengths = await page.evaluate(async (h) => {
      const bytes = Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
      const info = window.sdk.decodeCollection(bytes);
      const key = await window.sdk.sealingKey(info);
      const m = info.card.schema.publicAttributes.length;
      const sealed = await window.sdk.sealReports(key, info.card.schema.name, info.card.version, {
        reportIds: new Uint8Array(16),
        privateCodes: [0n],
        publicCodes: Array.from({ length: m }, () => [0n]),
      });
      return [sealed.length, key.sealedReportBytes];
    }, collectionHex);
    const expected = Number(((doc["collection"] as JsonObject)["sealing"] as JsonObject)["sealed_report_bytes"]);
    assert.deepEqual(lengths, [expected, expected]);
  });
});
