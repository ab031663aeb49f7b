/**
 * JSON Merge Patch (RFC 7396), for partial config updates: objects merge key by key, `null`
 * deletes a key, anything else (arrays included) replaces. docs/design.md "Config" then validates the merged
 * whole, so a patch can never leave a half-valid config behind.
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? structuredClone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    // defineProperty, so a `__proto__` key stays a key (and fails validation) instead of
    // replacing the object's prototype.
    else {
      Object.defineProperty(result, key, {
        value: mergePatch(Object.hasOwn(result, key) ? result[key] : undefined, value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return result;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
