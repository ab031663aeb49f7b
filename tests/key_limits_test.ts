import assert from "node:assert/strict";
import { ADMIN_TOKEN, config, ENV } from "./fixtures/key_limits_config.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { eventually, postJson, type TestGateway, withGateway } from "./harness.ts";

/**
 * docs/config.md "Prices and key limits": a limited key's usage written by the history worker, a
 * real worker thread beside a real gateway. The limits themselves are tested in virtual time
 * (tests/virtual/key_limits_test.ts).
 */

function withLimits(
  run: (gw: TestGateway, calls: () => number) => Promise<void>,
  opts: { historyWorker?: boolean } = {},
) {
  return withGateway(async (gw, [up]) => {
    up!.setHandler((call) => {
      const big = JSON.stringify(call.json).includes("big");
      // Big: 100k input and 50k output tokens, 1 + 1 USD at the prices above.
      const usage = big ? { input: 100_000, output: 50_000 } : { input: 60, output: 40 };
      const stream = (call.json as { stream?: boolean }).stream;
      return stream ? chatStream({ text: ["h", "i"], usage }) : chatWhole({ text: ["hi"], usage });
    });
    await run(gw, () => up!.calls.length);
  }, {
    config: ([url]) => config(url!),
    env: { ...ENV, PULSEGATE_ADMIN_TOKEN: ADMIN_TOKEN },
    historyWorker: opts.historyWorker,
  });
}

Deno.test("a limited key's usage is written by the history worker, never on the serving thread", async () => {
  await withLimits(async (gw, calls) => {
    // With a local file, the serving thread's connection blocks that thread for as long as a
    // locked database makes a write wait (its busy timeout, 200 ms): key usage must not use it.
    const client = gw.db.client;
    const batch = client.batch.bind(client);
    const execute = client.execute.bind(client);
    const onServingThread: string[] = [];
    const note = (sql: string) => /key_usage/i.test(sql) && !/^\s*SELECT/i.test(sql);
    client.batch = (statements, mode) => {
      for (const s of statements) {
        const sql = typeof s === "string" ? s : Array.isArray(s) ? s[0] : s.sql;
        if (note(sql)) onServingThread.push(sql);
      }
      return batch(statements, mode);
    };
    client.execute = ((statement: string | { sql: string }, args?: never) => {
      const sql = typeof statement === "string" ? statement : statement.sql;
      if (note(sql)) onServingThread.push(sql);
      return execute(statement as never, args);
    }) as typeof client.execute;
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await postJson(`${gw.url}/v1/chat/completions`, {
          model: "smart",
          messages: [{ role: "user", content: "q" }],
        }, { authorization: "Bearer sk-oai" });
        await res.body?.cancel();
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 429]);
      assert.equal(calls(), 2);
      await eventually(async () => {
        const rows = await execute(
          "SELECT SUM(requests) AS n FROM key_usage WHERE key_id = 'oai' AND kind = 'second'",
        );
        return Number(rows.rows[0]?.n ?? 0) === 2;
      }, { what: "the two admitted requests in key_usage" });
      assert.deepEqual(onServingThread, []);
    } finally {
      client.batch = batch;
      client.execute = execute;
    }
  }, { historyWorker: true });
});
