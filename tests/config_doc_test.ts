import assert from "node:assert/strict";
import { renderConfigDoc } from "../tools/config_doc.ts";

const STALE = "docs/config.md is stale: run `deno task docs` and commit the result";

Deno.test("docs/config.md matches the config schema", async () => {
  const path = new URL("../docs/config.md", import.meta.url);
  const committed = await Deno.readTextFile(path).catch(() => "");
  assert.equal(committed, renderConfigDoc(), STALE);
});
