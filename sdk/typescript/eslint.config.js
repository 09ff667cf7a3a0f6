// @ts-check
// ESLint over src/, test/, scripts/ and bench/ (npm run lint): ESLint's recommended rules and
// typescript-eslint's recommended type-checked rules, with the TypeScript projects' own types.
// Generated code (src/gen/, npm run generate) is not linted. Formatting is Prettier's (npm run format).
import eslint from "@eslint/js";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["src/gen/", "dist/", "build/", "node_modules/", "demo/"] },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's test() and describe() return promises that the runner itself awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["test", "describe"] }],
        },
      ],
      // The JSON reader and the ASCII checks match control characters on purpose (\u0000-\u001f, \x00-\x7f).
      "no-control-regex": "off",
      // A name starting with _ is unused on purpose: the key a rest pattern leaves out (`{ sealing: _omitted, ...clear }`).
      "@typescript-eslint/no-unused-vars": ["error", { varsIgnorePattern: "^_" }],
    },
  },
  {
    // These tests damage the ledger's file field by field: its JSON is read and edited untyped on purpose.
    files: ["test/ledger.test.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
    },
  },
  {
    // The build scripts are plain ES modules run by Node: no TypeScript project, so no type-aware rules.
    files: ["**/*.mjs", "**/*.js"],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: globals.node },
  },
);
