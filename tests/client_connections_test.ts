import assert from "node:assert/strict";
import { ClientConnections } from "../gateway/start/client_connections.ts";
import type { ConnectionHandler, ConnectionServer } from "../gateway/start/serve_on_connection.ts";

/**
 * docs/deploy.md "Connection limits", the bookkeeping alone: a clock the test moves, fake
 * connections whose requests the test starts and ends. What Deno does with a closed connection is
 * tests/connection_flood_test.ts's business.
 */

class FakeConnection {
  closed = false;
  handler!: ConnectionHandler;
  #end!: () => void;
  readonly server: ConnectionServer = {
    finished: new Promise<void>((resolve) => (this.#end = resolve)),
    shutdown: () => {
      this.closed = true;
      this.#end();
      return Promise.resolve();
    },
  };

  /** A request in flight until `end()` is called. */
  request(): { end(): void } {
    let ended = false;
    const info = {
      get remoteAddr(): Deno.NetAddr {
        if (ended) throw new TypeError("Request closed");
        return { transport: "tcp", hostname: "127.0.0.1", port: 1 };
      },
      completed: new Promise<void>(() => {}),
    };
    void this.handler(new Request("http://gateway.test/healthz"), info);
    return { end: () => (ended = true) };
  }
}

function setup(limits = { max: 3, headersMs: 1_000, keepAliveMs: 4_000 }) {
  let now = 0;
  const clients = new ClientConnections(limits, { now: () => now });
  const open = () => {
    const conn = new FakeConnection();
    void clients.track(() => new Response("ok"), (counted) => {
      conn.handler = counted;
      return conn.server;
    });
    return conn;
  };
  /** Moves the clock in sweep-sized steps, sweeping at each, as the server's interval does. */
  const advance = (ms: number, step = 100) => {
    for (let at = 0; at < ms; at += step) {
      now += step;
      clients.sweep();
    }
  };
  return { clients, open, advance, at: () => now };
}

Deno.test("a connection that sends no request is closed at the headers bound, not before", () => {
  const { open, advance } = setup();
  const silent = open();
  advance(900);
  assert.equal(silent.closed, false);
  advance(100);
  assert.equal(silent.closed, true);
});

Deno.test("an idle connection is closed between one and one and a quarter keep-alive bounds after its response", () => {
  for (const respondFor of [10_000, 0]) { // a long response (never cut), and one over at once
    const { open, advance, at } = setup();
    const conn = open();
    const request = conn.request();
    advance(respondFor);
    assert.equal(conn.closed, false);
    request.end();
    const ended = at();
    while (!conn.closed) advance(100);
    const idle = at() - ended;
    assert.ok(idle >= 4_000, `closed after ${idle} ms idle`);
    assert.ok(idle <= 4_000 + 1_000 + 100, `closed after ${idle} ms idle`);
  }
});

Deno.test("a request on an idle connection starts its keep-alive wait again", () => {
  const { open, advance } = setup();
  const conn = open();
  conn.request().end();
  for (let i = 0; i < 5; i++) {
    advance(3_000);
    conn.request().end();
  }
  assert.equal(conn.closed, false, "a request every 3 s keeps a 4 s keep-alive connection open");
});

Deno.test("at the cap: the longest-waiting connection gives way once it has waited 1 s; a busy one never", () => {
  const { clients, open, advance } = setup({ max: 3, headersMs: 60_000, keepAliveMs: 60_000 });
  const busy = open();
  busy.request();
  const idle = open();
  idle.request().end();
  const silent = open();
  assert.equal(clients.hasRoom(), false);
  assert.equal(clients.evictOldest(1_000), false, "nothing has waited 1 s yet");
  advance(1_000);
  assert.equal(clients.evictOldest(1_000), true);
  assert.equal(silent.closed, true, "one that never sent a request goes first");
  assert.equal(clients.hasRoom(), true, "a connection being closed no longer counts");
  assert.equal(clients.evictOldest(1_000), false, "the idle one was first seen idle just now");
  advance(1_000);
  assert.equal(clients.evictOldest(1_000), true);
  assert.equal(idle.closed, true);
  advance(5_000);
  assert.equal(clients.evictOldest(1_000), false);
  assert.equal(busy.closed, false, "a request in flight is never evicted");
});
