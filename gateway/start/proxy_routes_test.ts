import assert from "node:assert/strict";
import { directProxy, PROXY_ROUTES } from "./proxy_routes.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import type { OriginCheckDeps } from "../accept/origin_check.ts";

/** Deps in open mode (loopback, no admin token): what the origin check reads, and a log. */
function openDeps(events: string[]): ProxyDeps & OriginCheckDeps {
  return {
    adminToken: undefined,
    state: { loopback: true, config: null },
    log: { event: (name: string) => events.push(name) },
  } as unknown as ProxyDeps & OriginCheckDeps;
}

Deno.test("the direct path takes only a POST to one of the proxy's own paths", () => {
  const direct = directProxy(openDeps([]));
  const post = (path: string) =>
    new Request(`http://127.0.0.1:8080${path}`, { method: "POST", body: "{}" });
  for (const path of ["/v1/chat/completions/", "/v1/models", "/v1/chat", "/"]) {
    assert.equal(direct(post(path)), null, path);
  }
  assert.equal(direct(new Request("http://127.0.0.1:8080/v1/chat/completions")), null);
  assert.equal(PROXY_ROUTES.size, 7);
});

Deno.test("the direct path reads a path as the router does, and refuses another host name in open mode as the router's check does, in the client's format", async () => {
  const direct = directProxy(openDeps([]));
  const request = new Request("http://rebound.example/v1/messages?beta=true", {
    method: "POST",
    headers: { host: "rebound.example", "content-type": "application/json" },
    body: "{}",
  });
  const answer = await direct(request);
  assert.ok(answer);
  assert.equal(answer.status, 403);
  const body = await answer.json();
  // Anthropic's shape: the path names the client's format.
  assert.equal(body.type, "error");
  assert.equal(body.error.type, "permission_error");
  assert.match(body.error.message, /host name "rebound.example" is not served/);
  // Percent-encoded, the router's reading of it is /v1/messages: refused here too, not left over.
  const encoded = await direct(
    new Request("http://rebound.example/v1/%6Dessages", {
      method: "POST",
      headers: { host: "rebound.example", "content-type": "application/json" },
      body: "{}",
    }),
  );
  assert.equal(encoded?.status, 403);
});
