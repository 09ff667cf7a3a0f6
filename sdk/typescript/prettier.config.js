// Prettier (npm run format, npm run format:check) over src/, test/, scripts/, bench/ and these configs,
// set to the style the code was written in: lines up to 120 columns, double quotes, semicolons,
// trailing commas, parenthesised arrow parameters, and a broken line starting with its operator
// (`&&`, `+`, `??`: this code's habit). Generated code (src/gen/) is left as buf writes it (.prettierignore).
/** @type {import("prettier").Config} */
export default {
  printWidth: 120,
  singleQuote: false,
  semi: true,
  trailingComma: "all",
  arrowParens: "always",
  experimentalOperatorPosition: "start",
};
