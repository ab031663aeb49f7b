/**
 * Vertex AI as an upstream of the gemini and anthropic kinds (docs/providers.md "Vertex AI"):
 * the provider's own bodies and streams at a model's URL under a Google Cloud project, with an
 * OAuth bearer token. Claude on Vertex takes the Messages body with `anthropic_version` in it
 * and no `model` (the URL names it), at `:rawPredict` / `:streamRawPredict`.
 */
import type { VertexOptions } from "../../config/cloud_schema.ts";
import { type Upstream, upstreamBaseUrl } from "../../config/schema.ts";

/** The version Claude on Vertex is asked for, in the body (Anthropic's Vertex docs). */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16";

/** The upstream's Vertex options, if it is served by Vertex AI. */
export function vertexOf(upstream: Upstream): VertexOptions | undefined {
  return "vertex" in upstream ? upstream.vertex : undefined;
}

/** One path segment, whatever the name holds; `@` stays as Claude's versions write it. */
function segment(name: string): string {
  return encodeURIComponent(name).replaceAll("%40", "@");
}

/** `{base}/v1/projects/{p}/locations/{l}/publishers/{publisher}/models/{model}:{method}`. */
export function vertexModelUrl(
  upstream: Upstream,
  opts: { vertex: VertexOptions; publisher: "google" | "anthropic"; model: string; method: string },
): string {
  const { project, location } = opts.vertex;
  return `${upstreamBaseUrl(upstream)}/v1/projects/${segment(project)}/locations/` +
    `${segment(location)}/publishers/${opts.publisher}/models/${
      segment(opts.model)
    }:${opts.method}`;
}

/** A Messages body as Claude on Vertex takes it: its version first, no `model`. */
export function vertexClaudeBody(body: Record<string, unknown>): Record<string, unknown> {
  const { model: _model, anthropic_version: _version, ...rest } = body;
  return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest };
}
