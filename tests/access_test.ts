import assert from "node:assert/strict";
import { isAdmin } from "../gateway/policy/access.ts";
import { safeEqual } from "../gateway/policy/auth.ts";
import { readSettings } from "../gateway/start/settings.ts";

const req = (authorization?: string) =>
  new Request("http://127.0.0.1/metrics", {
    headers: authorization ? { authorization } : {},
  });

Deno.test("admin access: token when set, loopback only when not", () => {
  assert.equal(isAdmin(req(), { adminToken: undefined, loopback: true }), true);
  assert.equal(isAdmin(req(), { adminToken: undefined, loopback: false }), false);
  assert.equal(isAdmin(req("Bearer t0k"), { adminToken: "t0k", loopback: false }), true);
  assert.equal(isAdmin(req("Bearer t0"), { adminToken: "t0k", loopback: true }), false);
  assert.equal(isAdmin(req(), { adminToken: "t0k", loopback: true }), false);
});

Deno.test("tokens are compared whole", () => {
  assert.equal(safeEqual("abc", "abc"), true);
  assert.equal(safeEqual("abc", "abd"), false);
  assert.equal(safeEqual("abc", "abcd"), false);
  assert.equal(safeEqual("", "a"), false);
});

Deno.test("settings: the documented defaults and open metrics only when asked", () => {
  const s = readSettings(() => undefined);
  assert.equal(s.host, "127.0.0.1");
  assert.equal(s.port, 8080);
  assert.equal(s.dbUrl, "file:data/pulsegate.db");
  assert.equal(s.timeScale, 1);
  assert.equal(s.metricsOpen, false);
  assert.equal(
    readSettings((n) => (n === "PULSEGATE_METRICS_OPEN" ? "1" : undefined)).metricsOpen,
    true,
  );
  assert.throws(() => readSettings((n) => (n === "PULSEGATE_TIME_SCALE" ? "0" : undefined)));
});
