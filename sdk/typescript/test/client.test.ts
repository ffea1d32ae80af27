import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { connect, InvalidError, NotFoundError, type Client } from "../src/index.js";

const actor = "did:sync:agent:dev";
let client: Client;

beforeAll(async () => {
  if (!process.env.SPL_URL) throw new Error("set SPL_URL to an spl serve (.ci/run starts one)");
  client = await connect({ actor });
});

const fresh = (p: string) => `${p}_${randomUUID().slice(0, 8)}`;

describe("the session-checkpoints page, as written", () => {
  it("emits a checkpoint and finds the latest by body.kind", async () => {
    const threadId = fresh("th_auth_refactor");
    await client.emit({ act: "LEARN", kind: "agent.session.checkpoint",
      body: { summary: "Completed auth refactor", learnings: ["mutex pattern worked"], next_steps: "Write migration tests" },
      thread: threadId });
    await client.emit({ act: "KNOW", kind: "agent.step", body: { step: 1 }, thread: threadId });
    const records = await client.query_thread({ thread: threadId });
    const checkpoints = records.filter(r => r.body?.kind === "agent.session.checkpoint").sort((a, b) => a.clock - b.clock);
    const latest = checkpoints[checkpoints.length - 1];
    expect(latest.body.summary).toBe("Completed auth refactor");
    expect(latest.body.learnings).toEqual(["mutex pattern worked"]);
    expect(latest.body.next_steps).toBe("Write migration tests"); // kept as given
    expect(latest.verified).toBe(true);
    expect(latest.derivedBodyKeys).toEqual(["kind"]);
    expect("kind" in latest.storedBody).toBe(false);
    const cp = await client.latest_checkpoint(threadId);
    expect(cp.id).toBe(latest.id);
    expect(cp.extra.next_steps).toEqual(["Write migration tests"]);
  });
  it("accepts thread, session_id and actor in the body, and refuses a mismatch naming the field", async () => {
    const thread = fresh("th_page");
    await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread,
      body: { summary: "s", learnings: ["l"], next_steps: "n", thread, session_id: "sess_1", actor } });
    const err = await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread,
      body: { summary: "s", learnings: ["l"], thread: "th_other" } }).catch(e => e);
    expect(err).toBeInstanceOf(InvalidError);
    expect(err.field).toBe("body.thread");
  });
});

describe("client", () => {
  it("emits many (write-behind), pages a query, filters", async () => {
    const thread = fresh("th_many");
    for (let i = 0; i < 25; i++) client.enqueue({ act: "DO", kind: "agent.step", thread, body: { step: i } });
    await client.flush();
    const all = await client.query_thread({ thread, pageSize: 7 });
    expect(all.map(r => r.storedBody.step).sort((a, b) => a - b)).toEqual([...Array(25).keys()]);
    const firstTen = await client.query_thread({ thread, limit: 10, pageSize: 4 });
    expect(firstTen.length).toBe(10);
    const rest = await client.query_thread({ thread, from: firstTen[9].clock + 1 });
    expect(rest.length).toBe(15);
    expect((await client.query_thread({ thread, last: 3 })).length).toBe(3);
    expect((await client.query_thread({ thread, kind: "agent.other" })).length).toBe(0);
  });
  it("lists checkpoints, the latest across threads, a record by id and its bytes", async () => {
    const thread = fresh("th_cp");
    for (const s of ["one", "two"]) {
      await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread, body: { summary: s, learnings: ["l"] } });
    }
    const cps = await client.listCheckpoints(thread);
    expect(cps.map(c => c.extra.summary)).toEqual(["one", "two"]);
    const latest = await client.latestCheckpoints({ limit: 1000 });
    expect(latest.some(c => c.thread === thread && c.summary === "two")).toBe(true);
    const r = await client.record(cps[0].id, { thread });
    expect(r.storedBody.summary).toBe("one");
    const bytes = await client.recordBytes(cps[0].id, { thread });
    expect(bytes[0]).toBe(0xa3);
  });
  it("maps errors", async () => {
    const e1 = await client.emit({ act: "do", kind: "agent.step", thread: "t", body: {} }).catch(e => e);
    expect(e1).toBeInstanceOf(InvalidError);
    expect(e1.field).toBe("act");
    const e2 = await client.latest_checkpoint(fresh("th_none")).catch(e => e);
    expect(e2).toBeInstanceOf(NotFoundError);
  });
  it("follows a thread live", async () => {
    const thread = fresh("th_follow");
    const ac = new AbortController();
    const got: number[] = [];
    const done = (async () => {
      for await (const r of client.follow(thread, { from: 1, signal: ac.signal })) {
        got.push(r.storedBody.n as number);
        if (got.length === 3) ac.abort();
      }
    })();
    for (let n = 0; n < 3; n++) await client.emit({ act: "DO", kind: "agent.step", thread, body: { n } });
    await done;
    expect(got).toEqual([0, 1, 2]);
  });
  it("erases, pins, sets retention", async () => {
    const thread = fresh("th_erase");
    const a = await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread, body: { summary: "secret", learnings: ["l"] } });
    const pin = await client.pin(thread, a.id, { reason: "keep" });
    expect(pin.target).toBe(a.id);
    const pol = await client.setRetention({ thread, keep_last: 3 });
    expect(pol.keep_last).toBe(3);
    expect((await client.retention()).policies.some((p: any) => p.thread === thread)).toBe(true);
    await client.clearRetention({ thread });
    const res = await client.erase(thread, { all: true, reason: "test" });
    expect(res.erased).toContain(a.id);
    const left = await client.query_thread({ thread });
    expect(left.every(r => r.kind === "core.erasure")).toBe(true);
    await expect(client.record(a.id, { thread })).rejects.toBeInstanceOf(NotFoundError);
  });
  it("runs and sessions", async () => {
    const thread = fresh("th_sess");
    await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread, body: { summary: "s", learnings: ["l"] } });
    const p = await client.pause(thread, { reason: "lunch" });
    expect(p).toBeTruthy();
    const s = await client.sessions({ status: "paused" });
    expect(s.sessions.some((x: any) => x.session_id === thread)).toBe(true);
    const r = await client.resume(thread);
    expect(r).toBeTruthy();
    expect(Array.isArray((await client.runs()).runs)).toBe(true);
    expect((await client.lineage(thread)).thread).toBe(thread);
  });
});
