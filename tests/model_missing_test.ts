/**
 * A provider's answer that the model it was sent is not there (gateway/formats/model_missing.ts):
 * each recorded answer (tests/fixtures/model_missing/) is read as it says, and only for the model
 * the gateway sent; what decides the hop is the verdict table's `model_missing` row
 * (docs/design.md "Cooldown"). Pure: no gateway, no network.
 */
import assert from "node:assert/strict";
import type { UpstreamKind } from "../gateway/formats/format.ts";
import { UPSTREAM_ADAPTERS } from "../gateway/formats/formats.ts";
import { isModelMissing } from "../gateway/formats/model_missing.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import { statusEnding } from "../gateway/forward/hop_ending.ts";

interface Fixture {
  source: string;
  kind: UpstreamKind;
  model: string;
  missing: boolean;
  status: number;
  headers: Record<string, string>;
  body: string;
}

function read(dir: URL): [string, Fixture][] {
  return [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".json"))
    .map((e) => e.name)
    .sort()
    .map((name) => [name, JSON.parse(Deno.readTextFileSync(new URL(name, dir)))]);
}

const decoded = (f: Pick<Fixture, "kind" | "status" | "body" | "headers">) =>
  UPSTREAM_ADAPTERS[f.kind].decodeError(f.status, f.body, { headers: new Headers(f.headers) });

const MISSING = read(new URL("./fixtures/model_missing/", import.meta.url));

Deno.test("every recorded 'model not there' answer is read as the member's, and the other 404s and 400s are not", () => {
  assert.ok(MISSING.length >= 10);
  assert.ok(MISSING.some(([, f]) => !f.missing));
  for (const [name, f] of MISSING) {
    const error = decoded(f);
    assert.equal(isModelMissing(error, f.model), f.missing, name);
    const ending = statusEnding(error, { model: f.model });
    assert.equal(ending.how, f.missing ? "model_missing" : "rejected", name);
  }
});

Deno.test("a missing model is the member's only when the answer names the model the gateway sent", () => {
  for (const [name, f] of MISSING.filter(([, f]) => f.missing)) {
    const error = decoded(f);
    // Bedrock and Azure name none: their model is in the path, where a caller cannot put one.
    const named = error.message.includes(f.model);
    // Another model, of which the sent one is a prefix: a tool's model the caller chose.
    assert.equal(isModelMissing(error, `${f.model.slice(0, -1)}`), !named, name);
    assert.equal(isModelMissing(error, "some-other-model"), !named, name);
    // Without the model (the route's last word, judged already) any model named will do.
    assert.equal(isModelMissing(error), true, name);
  }
  const sent = "gpt-4";
  const tool = upstreamStatusError(400, {
    kind: "openai-chat",
    body: JSON.stringify({
      error: {
        message: "The model `gpt-4o-image` does not exist or you do not have access to it.",
        type: "invalid_request_error",
        param: "tools[0].model",
        code: "model_not_found",
      },
    }),
  });
  assert.equal(isModelMissing(tool, sent), false, "gpt-4 is not named by gpt-4o-image");
  assert.equal(statusEnding(tool, { model: sent }).how, "rejected");
});

Deno.test("no context-length refusal, 5xx or 429 is a missing model", () => {
  const overflow = read(new URL("./fixtures/context_overflow/", import.meta.url));
  assert.ok(overflow.length >= 10);
  for (const [name, f] of overflow) assert.equal(isModelMissing(decoded(f)), false, name);
  const body = JSON.stringify({
    error: { message: "The model `m` does not exist", code: "model_not_found" },
  });
  for (const status of [429, 500, 503]) {
    const error = upstreamStatusError(status, { kind: "openai-chat", body });
    assert.equal(isModelMissing(error, "m"), false, String(status));
    assert.notEqual(statusEnding(error, { model: "m" }).how, "model_missing");
  }
});
