import assert from "node:assert/strict";
import { chatRoute, startTestGateway, type TestGateway } from "./harness.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

/** Which error body a caller gets: a client SDK's, or the operator surface's plain one. */
type Shape = "openai" | "anthropic" | "gemini" | "operator";

interface Case {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
  status: number;
  shape: Shape;
  code: string;
  allow?: string;
}

const GEMINI_BODY = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };

const CASES: Case[] = [
  // Gemini paths: empty, undecodable and unknown pieces after /models/.
  {
    method: "POST",
    path: "/v1beta/models/:generateContent",
    body: GEMINI_BODY,
    status: 400,
    shape: "gemini",
    code: "gw.client.invalid_request",
  },
  {
    method: "POST",
    path: "/v1beta/models/%:generateContent",
    body: GEMINI_BODY,
    status: 404,
    shape: "gemini",
    code: "gw.client.unknown_model",
  },
  {
    method: "POST",
    path: "/v1beta/models/smart:fooContent",
    body: GEMINI_BODY,
    status: 404,
    shape: "gemini",
    code: "gw.client.not_found",
  },
  {
    method: "POST",
    path: "/v1/models/smart:fooContent",
    body: GEMINI_BODY,
    status: 404,
    shape: "gemini",
    code: "gw.client.not_found",
  },
  {
    method: "POST",
    path: "/v1beta/models/smart",
    body: GEMINI_BODY,
    status: 404,
    shape: "gemini",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/v1beta/models/smart:generateContent",
    status: 405,
    shape: "gemini",
    code: "gw.client.method_not_allowed",
    allow: "POST",
  },
  {
    method: "GET",
    path: "/v1beta/cachedContents",
    status: 404,
    shape: "gemini",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/v1beta/models/nope",
    status: 404,
    shape: "gemini",
    code: "gw.client.unknown_model",
  },
  // OpenAI paths and the /v1 fallback.
  { method: "GET", path: "/v1/files", status: 404, shape: "openai", code: "gw.client.not_found" },
  {
    method: "GET",
    path: "/v1/responses/resp_123",
    status: 404,
    shape: "openai",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/v1/chat/completions",
    status: 405,
    shape: "openai",
    code: "gw.client.method_not_allowed",
    allow: "POST",
  },
  {
    method: "PUT",
    path: "/v1/responses",
    body: {},
    status: 405,
    shape: "openai",
    code: "gw.client.method_not_allowed",
    allow: "POST",
  },
  {
    method: "POST",
    path: "/v1/models",
    body: {},
    status: 405,
    shape: "openai",
    code: "gw.client.method_not_allowed",
    allow: "GET, HEAD",
  },
  { method: "GET", path: "/", status: 404, shape: "openai", code: "gw.client.not_found" },
  // Anthropic paths, and the headers its SDK sends on a shared or unknown path.
  {
    method: "GET",
    path: "/v1/messages",
    status: 405,
    shape: "anthropic",
    code: "gw.client.method_not_allowed",
    allow: "POST",
  },
  {
    method: "GET",
    path: "/v1/messages/batches",
    status: 404,
    shape: "anthropic",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/v1/messages/count_tokens",
    status: 405,
    shape: "anthropic",
    code: "gw.client.method_not_allowed",
    allow: "POST",
  },
  {
    method: "GET",
    path: "/v1/complete",
    headers: { "anthropic-version": "2023-06-01" },
    status: 404,
    shape: "anthropic",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/v1/models/nope",
    headers: { "anthropic-version": "2023-06-01" },
    status: 404,
    shape: "anthropic",
    code: "gw.client.unknown_model",
  },
  {
    method: "GET",
    path: "/v1/models/nope",
    headers: { "x-goog-api-key": "k" },
    status: 404,
    shape: "gemini",
    code: "gw.client.unknown_model",
  },
  // The operator's surface keeps its plain JSON errors.
  {
    method: "GET",
    path: "/admin/api/nope",
    status: 404,
    shape: "operator",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/admin/assets/nope.js",
    status: 404,
    shape: "operator",
    code: "gw.client.not_found",
  },
  {
    method: "GET",
    path: "/request/abc/abort",
    status: 404,
    shape: "operator",
    code: "gw.client.not_found",
  },
];

