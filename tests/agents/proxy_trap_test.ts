/** The trap the agents get as their proxy: outside hosts refused and noted, loopback passed on. */
import assert from "node:assert/strict";
import { startProxyTrap } from "./proxy_trap.ts";

async function exchange(url: string, head: string): Promise<string> {
  const port = Number(new URL(url).port);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(new TextEncoder().encode(head));
    let text = "";
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return text;
      text += new TextDecoder().decode(buf.subarray(0, n));
      if (text.includes("\r\n\r\n") && /hello from loopback|Forbidden/.test(text)) return text;
    }
  } finally {
    conn.close();
  }
}

Deno.test("the proxy trap refuses a CONNECT to an outside host and notes it", async () => {
  const trap = startProxyTrap();
  try {
    const answer = await exchange(
      trap.url,
      "CONNECT registry.example.org:443 HTTP/1.1\r\nHost: registry.example.org:443\r\n\r\n",
    );
    assert.match(answer, /^HTTP\/1\.1 403 Forbidden/);
    assert.deepEqual(trap.hits, [{
      method: "CONNECT",
      target: "registry.example.org:443",
      host: "registry.example.org",
      passedThrough: false,
    }]);
  } finally {
    await trap.close();
  }
});

Deno.test("the proxy trap passes a loopback request on and notes it", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => new Response(`hello from loopback ${new URL(req.url).pathname}`),
  );
  const trap = startProxyTrap();
  try {
    const target = `http://127.0.0.1:${server.addr.port}/path`;
    const answer = await exchange(
      trap.url,
      `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${server.addr.port}\r\nConnection: close\r\n\r\n`,
    );
    assert.match(answer, /^HTTP\/1\.1 200/);
    assert.match(answer, /hello from loopback \/path/);
    assert.deepEqual(trap.hits, [{
      method: "GET",
      target,
      host: "127.0.0.1",
      passedThrough: true,
    }]);
  } finally {
    await trap.close();
    await server.shutdown();
  }
});
