/**
 * The config of Azure OpenAI and Vertex AI upstreams (gateway/config/cloud_schema.ts): options
 * of the kinds whose API they serve, strict, with the cross-field rules an operator would trip
 * on named at their path, and Vertex's default host per location.
 */
import assert from "node:assert/strict";
import { upstreamBaseUrl } from "../gateway/config/schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { traceUpstream } from "../gateway/forward/upstream_trace.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";

function check(upstream: Record<string, unknown>) {
  return validateConfig({
    upstreams: [{ id: "u", ...upstream }],
    routes: [{ model: "m", candidates: [{ upstream: "u", model: "x" }] }],
  });
}

function problems(upstream: Record<string, unknown>): string[] {
  const checked = check(upstream);
  return checked.ok ? [] : checked.problems.map((p) => `${p.path}: ${p.message}`);
}

const azure = {
  kind: "openai-chat",
  base_url: "https://res.openai.azure.com",
  api_key_env: "AZURE_KEY",
};
const vertex = { project: "acme-prod", location: "us-central1", service_account_env: "SA" };

Deno.test("cloud config: Azure needs its resource endpoint and a key, and takes no SDK path tail", () => {
  assert.deepEqual(problems({ ...azure, azure: {} }), []);
  assert.deepEqual(problems({ ...azure, kind: "openai-responses", azure: { auth: "bearer" } }), []);
  assert.deepEqual(problems({ kind: "openai-chat", azure: {} }), [
    "upstreams.0.base_url: is required with azure: the resource endpoint, e.g. " +
    "https://my-resource.openai.azure.com",
    "upstreams.0.api_key_env: is required with azure: the env var holding the api-key or " +
    "Entra ID token",
  ]);
  for (const tail of ["/openai", "/openai/v1/", "/OpenAI/v1"]) {
    assert.match(
      problems({ ...azure, base_url: `https://res.openai.azure.com${tail}`, azure: {} })[0]!,
      /^upstreams\.0\.base_url: with azure is the resource endpoint without "\/openai"/,
    );
  }
  // A prefix of a proxy in front (API Management) is fine.
  assert.deepEqual(
    problems({ ...azure, base_url: "https://apim.example.com/aoai", azure: {} }),
    [],
  );
  assert.match(problems({ ...azure, azure: { api_version: "2024-10-21&x=1" } })[0]!, /api-version/);
  assert.match(problems({ ...azure, azure: { auth: "entra" } })[0]!, /"api-key" or "bearer"/);
  assert.match(
    problems({ ...azure, azure: { deployment: "d" } })[0]!,
    /unknown field "deployment"/,
  );
  assert.deepEqual(problems({ kind: "gemini", azure: {} }), [
    'upstreams.0.azure: unknown field "azure" (it belongs to another kind of entry)',
  ]);
});

Deno.test("cloud config: Vertex takes exactly one way to authenticate, never api_key_env", () => {
  assert.deepEqual(problems({ kind: "gemini", vertex }), []);
  assert.deepEqual(problems({ kind: "anthropic", vertex }), []);
  const noAuth = { project: "p", location: "global" };
  assert.deepEqual(problems({ kind: "gemini", vertex: noAuth }), [
    "upstreams.0.vertex: must set exactly one of service_account_env and access_token_env",
  ]);
  assert.deepEqual(problems({ kind: "gemini", vertex: { ...vertex, access_token_env: "T" } }), [
    "upstreams.0.vertex: must set exactly one of service_account_env and access_token_env",
  ]);
  assert.deepEqual(problems({ kind: "gemini", api_key_env: "K", vertex }), [
    "upstreams.0.api_key_env: is not used with vertex: set vertex.service_account_env or " +
    "vertex.access_token_env",
  ]);
  assert.match(
    problems({
      kind: "gemini",
      vertex: { ...vertex, service_account_env: "PULSEGATE_DB_AUTH_TOKEN" },
    })[0]!,
    /vertex.service_account_env: may not name a PULSEGATE_ variable/,
  );
  assert.match(
    problems({ kind: "gemini", vertex: { ...vertex, location: "us central" } })[0]!,
    /location/,
  );
  assert.match(
    problems({ kind: "gemini", vertex: { ...vertex, project: "../x" } })[0]!,
    /project id/,
  );
  assert.deepEqual(problems({ kind: "openai-chat", vertex }), [
    'upstreams.0.vertex: unknown field "vertex" (it belongs to another kind of entry)',
  ]);
});

Deno.test("cloud config: Vertex's host follows the location unless base_url is set", () => {
  const base = (upstream: Record<string, unknown>) => {
    const checked = check(upstream);
    assert.ok(checked.ok);
    return upstreamBaseUrl(checked.config.upstreams[0]!);
  };
  assert.equal(base({ kind: "gemini", vertex }), "https://us-central1-aiplatform.googleapis.com");
  assert.equal(
    base({ kind: "anthropic", vertex: { ...vertex, location: "global" } }),
    "https://aiplatform.googleapis.com",
  );
  assert.equal(
    base({ kind: "gemini", base_url: "https://psc.example.internal/", vertex }),
    "https://psc.example.internal",
  );
});

Deno.test("cloud config: a hop's span names Azure OpenAI and Vertex AI as the provider", () => {
  const provider = (upstream: Record<string, unknown>) => {
    const checked = check(upstream);
    assert.ok(checked.ok);
    const attempt = { trace: { spanId: "00f067aa0ba902b7" } } as AttemptRecord;
    const span = traceUpstream({ url: "https://host.example/x", headers: new Headers() }, {
      req: { live: { record: {} as RequestRecord } },
      attempt: { record: attempt },
      upstream: checked.config.upstreams[0]!,
    });
    return span?.provider;
  };
  assert.equal(provider({ ...azure, azure: {} }), "azure.ai.openai");
  assert.equal(provider(azure), "openai");
  assert.equal(provider({ kind: "anthropic", vertex }), "gcp.vertex_ai");
  assert.equal(provider({ kind: "gemini" }), "gcp.gemini");
});