/** Asserts the body is the named shape and carries the gateway code where that shape keeps it. */
function assertShape(
  body: unknown,
  opts: { shape: Shape; code: string; status: number; path?: string },
): void {
  const b = body as Record<string, Record<string, unknown>>;
  const error = b.error;
  assert.ok(error, `no error object in ${JSON.stringify(body)}`);
  assert.equal(typeof error.message, "string");
  switch (opts.shape) {
    case "openai":
      assert.deepEqual(Object.keys(error).sort(), ["code", "message", "param", "type"]);
      assert.equal(error.code, opts.code);
      assert.equal(typeof error.type, "string");
      // The caller's mistake is never told as the server's fault.
      if (opts.status < 500) assert.notEqual(error.type, "server_error", `${opts.path ?? ""}`);
      break;
    case "anthropic":
      assert.equal(b.type, "error");
      assert.equal(typeof error.type, "string");
      if (opts.status < 500) assert.notEqual(error.type, "api_error", `${opts.path ?? ""}`);
      assert.deepEqual(error.details, { error_code: opts.code });
      break;
    case "gemini": {
      assert.equal(error.code, opts.status);
      assert.match(String(error.status), /^[A-Z_]+$/);
      if (opts.status < 500) {
        assert.doesNotMatch(
          String(error.status),
          /^(INTERNAL|UNIMPLEMENTED)$/,
          `${opts.path ?? ""}`,
        );
      }
      const details = error.details as Record<string, unknown>[];
      assert.equal(details[0]?.reason, opts.code);
      break;
    }
    case "operator":
      assert.deepEqual(Object.keys(error).sort(), ["code", "message"]);
      assert.equal(error.code, opts.code);
      break;
  }
}

async function send(gw: TestGateway, c: Pick<Case, "method" | "path" | "headers" | "body">) {
  return await fetch(`${gw.url}${c.path}`, {
    method: c.method,
    headers: { "content-type": "application/json", ...c.headers },
    body: c.body === undefined ? undefined : JSON.stringify(c.body),
  });
}

Deno.test("unknown paths and methods are answered in the client's own format", async () => {
  const upstream = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([upstream.url]));
  try {
    for (const c of CASES) {
      const label = `${c.method} ${c.path}`;
      const res = await send(gw, c);
      assert.equal(res.status, c.status, label);
      assert.match(res.headers.get("content-type") ?? "", /^application\/json/, label);
      assert.equal(res.headers.get("x-pulsegate-error"), "client", label);
      assert.ok(res.headers.get("x-request-id"), label);
      assert.equal(res.headers.get("allow"), c.allow ?? null, label);
      const text = await res.text();
      let body: unknown;
      assert.doesNotThrow(() => (body = JSON.parse(text)), `${label}: ${text}`);
      assertShape(body, c);
    }
    assert.equal(upstream.calls.length, 0, "no bad path reached an upstream");
  } finally {
    await gw.stop();
    await upstream.close();
  }
});

Deno.test("a bad Gemini model in the path is recorded like any bad request", async () => {
  const upstream = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([upstream.url]));
  try {
    const res = await send(gw, {
      method: "POST",
      path: "/v1beta/models/%:generateContent",
      body: GEMINI_BODY,
    });
    assert.equal(res.status, 404);
    const body = await res.json();
    assert.match(body.error.message, /model '%' is not a route/);
    const { request } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(request.clientFormat, "gemini");
    assert.equal(request.route, "%");
    assert.equal(request.status, 404);
    assert.equal(request.errorCode, "gw.client.unknown_model");
  } finally {
    await gw.stop();
    await upstream.close();
  }
});

Deno.test("a route that throws answers a JSON 500 in the client's format", async () => {
  const gw = await startTestGateway(chatRoute(["http://127.0.0.1:9"]));
  const config = gw.state.config;
  const breakConfig = (thrown: unknown) =>
    Object.defineProperty(gw.state, "config", {
      configurable: true,
      get() {
        throw thrown;
      },
    });
  try {
    const cases: { path: string; headers?: Record<string, string>; shape: Shape }[] = [
      { path: "/v1/models", shape: "openai" },
      { path: "/v1/models", headers: { "x-goog-api-key": "k" }, shape: "gemini" },
      { path: "/v1beta/models/smart", shape: "gemini" },
      {
        path: "/v1/models/smart",
        headers: { "anthropic-version": "2023-06-01" },
        shape: "anthropic",
      },
      { path: "/readyz", shape: "operator" },
    ];
    // An Error, and a thrown non-Error, which Hono alone would leave to the runtime's text 500.
    for (const thrown of [new TypeError("config went missing"), "a thrown string"]) {
      breakConfig(thrown);
      for (const c of cases) {
        const label = `${c.path} ${JSON.stringify(c.headers ?? {})} (${String(thrown)})`;
        const res = await send(gw, { method: "GET", ...c });
        assert.equal(res.status, 500, label);
        assert.equal(res.headers.get("x-pulsegate-error"), "gateway", label);
        const body = await res.json();
        assertShape(body, { shape: c.shape, code: "gw.gateway.internal", status: 500 });
        assert.match(JSON.stringify(body), /internal gateway error/, label);
      }
    }
  } finally {
    Object.defineProperty(gw.state, "config", {
      value: config,
      writable: true,
      configurable: true,
      enumerable: true,
    });
    await gw.stop();
  }
});
