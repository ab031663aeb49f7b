/**
 * A client's own words are bounded before the gateway stores, logs or echoes
 * them (docs/security.md "Names are bounded"): a model name of megabytes was
 * stored twice per request (its row's route and error message) and sent back
 * whole in the error.
 */

/** The longest route name the config allows (`modelName` in gateway/config/schema.ts). */
export const MAX_MODEL_CHARS = 256;

/** How much of an over-long name or id is kept to show what it was. */
const SHOWN_CHARS = 64;

/**
 * The model a client named, as the gateway keeps it. A name longer than any
 * route can be names no route; it is kept as its first characters and its
 * length, which holds spaces and so can never equal a route's name either.
 */
export function boundedModel(name: string): string {
  if (name.length <= MAX_MODEL_CHARS) return name;
  return `${head(name, SHOWN_CHARS)}… (${name.length} characters)`;
}

/** A client's string quoted for an error message: whole when short, its start otherwise. */
export function echoed(text: string): string {
  if (text.length <= SHOWN_CHARS) return `'${text}'`;
  return `'${head(text, SHOWN_CHARS)}…' (${text.length} characters)`;
}

/** The first `n` characters, never ending in half a surrogate pair. */
function head(text: string, n: number): string {
  const last = text.charCodeAt(n - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? n - 1 : n);
}
