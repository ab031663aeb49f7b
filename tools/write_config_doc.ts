/** `deno task docs`: regenerates docs/config.md from the config schema. */
import { renderConfigDoc } from "./config_doc.ts";

const target = new URL("../docs/config.md", import.meta.url);
await Deno.writeTextFile(target, renderConfigDoc());
console.log(`wrote ${target.pathname}`);
