import { isRecord } from "../../runtime/json.ts";
import { camelCase } from "./fields.ts";

/** Gemini Schema keys that JSON Schema does not know and other providers may reject. */
const geminiOnly = new Set(["nullable", "propertyOrdering"]);

/**
 * Gemini's `parameters` is an OpenAPI 3.0 subset with upper-case types
 * ("OBJECT") and `nullable`; other providers want JSON Schema. Keys under
 * `properties` are the caller's names and are left alone.
 */
export function geminiSchemaToJson(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(geminiSchemaToJson);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [rawKey, value] of Object.entries(schema)) {
    const key = camelCase(rawKey);
    if (geminiOnly.has(key)) continue;
    if (key === "type") {
      if (typeof value === "string" && value !== "TYPE_UNSPECIFIED") out.type = value.toLowerCase();
    } else if (key === "properties" && isRecord(value)) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([name, sub]) => [name, geminiSchemaToJson(sub)]),
      );
    } else if (key === "items" || key === "anyOf") {
      out[key] = geminiSchemaToJson(value);
    } else {
      out[key] = value;
    }
  }
  if (schema.nullable === true && typeof out.type === "string") out.type = [out.type, "null"];
  return out;
}

/** Keywords whose value is one schema, or a list of schemas. */
const subschemaKeys = new Set([
  "items",
  "additionalItems",
  "additionalProperties",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
  "prefixItems",
  "anyOf",
  "oneOf",
  "allOf",
]);

/** Keywords whose value maps names (the caller's, left alone) to schemas. */
const schemaMapKeys = new Set([
  "properties",
  "patternProperties",
  "$defs",
  "definitions",
  "dependentSchemas",
]);

/**
 * Gemini accepts the upper-case OpenAPI type names ("OBJECT", "STRING") in
 * `responseJsonSchema` and `parametersJsonSchema` too, and Gemini CLI sends
 * them; JSON Schema's types are lower-case and OpenAI and Anthropic refuse
 * any other. Lower-cases `type` in every subschema, nothing else.
 */
export function lowerCaseSchemaTypes(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(lowerCaseSchemaTypes);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "type") {
      out.type = typeof value === "string"
        ? value.toLowerCase()
        : Array.isArray(value)
        ? value.map((t) => (typeof t === "string" ? t.toLowerCase() : t))
        : value;
    } else if (subschemaKeys.has(key)) {
      out[key] = lowerCaseSchemaTypes(value);
    } else if (schemaMapKeys.has(key) && isRecord(value)) {
      out[key] = Object.fromEntries(
        Object.entries(value).map(([name, sub]) => [name, lowerCaseSchemaTypes(sub)]),
      );
    } else {
      out[key] = value;
    }
  }
  return out;
}
