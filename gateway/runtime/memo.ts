/**
 * Answers kept per key, for work the request path would otherwise redo on every request with the
 * same few inputs (a Host header, an upstream's base URL). Bounded, since some keys are the
 * clients' to choose: a full cache starts over.
 */
export function boundedMemo<K, V>(make: (key: K) => V, opts: { max: number }): (key: K) => V {
  const kept = new Map<K, V>();
  return (key) => {
    if (kept.has(key)) return kept.get(key)!;
    const value = make(key);
    if (kept.size >= opts.max) kept.clear();
    kept.set(key, value);
    return value;
  };
}

/** What is made from an object (a config) once, kept for as long as the object lives. */
export function onePer<K extends object, V>(make: (key: K) => V): (key: K) => V {
  const kept = new WeakMap<K, V>();
  return (key) => {
    if (kept.has(key)) return kept.get(key)!;
    const value = make(key);
    kept.set(key, value);
    return value;
  };
}
