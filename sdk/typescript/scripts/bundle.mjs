// A minified browser bundle of the package (ESM, everything the entry point uses, @bufbuild/protobuf
// included), to measure its size: npm run bundle prints the bytes, raw and gzipped.
import { build } from "esbuild";
import { gzipSync } from "node:zlib";

const result = await build({
  entryPoints: [new URL("../src/index.ts", import.meta.url).pathname],
  bundle: true,
  minify: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  write: false,
  metafile: true,
});
const code = result.outputFiles[0].contents;
console.log(`browser bundle (esm, minified): ${code.length} bytes, ${gzipSync(code, { level: 9 }).length} gzipped`);
