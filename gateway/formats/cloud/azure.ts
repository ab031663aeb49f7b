/**
 * Azure OpenAI as an upstream of the two OpenAI kinds (docs/providers.md "Azure OpenAI"): the
 * same bodies, streams and errors as OpenAI's, at Azure's URLs and with its auth header. The
 * v1 API (`/openai/v1/...`, the deployment name as `model`), or the dated API
 * (`/openai/deployments/{deployment}/chat/completions?api-version=...`, `.../embeddings?...`;
 * Responses has no deployment path: `/openai/responses?api-version=...`), as the openai SDK's
 * `AzureOpenAI` client builds them.
 */
import type { AzureOptions } from "../../config/cloud_schema.ts";
import { type Upstream, upstreamBaseUrl } from "../../config/schema.ts";
import { bearer } from "../format_kit.ts";

export type OpenAiPath = "chat/completions" | "responses" | "embeddings";

/** The OpenAI paths Azure serves under a deployment (Responses has none). */
const DEPLOYMENT_PATHS: ReadonlySet<OpenAiPath> = new Set(["chat/completions", "embeddings"]);

/** The upstream's Azure options, if it is an Azure OpenAI resource. */
export function azureOf(upstream: Upstream): AzureOptions | undefined {
  return "azure" in upstream ? upstream.azure : undefined;
}

/** The URL of one call to an OpenAI-kind upstream: OpenAI's path under base_url, or Azure's. */
export function openAiUrl(upstream: Upstream, opts: { path: OpenAiPath; model: string }): string {
  const base = upstreamBaseUrl(upstream);
  const azure = azureOf(upstream);
  if (!azure) return `${base}/${opts.path}`;
  if (azure.api_version === undefined) return `${base}/openai/v1/${opts.path}`;
  const version = `api-version=${encodeURIComponent(azure.api_version)}`;
  // The deployment is the candidate's model: one path segment, whatever it holds.
  return DEPLOYMENT_PATHS.has(opts.path)
    ? `${base}/openai/deployments/${encodeURIComponent(opts.model)}/${opts.path}?${version}`
    : `${base}/openai/${opts.path}?${version}`;
}

const apiKey = (key: string): [string, string] => ["api-key", key];

/** The header the key goes in: OpenAI's bearer, Azure's `api-key`, or an Entra ID bearer token. */
export function openAiAuth(upstream: Upstream): (key: string) => [string, string] {
  const azure = azureOf(upstream);
  return azure && azure.auth === "api-key" ? apiKey : bearer;
}
