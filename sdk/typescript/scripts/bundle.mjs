// Minified browser bundles of the package (ESM, everything each entry point uses, dependencies
// included), to measure their size: npm run bundle prints the bytes, raw and gzipped, of the core
// (@ldpsynth/sdk) and of the browser entry (@ldpsynth/sdk/web: + IndexedDB ledger + Connect/gRPC-Web client).
import { build } from "esbuild";
import { gzipSync } from "node:zlib";

for (const [name, entry] of [
  ["@ldpsynth/sdk", "../src/index.ts"],
  ["@ldpsynth/sdk/web", "../src/web/index.ts"],
]) {
  const result = await build({
    entryPoints: [new URL(entry, import.meta.url).pathname],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
  });
  const code = result.outputFiles[0].contents;
  console.log(
    `${name}: browser bundle (esm, minified) ${code.length} bytes, ${gzipSync(code, { level: 9 }).length} gzipped`,
  );
}
