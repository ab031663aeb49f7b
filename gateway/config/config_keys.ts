import type { Config } from "./schema.ts";
import { onePer } from "../runtime/memo.ts";

type ConfigKey = Config["keys"][number];

/** Each config's keys by id, made once per config: several checks of every request look one up. */
const keysById = onePer((config: Config) => new Map(config.keys.map((k) => [k.id, k])));

/** The config's key of this id, or undefined (no key, or none of that id). */
export function configKey(config: Config, keyId: string | null): ConfigKey | undefined {
  return keyId === null ? undefined : keysById(config).get(keyId);
}
