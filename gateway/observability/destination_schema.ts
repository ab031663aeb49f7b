import { z } from "zod";
import { allowedEnvName, refusedEnvMessage } from "../config/env_names.ts";
import { MAX_URL_CHARS } from "../config/trailing_slashes.ts";

/**
 * docs/observability.md: where finished request records are sent. Created through the
 * admin API; secrets for the receiver's headers are env var NAMES.
 */
export const DestinationSchema = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    error: "must be 1-64 characters of a-z, 0-9, '.', '_' or '-'",
  }).describe("Unique name of the destination."),
  kind: z.enum(["webhook", "otlp", "otlp-traces"]).describe(
    "webhook: JSON `{records: [...]}` POSTed to url; otlp: OTLP/HTTP JSON logs POSTed to url; " +
      "otlp-traces: OTLP/HTTP JSON traces (a span per request and per attempt) POSTed to url.",
  ),
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .max(MAX_URL_CHARS, { error: `must be at most ${MAX_URL_CHARS} characters` })
    .describe(
      "Receiver URL; for otlp and otlp-traces the full endpoint (e.g. .../v1/logs, .../v1/traces).",
    ),
  enabled: z.boolean().default(true).describe("Set to false to keep it but send nothing."),
  headers_env: z.record(
    z.string().regex(/^[A-Za-z0-9-]+$/, { error: "must be an HTTP header name" }),
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an env var NAME" })
      .refine((name) => allowedEnvName(name), { error: refusedEnvMessage() }),
  ).default({}).describe("Headers to send, each read from the named env var at send time."),
}).strict();

export type Destination = z.output<typeof DestinationSchema>;

/** A create body may leave out the id; the API names it. */
export const DestinationCreateSchema = DestinationSchema.extend({
  id: DestinationSchema.shape.id.optional(),
}).strict();
