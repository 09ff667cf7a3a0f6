/**
 * Headless Chromium for the browser tests: Debian's `/usr/bin/chromium` (or `$LDPSYNTH_CHROMIUM`) driven by
 * playwright-core, a fresh user-data directory per launch, and a static server on 127.0.0.1 serving a
 * blank page and the SDK's browser bundle (`@ldpsynth/sdk/web` bundled by esbuild, as an application
 * would ship it). Outside CI the tests are skipped, saying why, only when the browser is absent.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env["LDPSYNTH_CHROMIUM"] ?? "/usr/bin/chromium";
/** Why the browser tests are skipped (never in CI, where a missing browser fails them), or false. */
export const NO_BROWSER: string | false =
  existsSync(CHROMIUM) || process.env["CI"] === "true" ? false : `${CHROMIUM} is missing (apt-get install chromium)`;
/** The flags the machine's closed network and a root user need. */
export const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The SDK's browser entry (or another module: `entry`, relative to the package) as one minified ESM file. */
export async function sdkBundle(entry = "src/web/index.ts"): Promise<Uint8Array> {
  const result = await build({
    entryPoints: [new URL(`../../${entry}`, import.meta.url).pathname],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0]!.contents;
}

export const BLANK_PAGE = `<!doctype html><meta charset="utf-8"><title>ldpsynth test</title>
<script type="module">import * as sdk from "/sdk.js"; window.sdk = sdk;</script>`;

/** A static server on 127.0.0.1 (port 0): `files` by path, 404 otherwise. Returns its origin and a closer. */
export async function serveStatic(
  files: Record<string, { type: string; body: string | Uint8Array }>,
): Promise<{ origin: string; port: number; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const file = files[new URL(req.url ?? "/", "http://x").pathname];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": file.type, "cache-control": "no-store" }).end(file.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Chromium with a fresh profile; `close` ends it and removes the profile. */
export async function launch(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "ldpsynth-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A page at `url` once the SDK bundle has loaded (`window.sdk`). */
export async function sdkPage(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  await page.goto(url);
  await page
    .waitForFunction(() => "sdk" in window, undefined, { timeout: 30_000 })
    .catch((err: Error) => {
      throw new Error(`the SDK did not load: ${errors.join("; ") || err.message}`);
    });
  return page;
}

/** JSON text of a value with bigints written as JSON integers (the SDK's parser reads them back exactly). */
export function jsonWithBigints(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? `__bigint:${v}` : v)).replace(
    /"__bigint:(-?[0-9]+)"/g,
    "$1",
  );
}
