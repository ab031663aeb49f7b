import assert from "node:assert/strict";
import { readBodyBytes } from "../accept/body_bytes.ts";
import { ClientConnections } from "./client_connections.ts";
import type { ConnectionHandler, ConnectionServer } from "./serve_on_connection.ts";

/**
 * docs/deploy.md "Connection limits", the bookkeeping alone: a clock the test moves, fake
 * connections whose requests the test starts and ends. What Deno does with a closed connection is
 * tests/connection_flood_test.ts's business.
 */

class FakeConnection {
  closed = false;
  /** Closed forcefully (`abort`), as after an answer that left body bytes due. */
  aborted = false;
  handler!: ConnectionHandler;
  #end!: () => void;
  readonly server: ConnectionServer = {
    finished: new Promise<void>((resolve) => (this.#end = resolve)),
    shutdown: () => {
      this.closed = true;
      this.#end();
      return Promise.resolve();
    },
    abort: () => {
      this.aborted = true;
      this.#end();
    },
  };

  /** Serves `request`; `taken()` is Deno taking the answer: `completed` settles, the request ends. */
  send(request: Request): { response: Promise<Response>; taken(): void } {
    let ended = false;
    const completed = Promise.withResolvers<void>();
    const info = {
      get remoteAddr(): Deno.NetAddr {
        if (ended) throw new TypeError("Request closed");
        return { transport: "tcp", hostname: "127.0.0.1", port: 1 };
      },
      completed: completed.promise,
    };
    const response = Promise.resolve(this.handler(request, info));
    return {
      response,
      taken: () => {
        ended = true;
        completed.resolve();
      },
    };
  }

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

/**
 * A connection served by `answer`, closed `lingerMs` after an answer that left body bytes due,
 * on a clock the test moves (`advance`): the linger fires at its instant, never by itself.
 */
function served(
  answer: (request: Request) => Response | Promise<Response>,
  lingerMs = 50,
) {
  let now = 0;
  let timers: { at: number; fn: () => void }[] = [];
  const after = (ms: number, fn: () => void) => {
    const timer = { at: now + ms, fn };
    timers.push(timer);
    return () => (timers = timers.filter((t) => t !== timer));
  };
  const clients = new ClientConnections({
    max: 3,
    headersMs: 60_000,
    keepAliveMs: 60_000,
    lingerMs,
  }, { now: () => now, after });
  const conn = new FakeConnection();
  void clients.track((request) => answer(request), (counted) => {
    conn.handler = counted;
    return conn.server;
  });
  /** Moves the clock by `ms`, firing each timer due on the way, after pending callbacks ran. */
  const advance = async (ms: number) => {
    await turn();
    const until = now + ms;
    for (;;) {
      const next = timers.filter((t) => t.at <= until).sort((x, y) => x.at - y.at)[0];
      if (!next) break;
      now = next.at;
      timers = timers.filter((t) => t !== next);
      next.fn();
    }
    now = until;
  };
  return { clients, conn, advance, pending: () => timers.length };
}

/** Lets the callbacks queued so far run (Deno taking an answer settles `completed`). */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A POST declaring `declared` bytes of body and carrying `sent` of them. */
function post(opts: { declared: number; sent: string }): Request {
  return new Request("http://gateway.test/v1/chat/completions", {
    method: "POST",
    body: opts.sent,
    headers: { "content-length": String(opts.declared) },
  });
}

const REFUSED = () => new Response("no", { status: 401 });
Deno.test("an answer before the declared body is read says connection: close, and the connection is closed forcefully a linger after Deno took it", async () => {
  const { conn, advance } = served(REFUSED);
  const sent = conn.send(post({ declared: 5_000, sent: "{" }));
  const response = await sent.response;
  assert.equal(response.status, 401);
  assert.equal(response.headers.get("connection"), "close");
  await advance(150);
  assert.equal(conn.aborted, false, "not while Deno has not taken the answer");
  sent.taken();
  await advance(49);
  assert.equal(conn.aborted, false, "not before the 50 ms linger");
  await advance(1);
  assert.equal(conn.aborted, true, "at the linger");
  assert.equal(conn.closed, false, "forcefully: a graceful close would wait for the body");
});

Deno.test("an answer after the body was read to its end keeps the connection, and one to a request without a body is passed through as is", async () => {
  const ok = new Response("ok");
  const { conn, advance, pending } = served(async (request) => {
    if (request.method === "GET") return ok;
    await readBodyBytes(request, { limit: 1_000, signal: new AbortController().signal });
    return new Response("read");
  });
  const whole = conn.send(post({ declared: 2, sent: "{}" }));
  const read = await whole.response;
  assert.equal(await read.text(), "read");
  assert.equal(read.headers.get("connection"), null);
  whole.taken();
  const get = conn.send(new Request("http://gateway.test/healthz"));
  assert.equal(await get.response, ok, "the handler's own response, untouched");
  get.taken();
  await advance(250); // five lingers
  assert.equal(pending(), 0, "no close was armed");
  assert.equal(conn.aborted, false);
});

Deno.test("a connection that has had a request since the early answer (HTTP/2 streams) is not closed after the linger", async () => {
  const { conn, advance } = served((request) =>
    request.method === "GET" ? new Response("ok") : REFUSED()
  );
  const early = conn.send(post({ declared: 5_000, sent: "{" }));
  assert.equal((await early.response).headers.get("connection"), "close");
  const next = conn.send(new Request("http://gateway.test/healthz"));
  early.taken();
  await advance(250);
  assert.equal(conn.aborted, false, "the later request is still in flight");
  next.taken();
});

Deno.test("a handler that fails before reading the body: its connection is closed after the linger too", async () => {
  const { conn, advance } = served(() => Promise.reject(new Error("boom")));
  const sent = conn.send(post({ declared: 5_000, sent: "{" }));
  await assert.rejects(sent.response, /boom/);
  sent.taken();
  await advance(49);
  assert.equal(conn.aborted, false);
  await advance(1);
  assert.equal(conn.aborted, true);
});

Deno.test("a connection with body bytes due is closed forcefully at its linger, never gracefully: not when it gives way at the cap, not at shutdown", async () => {
  const { clients, conn, advance } = served(REFUSED, 50);
  const sent = conn.send(post({ declared: 5_000, sent: "{" }));
  await sent.response;
  sent.taken();
  await advance(1);
  // Deno's graceful close would wait for the body, and nothing could close the connection after.
  assert.equal(clients.evictOldest(0), true, "it gives way at the cap");
  assert.equal(clients.hasRoom(), true, "and no longer counts against it");
  const closing = clients.closeAll();
  assert.equal(conn.closed, false, "shutdown does not close it gracefully");
  await advance(50);
  await closing;
  assert.equal(conn.aborted, true);
  assert.equal(conn.closed, false);
});
