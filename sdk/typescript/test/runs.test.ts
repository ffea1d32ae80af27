// Durable runs (Client.openRun, Run) against a real spl serve, and the
// TypeScript runner example (examples/runner-ts) killed and resumed.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Client, ConflictError, connect, EffectMismatchError, InvalidError, NotFoundError, RunCancelledError, RunFinishedError, RunNotWaitingError,
  SplError, StillWaitingError, UnlandedError,
} from "../src/index.js";

const actor = "did:sync:agent:dev";
const url = process.env.SPL_URL;
let client: Client;

const fresh = (p: string) => `${p}_${randomUUID().slice(0, 8)}`;

describe.skipIf(!url)("durable runs", () => {
  beforeAll(async () => {
    client = await connect({ actor });
  });
  afterAll(async () => {
    await client?.close();
  });

  it("open, checkpoint, effect, finish: read back as written", async () => {
    const thread = fresh("th_run"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    expect(run.status).toBe("running");
    expect(run.resumed).toBe(false);
    expect(run.latest).toBeNull();
    expect(run.snapshot).toBeNull();
    expect(run.recordedCallIds).toEqual([]);
    await run.checkpoint("run_started", { agent_name: "test" });
    await run.checkpoint("step_started", { step: 1, messages: [] });
    await run.flush(); // else the post_llm queued behind it supersedes it (coalesced)
    await run.checkpoint("post_llm", { step: 1, pending_llm_response: { text: "t", tool_calls: [{ id: "c0" }] } });
    let calls = 0;
    const e = await run.effect("c0", "append_line", { n: 0 }, async () => {
      calls++;
      return { line: "c0 0" };
    });
    expect(calls).toBe(1);
    expect(e.replayed).toBe(false);
    expect(e.output).toEqual({ line: "c0 0" });
    expect(e.id).toMatch(/^baf/);
    expect(run.recordedCallIds).toEqual(["c0"]);
    await run.checkpoint("post_tool_batch", { tool_calls_total: 1 });
    const rep = await run.finish({ final_text: "done", n: 1 }, { payload: { final_text: "done", requested_model: "m" } });
    expect(rep.status).toBe("terminal");
    expect(rep.ran).toBe(1);
    expect(rep.replayed).toBe(0);
    expect(rep.pending).toBe(0);
    expect(rep.written).toBe(6); // 4 checkpoints, 1 effect, the terminal one
    expect(run.stats()).toMatchObject({ written: 6, ran: 1, replayed: 0, pending: 0 });

    const d = await client.run(id, { thread, outputs: true });
    expect(d.status).toBe("terminal");
    expect(d.phases.map((p: any) => p.phase)).toEqual(["run_started", "step_started", "post_llm", "post_tool_batch", "run_terminal"]);
    expect(d.phases.map((p: any) => p.kind)).toEqual(["agent.run.checkpoint", "agent.run.snapshot", "agent.run.snapshot", "agent.run.checkpoint", "agent.run.checkpoint"]);
    expect(d.effects.map((x: any) => [x.call_id, x.tool, x.output])).toEqual([["c0", "append_line", { line: "c0 0" }]]);
    expect(d.terminal_result).toEqual({ final_text: "done", n: 1 });
    expect(d.replayed_effect_count).toBe(0);
    // The Run takes no write after finish.
    await expect(run.checkpoint("x", {})).rejects.toBeInstanceOf(RunFinishedError);
    await expect(run.finish(null)).rejects.toBeInstanceOf(RunFinishedError);
    await run.close(); // nothing queued: a no-op
  });

  it("checkpoints are write-behind: they resolve queued, and snapshots a newer one supersedes are coalesced", async () => {
    const thread = fresh("th_wb"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    await run.checkpoint("run_started", {});
    // Resolved, and not written yet: the writer has not even started.
    expect(run.stats()).toMatchObject({ written: 0, pending: 1 });
    const n = 50;
    for (let i = 0; i < n; i++) {
      const payload = { step: i, messages: ["m"] };
      await run.checkpoint("step_started", payload);
      payload.step = -1; // serialised at the call: changing it after changes nothing
    }
    expect(run.stats().pending).toBeGreaterThan(0);
    await run.flush();
    const s = run.stats();
    expect(s.pending).toBe(0);
    expect(s.coalesced).toBeGreaterThan(0);
    expect(s.written + s.coalesced).toBe(n + 1);
    await run.close();
    const again = await client.openRun(id, { thread });
    expect(again.resumed).toBe(true);
    expect(again.snapshot?.phase).toBe("step_started");
    expect(again.snapshot?.payload).toEqual({ step: n - 1, messages: ["m"] });
    const d = await client.run(id, { thread });
    expect(d.phases.length).toBe(s.written);
    await again.close();
  });

  it("post_llm is durable: once it resolves, a fresh client's open sees it; durable: false makes it write-behind", async () => {
    const thread = fresh("th_dur"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    await run.checkpoint("step_started", { step: 1 });
    const pending = { text: "calling", tool_calls: [{ id: "call-0", name: "append_line", args: '{"n":0}' }], finish_reason: "tool_calls" };
    await run.checkpoint("post_llm", { step: 1, pending_llm_response: pending });
    expect(run.stats()).toMatchObject({ pending: 0, written: 1, coalesced: 1 }); // the step_started it superseded
    const other = await connect({ actor });
    try {
      const seen = await other.openRun(id, { thread });
      expect(seen.status).toBe("running");
      expect(seen.snapshot?.phase).toBe("post_llm");
      expect(seen.latest?.id).toBe(seen.snapshot?.id);
      expect(seen.pendingLlmResponse).toEqual(pending);
      // durable: true makes any phase durable.
      await run.checkpoint("pre_tool_batch", { tool_call_count: 1 }, { durable: true });
      expect((await other.openRun(id, { thread })).latest?.phase).toBe("pre_tool_batch");
      // durable: false: post_llm resolves queued.
      await run.checkpoint("post_llm", { step: 2, pending_llm_response: null }, { durable: false });
      expect(run.stats().pending).toBe(1);
      await run.flush();
      const last = await other.openRun(id, { thread });
      expect(last.snapshot?.payload).toEqual({ step: 2, pending_llm_response: null });
      expect(last.pendingLlmResponse).toBeNull();
    } finally {
      await other.close();
    }
    await run.close();
  });

  it("an effect recorded is replayed by a new Run: fn does not run, same output; another input is a mismatch; rerun runs it again", async () => {
    const thread = fresh("th_eff"), id = fresh("r");
    const first = await client.openRun(id, { thread });
    await first.checkpoint("run_started", {});
    const e1 = await first.effect("call-0", "append_line", { n: 0, s: "x" }, () => ({ line: "call-0", at: 1 }));
    expect(e1.replayed).toBe(false);
    await first.close();

    const second = await client.openRun(id, { thread });
    expect(second.resumed).toBe(true);
    expect(second.effects.map((e) => [e.call_id, e.tool])).toEqual([["call-0", "append_line"]]);
    expect(second.effects[0].input_hash).toMatch(/^blake3:/);
    expect(second.recordedCallIds).toEqual(["call-0"]);
    let ran = 0;
    const e2 = await second.effect("call-0", "append_line", { n: 0, s: "x" }, () => {
      ran++;
      return { line: "other" };
    });
    expect(ran).toBe(0);
    expect(e2).toEqual({ output: { line: "call-0", at: 1 }, replayed: true, id: e1.id, clock: e1.clock });
    expect(second.stats()).toMatchObject({ replayed: 1, ran: 0 });

    // Another input for the same call id: the determinism check.
    const err = await second.effect("call-0", "append_line", { n: 1 }, () => {
      ran++;
      return {};
    }).catch((e) => e);
    expect(err).toBeInstanceOf(EffectMismatchError);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err.status).toBe(409);
    expect(err.code).toBe("effect_mismatch");
    expect(err.recorded).toBe(second.effects[0].input_hash);
    expect(err.got).toMatch(/^blake3:/);
    expect(err.got).not.toBe(err.recorded);
    expect(err.recordedTool).toBe("append_line");
    expect(ran).toBe(0);

    // rerun: the tool runs again and its result is recorded.
    const e3 = await second.effect("call-0", "append_line", { n: 1 }, async () => {
      ran++;
      return { line: "rerun" };
    }, { rerun: true });
    expect(ran).toBe(1);
    expect(e3.replayed).toBe(false);
    expect(e3.output).toEqual({ line: "rerun" });
    expect(e3.id).not.toBe(e1.id);
    // rerun with the input now recorded replays it.
    const e4 = await second.effect("call-0", "append_line", { n: 1 }, () => ({ line: "again" }), { rerun: true });
    expect(e4).toMatchObject({ output: { line: "rerun" }, replayed: true, id: e3.id });
    // An error from fn records nothing: the call runs again next time.
    await expect(second.effect("call-1", "append_line", { n: 2 }, () => {
      throw new Error("tool failed");
    })).rejects.toThrow("tool failed");
    const rep = await second.finish({ ok: true });
    expect(rep).toMatchObject({ ran: 1, replayed: 2 });

    const d = await client.run(id, { thread });
    expect(d.effects.map((e: any) => e.call_id)).toEqual(["call-0", "call-0"]);
    expect(d.replayed_effect_count).toBe(2);
  });

  it("a cancel is seen as a RunCancelledError at the next checkpoint or effect; finish with state cancelled is allowed", async () => {
    const thread = fresh("th_cancel"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    await run.checkpoint("run_started", {});
    await run.flush();
    const c = await client.cancelRun(id, { thread, reason: "budget spent" });
    expect(c.request).toMatch(/^baf/);

    // A write-behind checkpoint resolves queued; the server refuses it and
    // the next flush says so.
    await run.checkpoint("pre_llm", {});
    const fe = await run.flush().catch((e) => e);
    expect(fe).toBeInstanceOf(UnlandedError);
    expect(fe.failures.map((f: any) => f.phase)).toEqual(["pre_llm"]);
    expect(fe.cancelled).toBeInstanceOf(RunCancelledError);
    // From then on, at once.
    const ce = await run.checkpoint("step_started", { step: 1 }).catch((e) => e);
    expect(ce).toBeInstanceOf(RunCancelledError);
    expect(ce).toBeInstanceOf(ConflictError);
    expect(ce.code).toBe("run_cancelled");
    expect(ce.reason).toBe("budget spent");
    expect(ce.actor).toBe(actor);
    expect(ce.request).toBe(c.request);
    let ran = 0;
    await expect(run.effect("c0", "t", {}, () => ran++)).rejects.toBeInstanceOf(RunCancelledError);
    expect(ran).toBe(0);

    // A second Run on it sees the cancel from open: its writes are refused at once.
    const other = await client.openRun(id, { thread });
    expect(other.status).toBe("cancelled");
    expect(other.cancel).toMatchObject({ reason: "budget spent", actor, request: c.request });
    await expect(other.checkpoint("post_llm", {})).rejects.toBeInstanceOf(RunCancelledError);
    await other.close();

    // The server's rule: a cancelled run ends as "cancelled".
    const bad = await run.finish({ x: 1 }).catch((e) => e);
    expect(bad).toBeInstanceOf(InvalidError);
    expect(bad.field).toBe("state");
    const rep = await run.finish(null, { state: "cancelled" });
    expect(rep.status).toBe("cancelled");
    expect((await client.run(id, { thread })).status).toBe("cancelled");
    const again = await client.openRun(id, { thread });
    expect(again.status).toBe("cancelled");
    expect(again.latest?.phase).toBe("run_terminal");
    await expect(again.finish(null, { state: "cancelled" })).rejects.toBeInstanceOf(RunFinishedError);
  });

  it("a cancel reaches a durable checkpoint and an effect as they are written", async () => {
    const thread = fresh("th_cancel2"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    await run.checkpoint("run_started", {}, { durable: true });
    await client.cancelRun(id, { thread, reason: "stop" });
    await expect(run.checkpoint("post_llm", { step: 1 })).rejects.toBeInstanceOf(RunCancelledError);
    const run2 = await client.openRun(id, { thread });
    expect(run2.status).toBe("cancelled");
    await run2.close();
    const run3 = await client.openRun(fresh("r"), { thread });
    await run3.checkpoint("run_started", {}, { durable: true });
    await client.cancelRun(run3.id, { thread, reason: "stop" });
    let ran = 0;
    // fn runs (the call id is not recorded), its output is refused.
    const e = await run3.effect("c0", "t", { a: 1 }, () => ++ran).catch((x) => x);
    expect(e).toBeInstanceOf(RunCancelledError);
    expect(ran).toBe(1);
    expect((await run3.finish(undefined, { state: "cancelled" })).status).toBe("cancelled");
    await run.close();
  });

  it("reopening a finished run gives status terminal and its result; it takes no write", async () => {
    const thread = fresh("th_fin"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    await run.checkpoint("run_started", {});
    await run.finish({ final_text: "ok", steps: 2 }, { payload: { final_text: "ok" } });
    const again = await client.openRun(id, { thread });
    expect(again.status).toBe("terminal");
    expect(again.resumed).toBe(true);
    expect(again.terminalResult).toEqual({ final_text: "ok", steps: 2 });
    expect(again.latest?.phase).toBe("run_terminal");
    expect(again.latest?.payload).toMatchObject({ state: "completed", final_text: "ok", terminal_result: { final_text: "ok", steps: 2 } });
    await expect(again.checkpoint("step_started", {})).rejects.toBeInstanceOf(RunFinishedError);
    await expect(again.effect("c", "t", {}, () => 1)).rejects.toBeInstanceOf(RunFinishedError);
    await expect(again.finish({})).rejects.toBeInstanceOf(RunFinishedError);
    // The server's refusal is the same class, a ConflictError.
    const e: any = await client.request("POST", `/v1/runs/${id}/checkpoints`, { thread, actor, checkpoints: [{ phase: "x" }] }).catch((x) => x);
    expect(e).toBeInstanceOf(RunFinishedError);
    expect(e).toBeInstanceOf(ConflictError);
    expect(e.code).toBe("run_finished");
  });

  it("an effect POST sent twice (a retry after a lost answer) records once", async () => {
    const thread = fresh("th_retry"), id = fresh("r");
    const body = { thread, actor, call_id: "call-0", tool: "append_line", args: { n: 0 }, output: { line: "call-0 {\"n\":0}" } };
    const run = await client.openRun(id, { thread });
    await run.checkpoint("run_started", {}, { durable: true });
    const path = `/v1/runs/${id}/effects`;
    const a = await client.request<any>("POST", path, body);
    const b = await client.request<any>("POST", path, { ...body, output: { line: "different" } });
    expect(a.status).toBe("recorded");
    expect(b).toEqual({ status: "replayed", output: a.output, id: a.id, clock: a.clock });
    const d = await client.run(id, { thread });
    expect(d.effects.length).toBe(1);
    // The Run opened before knows nothing of it: fn runs, and the recorded output wins.
    let ran = 0;
    const e0 = await run.effect("call-0", "append_line", { n: 0 }, () => ++ran);
    expect(ran).toBe(1);
    expect(e0).toMatchObject({ replayed: true, id: a.id, output: a.output });
    ran = 0;
    const e = await run.effect("call-0", "append_line", { n: 0 }, () => ++ran);
    expect(ran).toBe(0);
    expect(e).toMatchObject({ replayed: true, id: a.id, output: { line: "call-0 {\"n\":0}" } });
    await run.close();
  });

  it("a checkpoint the server refuses fails alone, naming the field; none is lost, no rejection escapes", async () => {
    const escaped: unknown[] = [];
    const onUnhandled = (e: unknown) => escaped.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const thread = fresh("th_bad"), id = fresh("r");
      const run = await client.openRun(id, { thread });
      await run.checkpoint("run_started", { a: 1 });
      await run.checkpoint("Bad Phase", {});
      await run.checkpoint("pre_llm", { x: 0.1 });
      await run.checkpoint("pre_tool_batch", [1, 2] as unknown as object);
      await run.checkpoint("post_tool_batch", {});
      const e = await run.flush().catch((x) => x);
      expect(e).toBeInstanceOf(UnlandedError);
      expect(e.failures.map((f: any) => [f.phase, f.error.constructor.name, f.error.field])).toEqual([
        ["Bad Phase", "InvalidError", "phase"], ["pre_tool_batch", "InvalidError", "payload"],
      ]);
      expect(e.message).toMatch(/2 checkpoints did not land/);
      await run.flush(); // reported once
      // A durable one gets its own error.
      const de = await run.checkpoint("run_terminal", {}, { durable: true }).catch((x) => x);
      expect(de).toBeInstanceOf(InvalidError);
      expect(de.field).toBe("phase");
      const d = await client.run(id, { thread });
      expect(d.phases.map((p: any) => p.phase)).toEqual(["run_started", "pre_llm", "post_tool_batch"]);
      // An output that is not JSON is refused before anything is sent.
      await expect(run.effect("c", "t", {}, () => ({ n: 1n }))).rejects.toBeInstanceOf(TypeError);
      // Write-behind failures left unreported at the end are no rejection either.
      await run.checkpoint("Bad", {});
      await new Promise((r) => setTimeout(r, 200));
      expect(escaped).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("a new Run knows nothing of another thread's run of the same id", async () => {
    const id = fresh("r");
    const a = await client.openRun(id, { thread: fresh("th_a") });
    await a.effect("c0", "t", { n: 1 }, () => "a");
    await a.close();
    const b = await client.openRun(id, { thread: fresh("th_b") });
    expect(b.resumed).toBe(false);
    expect((await b.effect("c0", "t", { n: 1 }, () => "b")).output).toBe("b");
    await b.close();
  });

  it("await using closes the Run: what it queued lands", async () => {
    const thread = fresh("th_using"), id = fresh("r");
    {
      await using run = await client.openRun(id, { thread });
      await run.checkpoint("run_started", { n: 1 });
      expect(run.stats().pending).toBe(1);
    }
    const again = await client.openRun(id, { thread });
    expect(again.latest).toMatchObject({ phase: "run_started", payload: { n: 1 } });
    await again.close();
  });

  it("a large payload round-trips (stored beside the log by the server)", async () => {
    const thread = fresh("th_big"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    const text = "é".repeat(300_000);
    await run.checkpoint("step_started", { step: 1, text });
    await run.checkpoint("pre_llm", { n: 1 });
    await run.close();
    const again = await client.openRun(id, { thread });
    expect(again.snapshot?.payload?.text).toBe(text);
    expect(again.latest?.phase).toBe("pre_llm");
    await again.close();
  });

  it("a run awaits a signal and reports waiting; another name and a second signal are refused; the next open carries it", async () => {
    const thread = fresh("th_sig"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    expect(run.waitingFor).toBeNull();
    expect(run.signal).toBeNull();
    // No such run yet (no checkpoint): 404.
    expect(await client.signalRun(id, "approval", { thread }).catch((e) => e)).toBeInstanceOf(NotFoundError);
    await run.checkpoint("step_started", { step: 1 }, { durable: true });
    // Running, not waiting: refused.
    const early = await client.signalRun(id, "approval", { thread }).catch((e) => e);
    expect(early).toBeInstanceOf(RunNotWaitingError);
    expect(early.message).toContain("waiting for no signal");
    await run.checkpoint("run_started", {});
    // The checkpoint goes through the run's queue, after run_started.
    const w = await run.awaitSignal("approval", { question: "ship it?", signal: "overridden" }).catch((e) => e);
    expect(w).toBeInstanceOf(StillWaitingError);
    expect(w).not.toBeInstanceOf(ConflictError);
    expect(w).not.toBeInstanceOf(SplError);
    expect(w).toMatchObject({ run: id, signal: "approval", timeoutMs: 0 });
    expect(w.message).toMatch(/still waiting for signal "approval".*process may end/);
    expect(run.stats()).toMatchObject({ written: 3, pending: 0 });
    await run.close();
    const d = await client.run(id, { thread });
    expect(d.phases.map((p: any) => p.phase)).toEqual(["step_started", "run_started", "awaiting_signal"]);
    expect(d).toMatchObject({ status: "waiting", waiting_for: "approval" });

    const waiting = await client.openRun(id, { thread });
    expect(waiting.status).toBe("waiting");
    expect(waiting.waitingFor).toBe("approval");
    expect(waiting.signal).toBeNull();
    expect(waiting.latest).toMatchObject({ phase: "awaiting_signal", payload: { question: "ship it?", signal: "approval" } });
    // Already waiting for it: nothing more is written.
    await expect(waiting.awaitSignal("approval")).rejects.toBeInstanceOf(StillWaitingError);
    expect(waiting.stats().written).toBe(0);
    expect((await client.run(id, { thread })).phases.length).toBe(3);
    await waiting.close();

    const other = await client.signalRun(id, "rejection", { thread, data: { approved: false } }).catch((e) => e);
    expect(other).toBeInstanceOf(RunNotWaitingError);
    expect(other).toBeInstanceOf(ConflictError);
    expect(other).toMatchObject({ status: 409, code: "run_not_waiting" });
    expect(other.message).toContain('waits for "approval"');
    const bad = await client.signalRun(id, "Bad Name", { thread }).catch((e) => e);
    expect(bad).toBeInstanceOf(InvalidError);
    expect(bad.field).toBe("name");
    const sent = await client.signalRun(id, "approval", { thread, data: { approved: true, by: "ana" }, actor: "did:sync:user:ana" });
    expect(sent).toMatchObject({ run_id: id, name: "approval" });
    expect(sent.request).toMatch(/^baf/);
    const twice = await client.signalRun(id, "approval", { thread, data: { approved: true } }).catch((e) => e);
    expect(twice).toBeInstanceOf(RunNotWaitingError);
    expect((await client.run(id, { thread })).status).toBe("running");

    const after = await client.openRun(id, { thread });
    expect(after.status).toBe("running");
    expect(after.waitingFor).toBeNull();
    expect(after.signal).toEqual({ name: "approval", data: { approved: true, by: "ana" }, actor: "did:sync:user:ana", request: sent.request, clock: sent.clock });
    // The signal found by the open: at once, nothing written.
    const got = await after.awaitSignal("approval", { question: "again?" }, { timeoutMs: 60_000 });
    expect(got).toEqual(after.signal);
    expect(after.stats()).toMatchObject({ written: 0, pending: 0 });
    expect((await client.run(id, { thread })).phases.length).toBe(3);
    // Killed after a checkpoint past the wait: the name is that wait, and
    // its answer is found again, not waited for anew.
    await after.checkpoint("pre_llm", {}, { durable: true });
    await after.close();
    const past = await client.openRun(id, { thread });
    expect(past.signal).toBeNull();
    expect(past.signals.map((g) => g.clock)).toEqual([sent.clock]);
    expect(await past.awaitSignal("approval")).toEqual(after.signal);
    expect((await client.run(id, { thread })).phases.length).toBe(4);
    await past.finish({ approved: got.data.approved });
    const done = await client.signalRun(id, "approval", { thread }).catch((e) => e);
    expect(done).toBeInstanceOf(RunFinishedError);
  });

  it("awaitSignal with a timeout sees a signal sent meanwhile; one that passes rejects with StillWaitingError", async () => {
    const thread = fresh("th_sigw"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    const t0 = Date.now();
    const p = run.awaitSignal("go", {}, { timeoutMs: 20_000 });
    p.catch(() => {});
    while ((await client.run(id, { thread }).catch(() => null))?.status !== "waiting") await new Promise((r) => setTimeout(r, 50));
    const sent = await client.signalRun(id, "go", { thread, data: [1, "two"] });
    const sig = await p;
    expect(sig).toMatchObject({ name: "go", data: [1, "two"], actor, request: sent.request, clock: sent.clock });
    expect(Date.now() - t0).toBeLessThan(10_000);
    // Another wait, for another name, that nobody answers.
    const t1 = Date.now();
    const e = await run.awaitSignal("next", { n: 2 }, { timeoutMs: 1200 }).catch((x) => x);
    expect(e).toBeInstanceOf(StillWaitingError);
    expect(e.timeoutMs).toBe(1200);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(1200);
    const again = await client.openRun(id, { thread });
    expect(again).toMatchObject({ status: "waiting", waitingFor: "next" });
    await again.close();
    await run.close();
  });

  it("a cancel while waiting rejects awaitSignal with a RunCancelledError; a bad name is the server's InvalidError", async () => {
    const thread = fresh("th_sigc"), id = fresh("r");
    const run = await client.openRun(id, { thread });
    const bad = await run.awaitSignal("Not A Name").catch((e) => e);
    expect(bad).toBeInstanceOf(InvalidError);
    expect(bad.field).toBe("payload.signal");
    const p = run.awaitSignal("approval", {}, { timeoutMs: 20_000 });
    p.catch(() => {});
    while ((await client.run(id, { thread }).catch(() => null))?.status !== "waiting") await new Promise((r) => setTimeout(r, 50));
    const c = await client.cancelRun(id, { thread, reason: "nobody will approve" });
    const e = await p.catch((x) => x);
    expect(e).toBeInstanceOf(RunCancelledError);
    expect(e).toMatchObject({ reason: "nobody will approve", request: c.request });
    await expect(run.checkpoint("pre_llm", {})).rejects.toBeInstanceOf(RunCancelledError);
    await expect(run.awaitSignal("approval")).rejects.toBeInstanceOf(RunCancelledError);
    const late = await client.signalRun(id, "approval", { thread }).catch((x) => x);
    expect(late).toBeInstanceOf(RunFinishedError);
    expect((await run.finish(null, { state: "cancelled" })).status).toBe("cancelled");
  });

  it("openRun without a thread is refused by the server, naming the field", async () => {
    const e = await client.openRun(fresh("r"), {} as any).catch((x) => x);
    expect(e).toBeInstanceOf(InvalidError);
    expect(e.field).toBe("thread");
  });
});

const openAnswer = JSON.stringify({ run_id: "r", thread: "t", status: "running", resumed: false, latest: null, snapshot: null,
  terminal_result: null, pending_llm_response: null, effects: [], cancel: null });

/**
 * A server that answers /open as a new run and every other request with
 * answer (or never, when it returns undefined).
 */
async function fake(answer: (route: string, n: number) => [number, unknown] | undefined): Promise<{ url: string; close: () => Promise<void>; routes: string[] }> {
  const hung: ServerResponse[] = [];
  const routes: string[] = [];
  const srv: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const route = req.url!.split("/").pop()!;
      if (route === "open") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(openAnswer);
        return;
      }
      routes.push(route);
      const a = answer(route, routes.length);
      if (!a) return void hung.push(res);
      res.writeHead(a[0], { "content-type": "application/json" });
      res.end(JSON.stringify(a[1]));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    routes,
    close: () => new Promise<void>((r) => {
      for (const res of hung) res.destroy();
      srv.close(() => r());
    }),
  };
}

describe("a run whose writes do not land", () => {
  it("flush, finish and close are bounded by flushTimeoutMs and say what is pending; the failures come later, never as a rejection", async () => {
    const escaped: unknown[] = [];
    const onUnhandled = (e: unknown) => escaped.push(e);
    process.on("unhandledRejection", onUnhandled);
    const s = await fake(() => undefined);
    const c = new Client(s.url, { actor });
    try {
      const run = await c.openRun("r", { thread: "t", flushTimeoutMs: 150 });
      await run.checkpoint("run_started", {});
      await run.checkpoint("step_started", { step: 1 });
      const e = await run.flush().catch((x) => x);
      expect(e).toBeInstanceOf(UnlandedError);
      expect(e.timedOut).toBe(true);
      expect(e.pending).toBe(2);
      const f = await run.finish({}).catch((x) => x);
      expect(f).toBeInstanceOf(UnlandedError);
      expect(f.timedOut).toBe(true);
      await expect(run.checkpoint("x", {})).rejects.toBeInstanceOf(RunFinishedError);
      await s.close(); // the requests in flight fail
      await new Promise((r) => setTimeout(r, 100));
      const g = await run.close().catch((x) => x);
      expect(g).toBeInstanceOf(UnlandedError);
      expect(g.timedOut).toBe(false);
      expect(g.failures.map((x: any) => x.phase)).toEqual(["run_started", "step_started"]);
      expect(run.stats().pending).toBe(0);
      expect(escaped).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      c.close().catch(() => {});
    }
  });
  it("a step is one request: the checkpoints queued before an effect go with it", async () => {
    const s = await fake((route) =>
      route === "effects" ? [201, { status: "recorded", output: { ok: 1 }, id: "e", clock: 3, checkpoints: [{ id: "a", clock: 1 }, { id: "b", clock: 2 }] }] : [201, { receipts: [] }]);
    const c = new Client(s.url, { actor });
    try {
      const run = await c.openRun("r", { thread: "t" });
      await run.checkpoint("pre_tool_batch", { n: 1 });
      await run.checkpoint("tool_started", {});
      const e = await run.effect("c0", "t", {}, () => ({ ok: 1 }));
      expect(e).toMatchObject({ replayed: false, id: "e" });
      expect(s.routes).toEqual(["effects"]);
      expect(run.stats()).toMatchObject({ written: 3, ran: 1, pending: 0 });
    } finally {
      await c.close();
      await s.close();
    }
  });
  it("a 503 (storage unavailable for now) is sent again, as the contract allows", async () => {
    const s = await fake((route, n) => (n <= 2 ? [503, { error: "unavailable" }] : [201, { receipts: [{ id: "x", clock: 1 }] }]));
    const c = new Client(s.url, { actor });
    try {
      const run = await c.openRun("r", { thread: "t" });
      await run.checkpoint("pre_llm", {}, { durable: true });
      expect(s.routes).toEqual(["checkpoints", "checkpoints", "checkpoints"]);
      expect(run.stats()).toMatchObject({ written: 1, pending: 0 });
    } finally {
      await c.close();
      await s.close();
    }
  });
});

// The runner example: a port of examples/runner (e2e/runs_test.go runs
// that one), killed at a point with SIGKILL and started again.
const runnerPath = fileURLToPath(new URL("../../../examples/runner-ts/runner.mjs", import.meta.url));

interface RunnerOut {
  result: Record<string, unknown>;
  stored: boolean;
  replayed_effects: number;
  ran_effects: number;
  llm_calls_this_process: number;
  coalesced: number;
  resumed_from?: string;
  waiting_for?: string;
}

/** runner runs the example; killed says whether it died of SIGKILL. */
function runner(args: string[]): Promise<{ out?: RunnerOut; text: string; killed: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [runnerPath, ...args], { env: process.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      clearTimeout(t);
      if (signal === "SIGKILL") return resolve({ text: stderr, killed: true });
      if (code !== 0) return reject(new Error(`runner ${args.join(" ")}: exit ${code}\n${stderr}`));
      resolve({ out: JSON.parse(stdout), text: stdout, killed: false });
    });
  });
}

const read = (p: string) => {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return "";
  }
};

describe.skipIf(!url)("examples/runner-ts", () => {
  const tools = 5;
  const dir = mkdtempSync(join(tmpdir(), "runner-ts-"));
  let client: Client;
  beforeAll(async () => {
    client = await connect({ actor });
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await client?.close();
  });
  let want: RunnerOut;

  const checkEffects = (file: string) => {
    const lines = read(file).trim().split("\n").sort();
    expect(lines).toEqual([...Array(tools).keys()].map((i) => `call-${i} {"n":${i}}`).sort());
  };
  const checkLLMCalls = (file: string, points: string[]) => {
    const again = points.filter((p) => p.startsWith("llm:")).length;
    const seen = new Map<string, number>();
    let extra = 0;
    for (const line of read(file).trim().split("\n")) {
      seen.set(line, (seen.get(line) ?? 0) + 1);
      if (seen.get(line)! > 1) extra++;
    }
    expect(extra).toBeLessThanOrEqual(again);
  };

  it("runs to the end, and a finished run returns its stored result", async () => {
    const eff = join(dir, "ref.eff");
    const args = ["--run", fresh("R"), "--tools", String(tools), "--effects", eff];
    const { out, text } = await runner(args);
    expect(Object.keys(JSON.parse(text))).toEqual(["result", "stored", "replayed_effects", "ran_effects", "llm_calls_this_process", "coalesced"]);
    expect(text).toBe(text.trim() + "\n");
    want = out!;
    expect(want.result).toEqual({ final_text: `done: ${tools} tool calls`, messages: 1 + 3 + 1 + 2 + 1, steps: 3, tool_calls: tools });
    expect(Object.keys(want.result)).toEqual(["final_text", "messages", "steps", "tool_calls"]);
    expect(want).toMatchObject({ stored: false, ran_effects: tools, replayed_effects: 0, llm_calls_this_process: 3 });
    checkEffects(eff);
    const again = await runner(args);
    expect(again.out).toMatchObject({ stored: true, result: want.result, llm_calls_this_process: 0, ran_effects: 0 });
  });

  it("--await-approval: waits for the signal approval, ends its process, and finishes with its data once sent", async () => {
    const eff = join(dir, "approval.eff"), llm = join(dir, "approval.llm");
    const id = fresh("R");
    const args = ["--run", id, "--tools", String(tools), "--effects", eff, "--llm-log", llm, "--await-approval"];
    const first = await runner(args);
    expect(Object.keys(JSON.parse(first.text))).toEqual(["result", "stored", "replayed_effects", "ran_effects", "llm_calls_this_process", "coalesced", "waiting_for"]);
    expect(first.out).toMatchObject({ result: null, stored: false, waiting_for: "approval", ran_effects: tools, llm_calls_this_process: 3 });
    checkEffects(eff);
    // Started again before the signal: it still waits, running nothing again.
    const second = await runner(args);
    expect(second.out).toMatchObject({ result: null, stored: false, waiting_for: "approval", ran_effects: 0, replayed_effects: 0, llm_calls_this_process: 0 });
    expect(await client.run(id, { thread: "runner" })).toMatchObject({ status: "waiting", waiting_for: "approval" });
    const w = await client.openRun(id, { thread: "runner" });
    expect(w.latest?.payload).toEqual({ question: `finish run ${id}?`, signal: "approval" });
    await w.close();
    await client.signalRun(id, "approval", { thread: "runner", data: { approved: true } });
    const fin = await runner(args);
    expect(fin.out!.waiting_for).toBeUndefined();
    expect(fin.out).toMatchObject({ stored: false, ran_effects: 0, llm_calls_this_process: 0 });
    expect(fin.out!.result).toEqual({ ...want.result, approval: { approved: true } });
    expect(Object.keys(fin.out!.result)[0]).toBe("approval");
    const stored = await runner(args);
    expect(stored.out).toMatchObject({ stored: true, result: fin.out!.result, llm_calls_this_process: 0, ran_effects: 0 });
    checkEffects(eff);
    checkLLMCalls(llm, []);
  });

  for (const points of [["post_llm:2"], ["tool_written:2", "llm:1"], ["effect:4"]]) {
    it(`killed at ${points.join(", ")}, resumes: one line per tool call, no LLM call made again`, async () => {
      const name = points.join("_").replace(/:/g, "");
      const eff = join(dir, `${name}.eff`), llm = join(dir, `${name}.llm`);
      const args = ["--run", fresh("R"), "--thread", "runner", "--tools", String(tools), "--effects", eff, "--llm-log", llm];
      for (const p of points) {
        const k = await runner([...args, "--crash-at", p]);
        expect(k.killed, `killed at ${p}`).toBe(true);
        expect(k.text).toContain(`runner: crashing at ${p}`);
      }
      const { out } = await runner(args);
      expect(out!.stored).toBe(false);
      expect(out!.result).toEqual(want.result);
      expect(out!.resumed_from).toBeTruthy();
      checkEffects(eff);
      checkLLMCalls(llm, points);
      const effBefore = read(eff), llmBefore = read(llm);
      const again = await runner(args);
      expect(again.out).toMatchObject({ stored: true, result: want.result, llm_calls_this_process: 0, ran_effects: 0 });
      expect(read(eff)).toBe(effBefore);
      expect(read(llm)).toBe(llmBefore);
    });
  }
});
