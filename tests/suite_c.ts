import { importShard } from "./suite.ts";

await importShard(2);
