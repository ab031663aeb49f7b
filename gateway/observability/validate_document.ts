import type { z } from "zod";
import { type ConfigProblem, joinPath } from "../config/validate.ts";

/** Validates an admin document against its schema, with one problem per unknown key at its path. */
export function validateDocument<T extends z.ZodType>(
  schema: T,
  raw: unknown,
): { ok: true; value: z.output<T> } | { ok: false; problems: ConfigProblem[] } {
  const result = schema.safeParse(raw);
  if (result.success) return { ok: true, value: result.data };
  return {
    ok: false,
    problems: result.error.issues.flatMap((issue): ConfigProblem[] =>
      issue.code === "unrecognized_keys"
        ? issue.keys.map((key) => ({
          path: joinPath([...issue.path, key]),
          message: `unknown field "${key}"`,
          kind: "unknown_key",
        }))
        : [{ path: joinPath(issue.path), message: issue.message, kind: "invalid" }]
    ),
  };
}
