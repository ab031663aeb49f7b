/**
 * The JSON Schema of the config, derived from the zod schema. Served to the admin page and walked
 * to write docs/config.md, to suggest field names and to find defaults for repairs.
 */
import { z } from "zod";
import { ConfigSchema } from "./schema.ts";

export type JsonSchema = z.core.JSONSchema.JSONSchema;

let cached: JsonSchema | undefined;

/**
 * Input-side schema, so fields with defaults are not `required`. Frozen because it is shared by
 * every caller for the life of the process.
 */
export function configJsonSchema(): JsonSchema {
  cached ??= deepFreeze(z.toJSONSchema(ConfigSchema, { io: "input" }));
  return cached;
}

function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}

export function isSchemaObject(value: unknown): value is JsonSchema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The non-union shapes a node can take: a nullable object yields the object and `null`. */
export function alternatives(node: JsonSchema): JsonSchema[] {
  const options = [...(node.anyOf ?? []), ...(node.oneOf ?? [])].filter(isSchemaObject);
  return options.length === 0 ? [node] : options.flatMap(alternatives);
}

function step(node: JsonSchema, segment: PropertyKey): JsonSchema[] {
  return alternatives(node).flatMap((shape) => {
    const next = typeof segment === "number" ? shape.items : shape.properties?.[String(segment)];
    return isSchemaObject(next) ? [next] : [];
  });
}

/** Every schema node that may describe the value at `path` (several when it crosses a union). */
export function schemaNodesAt(path: readonly PropertyKey[]): JsonSchema[] {
  const nodes = path.reduce<JsonSchema[]>(
    (current, segment) => current.flatMap((node) => step(node, segment)),
    [configJsonSchema()],
  );
  return nodes.flatMap(alternatives);
}

/** Field names allowed in the object at `path`, across every shape a union there allows. */
export function fieldNamesAt(path: readonly PropertyKey[]): string[] {
  const names = schemaNodesAt(path).flatMap((node) => Object.keys(node.properties ?? {}));
  return [...new Set(names)];
}
