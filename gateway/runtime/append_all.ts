/**
 * Appends `items` to `into`, one at a time. `into.push(...items)` passes every item as an
 * argument on the stack, and past about 120,000 items V8 throws "Maximum call stack size
 * exceeded": a client's one turn of 150,000 parts (well inside the body's value limit) made
 * the gateway answer 500, or, in a request's translation, charged the upstream with a failure
 * it never saw (docs/security.md "Hostile input"). Every list whose length a client or an
 * upstream chooses is appended with this.
 */
export function appendAll<T>(into: T[], items: readonly T[]): void {
  for (let i = 0; i < items.length; i++) into.push(items[i]!);
}
