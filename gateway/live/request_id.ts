/**
 * A request id the gateway makes (when the caller names none, or names one it may not use): a
 * UUID version 7 (RFC 9562), 48 bits of the Unix time in milliseconds then 74 random bits. Ids
 * made later sort after, to the millisecond, so each new history row goes to the end of the
 * `requests` primary key index (and of `attempts`', which starts with the request id), onto pages
 * the database has in memory, where random ids would each dirty a random page of an index that
 * soon outgrows the cache (docs/design.md "History"). It is not a secret: callers get it back
 * in `x-request-id`, and its time is the request's start, which history shows anyway.
 */
export function newRequestId(now: number): string {
  // A version 4 UUID is 8-4-4-4-12 hex digits: its version digit (index 14) becomes 7 and its
  // first 48 bits the time; its variant and the other 74 random bits stay.
  return timePrefix(now) + crypto.randomUUID().slice(15);
}

// Ids made within one millisecond share their first 15 characters: made once per millisecond.
let prefixMs = -1;
let prefix = "";

function timePrefix(now: number): string {
  if (now !== prefixMs) {
    prefixMs = now;
    const hex = Math.max(0, Math.min(now, 2 ** 48 - 1)).toString(16).padStart(12, "0");
    prefix = `${hex.slice(0, 8)}-${hex.slice(8)}-7`;
  }
  return prefix;
}
