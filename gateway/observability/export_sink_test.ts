/**
 * The exporting sink (gateway/observability/export_sink.ts): every row still reaches history, and
 * a closed request goes to the exporter with its hops in order, only when some destination is
 * enabled to receive it (docs/observability.md "Export destinations").
 */
import assert from "node:assert/strict";
import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import { attemptRecord, requestRecord } from "../../tests/db_helpers.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { DestinationSchema } from "./destination_schema.ts";
import { exportingSink } from "./export_sink.ts";
import { Exporter, type FinishedRecord } from "./exporter.ts";

function setup(destinations: { enabled: boolean; kind: "webhook" | "otlp-traces" }[]) {
  const pushed: FinishedRecord[] = [];
  const exporter = new Exporter({
    clock: new VirtualClock(),
    env: () => undefined,
    fetch: () => Promise.resolve(new Response("")),
    log: { event: () => {} },
  });
  exporter.push = (record) => void pushed.push(record);
  exporter.setDestinations(
    destinations.map((d, i) =>
      DestinationSchema.parse({ id: `d${i}`, url: "http://127.0.0.1:9/x", ...d })
    ),
  );
  const rows: string[] = [];
  const inner = {
    writeRequest: (r: RequestRecord) => void rows.push(`${r.id} ${r.state}`),
    writeAttempt: (a: AttemptRecord) => void rows.push(`${a.requestId}#${a.hop}`),
  };
  return { sink: exportingSink(inner, exporter), exporter, pushed, rows };
}

function runRequest(sink: ReturnType<typeof setup>["sink"], id: string): void {
  sink.writeRequest(requestRecord({ id, state: "open" }));
  sink.writeAttempt(attemptRecord({ requestId: id, hop: 2 }));
  sink.writeAttempt(attemptRecord({ requestId: id, hop: 1 }));
  sink.writeRequest(requestRecord({ id, state: "closed" }));
}

Deno.test("export sink: a closed request goes to the exporter with its hops in order", () => {
  const { sink, pushed, rows, exporter } = setup([{ enabled: true, kind: "webhook" }]);
  assert.equal(exporter.receiving(), true);
  assert.equal(exporter.tracing(), false);
  runRequest(sink, "r1");
  assert.deepEqual(rows, ["r1 open", "r1#2", "r1#1", "r1 closed"]);
  assert.equal(pushed.length, 1);
  assert.equal(pushed[0]!.request.id, "r1");
  assert.deepEqual(pushed[0]!.attempts.map((a) => a.hop), [1, 2]);
});

Deno.test("export sink: with no destination enabled every row is written and no record is made", () => {
  for (const destinations of [[], [{ enabled: false, kind: "webhook" as const }]]) {
    const { sink, pushed, rows, exporter } = setup(destinations);
    assert.equal(exporter.receiving(), false);
    runRequest(sink, "r1");
    assert.deepEqual(rows, ["r1 open", "r1#2", "r1#1", "r1 closed"]);
    assert.equal(pushed.length, 0);
    // A destination enabled later receives the requests that end from then on, with their hops.
    exporter.setDestinations([
      DestinationSchema.parse({ id: "t", kind: "otlp-traces", url: "http://127.0.0.1:9/t" }),
    ]);
    assert.equal(exporter.tracing(), true);
    runRequest(sink, "r2");
    assert.deepEqual(pushed.map((p) => [p.request.id, p.attempts.map((a) => a.hop)]), [
      ["r2", [1, 2]],
    ]);
  }
});
