/**
 * `deno task test` runs this one module: it imports every test file under tests/, so the suite
 * runs in one process that loads the gateway's modules, libSQL and the SDKs once instead of once
 * per file (over a second each). `deno test -A tests/hedge_test.ts` still runs one file alone.
 * docs/architecture.md "Tests".
 */
import { testFiles } from "./test_files.ts";

for (const file of await testFiles()) await import(new URL(file, import.meta.url).href);
