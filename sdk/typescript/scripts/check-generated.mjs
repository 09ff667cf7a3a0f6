// Regenerate the protobuf code into a temporary folder and compare it with src/gen/ (npm run check-generated).
// Exit 1, naming the files, if regenerating would change anything: run `npm run generate` and commit.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "ldpsynth-gen-"));

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

try {
  execFileSync("buf", ["generate", "-o", tmp], { cwd: root, stdio: "inherit" });
  const fresh = new Map(
    files(join(tmp, "src/gen")).map((p) => [relative(join(tmp, "src/gen"), p), readFileSync(p, "utf-8")]),
  );
  const committed = new Map(
    files(join(root, "src/gen")).map((p) => [relative(join(root, "src/gen"), p), readFileSync(p, "utf-8")]),
  );
  const stale = [...new Set([...fresh.keys(), ...committed.keys()])].filter((k) => fresh.get(k) !== committed.get(k));
  if (stale.length) {
    console.error(`generated code is stale: ${stale.join(", ")}; run npm run generate`);
    process.exitCode = 1;
  } else {
    console.log(`generated code is up to date (${fresh.size} files)`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
