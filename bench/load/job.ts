/** Shared by the load jobs: each runs in its own process, reads its job from argv, prints JSON. */

export function readJob<T>(): T {
  const text = Deno.args[0];
  if (!text) throw new Error("a load job takes its job as one JSON argument");
  return JSON.parse(text) as T;
}

export function printResult(result: unknown): void {
  console.log(JSON.stringify(result));
}

/** Wall-clock ms with sub-ms precision, comparable across processes on one machine. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}
