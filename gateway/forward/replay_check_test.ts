/**
 * The replay comparison (gateway/forward/replay_check.ts) as docs/liveness.md "Replay" states
 * it, with what the client has as StreamResume records it: exact per segment, event boundaries
 * ignored, no normalisation. Pure: no gateway, microseconds.
 */
import assert from "node:assert/strict";
import type { IrEvent } from "../formats/ir.ts";
import { ReplayCheck, type ReplayStep } from "./replay_check.ts";
import { RESUME_HELD_CHARS, StreamResume } from "./stream_resume.ts";

/** What the client has after `events` went out, as a replay of it is checked. */
function checkAfter(events: IrEvent[]): ReplayCheck {
  const resume = new StreamResume(true, { client: "openai-chat" });
  resume.pass({ events });
  return resume.replayCheck();
}

const text = (t: string): IrEvent => ({ type: "text", text: t });
const state = (step: ReplayStep) => step.state;

/** Feeds `frames` until the check decides; answers the last step. */
function replay(check: ReplayCheck, frames: IrEvent[][]): ReplayStep {
  let step: ReplayStep = { state: "matching" };
  for (const frame of frames) {
    step = check.push(frame);
    if (step.state !== "matching") break;
  }
  return step;
}

Deno.test("replay check: the characters count, not how the events cut them; the rest is what lies beyond", () => {
  const step = replay(checkAfter([text("Hello, "), text("wor")]), [
    [text("H")],
    [text("ello, w")],
    [text("orld"), text("!"), { type: "finish", reason: "stop" }],
  ]);
  assert.deepEqual(step, {
    state: "caught_up",
    rest: [text("ld"), text("!"), { type: "finish", reason: "stop" }],
  });
  // Caught up exactly at an event's end: nothing of that event is left over.
  const exact = replay(checkAfter([text("Hello")]), [[text("Hel"), text("lo"), text(" you")]]);
  assert.deepEqual(exact, { state: "caught_up", rest: [text(" you")] });
});

Deno.test("replay check: no normalisation: Unicode forms, whitespace and case all differ", () => {
  const composed = "caf\u00e9";
  const decomposed = "cafe\u0301";
  assert.equal(state(replay(checkAfter([text(composed)]), [[text(decomposed + "!")]])), "diverged");
  assert.equal(state(replay(checkAfter([text("a  b")]), [[text("a b c")]])), "diverged");
  assert.equal(state(replay(checkAfter([text("Hello")]), [[text("hello!")]])), "diverged");
  assert.equal(state(replay(checkAfter([text("Hello ")]), [[text("Hello\n")]])), "diverged");
  assert.equal(state(replay(checkAfter([text(composed)]), [[text(composed + "!")]])), "caught_up");
});

Deno.test("replay check: where it parted is told in code points of what the client has, never its text", () => {
  const step = replay(checkAfter([text("\u{1F600} ok"), text(" then")]), [
    [text("\u{1F600} ok th")],
    [
      text("ose"),
    ],
  ]);
  assert.deepEqual(step, { state: "diverged", at: 7, of: 9, why: "different text" });
  const first = replay(checkAfter([text("Hello")]), [[text("Hel"), {
    type: "finish",
    reason: "stop",
  }]]);
  assert.deepEqual(first, { state: "diverged", at: 3, of: 5, why: "it finished first" });
});

Deno.test("replay check: reasoning the client saw counts, in its place before the text", () => {
  const had = checkAfter([{ type: "reasoning", text: "think" }, text("Answer")]);
  const same = replay(had, [[{ type: "reasoning", text: "thi" }], [{
    type: "reasoning",
    text: "nk",
  }, text("Answer.")]]);
  assert.deepEqual(same, { state: "caught_up", rest: [text(".")] });
  const skipped = replay(checkAfter([{ type: "reasoning", text: "think" }, text("A")]), [[
    text("A"),
  ]]);
  assert.deepEqual(skipped, {
    state: "diverged",
    at: 0,
    of: 6,
    why: "text where the client has reasoning",
  });
  // Reasoning that goes on past the client's, where the client then got text, is another answer.
  const longer = replay(checkAfter([{ type: "reasoning", text: "hm" }, text("A")]), [[
    { type: "reasoning", text: "hmm" },
  ]]);
  assert.equal(state(longer), "diverged");
});

Deno.test("replay check: tool calls match by name and arguments in order, never by id or index", () => {
  const had = checkAfter([
    text("Look: "),
    { type: "tool_call_start", index: 0, id: "call_1", name: "lookup" },
    { type: "tool_call_args", index: 0, args: '{"q":' },
  ]);
  const step = replay(had, [[text("Look: ")], [
    { type: "tool_call_start", index: 4, id: "toolu_9", name: "lookup" },
    { type: "tool_call_args", index: 4, args: '{"q":"x"}' },
  ]]);
  assert.deepEqual(step, {
    state: "caught_up",
    rest: [{ type: "tool_call_args", index: 4, args: '"x"}' }],
  });
  assert.deepEqual([...had.calls], [[4, 0]]);
  const renamed = replay(
    checkAfter([{ type: "tool_call_start", index: 0, id: "a", name: "lookup" }]),
    [[{ type: "tool_call_start", index: 0, id: "a", name: "lookup_v2" }]],
  );
  assert.equal(state(renamed), "diverged");
  // The client has the call but no arguments yet: a matching start is enough to take over.
  const started = replay(
    checkAfter([{ type: "tool_call_start", index: 0, id: "a", name: "f" }]),
    [[{ type: "tool_call_start", index: 2, id: "b", name: "f" }, {
      type: "tool_call_args",
      index: 2,
      args: "{}",
    }]],
  );
  assert.deepEqual(started, {
    state: "caught_up",
    rest: [{ type: "tool_call_args", index: 2, args: "{}" }],
  });
});

Deno.test("replay check: usage is kept aside, neither compared nor relayed before the seam", () => {
  const check = checkAfter([text("Hi")]);
  const step = check.push([
    { type: "start", id: "x", model: "m" },
    { type: "usage", usage: { inputTokens: 4 } },
    text("Hi!"),
  ]);
  assert.deepEqual(step, { state: "caught_up", rest: [text("!")] });
  assert.equal(check.usage.inputTokens, 4);
});

Deno.test("resume: what the client has is held up to RESUME_HELD_CHARS; past it the answer is let go and not resumed", () => {
  const resume = new StreamResume(true, { client: "openai-chat" });
  resume.pass({ events: [text("x".repeat(RESUME_HELD_CHARS - 1))] });
  resume.pass({ events: [{ type: "reasoning", text: "y" }] });
  assert.equal(resume.held, RESUME_HELD_CHARS);
  assert.equal(resume.points()?.replay?.offset, RESUME_HELD_CHARS, "at the cap: still resumable");
  // One more character, of any kind: nothing is held any longer, nor anything after it.
  resume.pass({ events: [{ type: "tool_call_start", index: 0, id: "c1", name: "f" }] });
  resume.pass({ events: [{ type: "tool_call_args", index: 0, args: "{}" }, text("more")] });
  assert.equal(resume.held, 0);
  assert.equal(resume.overflowed, true);
  assert.equal(resume.points(), null);
  // The client's stream itself is untouched: every event still goes on.
  assert.deepEqual(resume.pass({ events: [text("z")] }), [text("z")]);
});
