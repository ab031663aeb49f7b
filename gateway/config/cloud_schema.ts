/**
 * The clouds that serve the providers' own APIs under their own URLs and auth: Azure OpenAI
 * (options of the two OpenAI kinds) and Vertex AI (options of the gemini and anthropic kinds).
 * Options, not kinds: the body, the stream, its pulse table, usage and errors are the kind's own,
 * so failover, cooldown and history treat them as they treat the provider (docs/providers.md).
 */
import { z } from "zod";
import { envNameField } from "./env_names.ts";

export const AzureSchema = z.object({
  api_version: z.string().regex(/^[A-Za-z0-9._-]{1,40}$/, {
    error: 'must be an Azure OpenAI api-version such as "2024-10-21" or "2025-04-01-preview"',
  }).optional().describe(
    "Use the dated API: Chat goes to {base_url}/openai/deployments/{model}/chat/completions" +
      "?api-version=..., Responses to {base_url}/openai/responses?api-version=... (the " +
      "candidate's model is the deployment name). Omit for the v1 API: " +
      "{base_url}/openai/v1/chat/completions and /openai/v1/responses.",
  ),
  auth: z.enum(["api-key", "bearer"], { error: 'must be "api-key" or "bearer"' })
    .default("api-key").describe(
      "How api_key_env's value is sent: the api-key header (a resource key), or " +
        "Authorization: Bearer (a Microsoft Entra ID token).",
    ),
}).strict();

export const VertexSchema = z.object({
  project: z.string().regex(/^[a-z0-9][a-z0-9.:-]{0,127}$/, {
    error: "must be a Google Cloud project id such as my-project",
  }).describe("Google Cloud project id."),
  location: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, {
    error: 'must be a Vertex AI location such as "us-central1" or "global"',
  }).max(40, { error: "must be at most 40 characters" }).describe(
    'Vertex AI location, e.g. "us-central1", "europe-west4" or "global". It picks the host ' +
      "({location}-aiplatform.googleapis.com, aiplatform.googleapis.com for global) unless " +
      "base_url is set.",
  ),
  service_account_env: envNameField().optional().describe(
    "Name of the env var holding a service-account key (its JSON text). The gateway signs a " +
      "JWT with it and exchanges it at the key's token_uri for an access token, kept and " +
      "renewed before it expires.",
  ),
  access_token_env: envNameField().optional().describe(
    "Name of the env var holding an OAuth access token (e.g. from gcloud auth " +
      "print-access-token), sent as it is: it is not renewed.",
  ),
}).strict().superRefine((vertex, ctx) => {
  const set = [vertex.service_account_env, vertex.access_token_env].filter(Boolean).length;
  if (set === 1) return;
  ctx.addIssue({
    code: "custom",
    path: [],
    message: "must set exactly one of service_account_env and access_token_env",
  });
});

export type AzureOptions = z.output<typeof AzureSchema>;
export type VertexOptions = z.output<typeof VertexSchema>;

/** What the cloud option of one upstream requires of its other fields. */
export interface CloudFields {
  base_url?: string;
  api_key_env?: string;
  azure?: AzureOptions;
  vertex?: VertexOptions;
}

/** Path tails of a base URL given in an SDK's convention, to which we would append a second. */
const AZURE_API_TAIL = /\/openai(\/v1)?\/*$/i;

/** Cross-field rules of the cloud options, run on each upstream. */
export function checkCloudFields(fields: object, ctx: z.RefinementCtx<unknown>): void {
  // Any upstream shape: the fields it lacks read as undefined.
  const upstream: CloudFields = fields;
  if (upstream.azure) {
    if (!upstream.base_url) {
      ctx.addIssue({
        code: "custom",
        path: ["base_url"],
        message: "is required with azure: the resource endpoint, e.g. " +
          "https://my-resource.openai.azure.com",
      });
    } else if (AZURE_API_TAIL.test(URL.parse(upstream.base_url)?.pathname ?? "")) {
      ctx.addIssue({
        code: "custom",
        path: ["base_url"],
        message: 'with azure is the resource endpoint without "/openai" or "/openai/v1": ' +
          "the gateway appends the API path",
      });
    }
    if (!upstream.api_key_env) {
      ctx.addIssue({
        code: "custom",
        path: ["api_key_env"],
        message: "is required with azure: the env var holding the api-key or Entra ID token",
      });
    }
  }
  if (upstream.vertex && upstream.api_key_env) {
    ctx.addIssue({
      code: "custom",
      path: ["api_key_env"],
      message: "is not used with vertex: set vertex.service_account_env or " +
        "vertex.access_token_env",
    });
  }
}
