import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ConflictError, connect, InvalidError, NotFoundError, type Client } from "../src/index.js";

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

/** requests the server counted on a route (its /metrics). */
async function served(route: string): Promise<number> {
  const r = await fetch(`${client.url}/metrics`, { headers: process.env.SPL_TOKEN ? { authorization: `Bearer ${process.env.SPL_TOKEN}` } : {} });
  let n = 0;
  for (const line of (await r.text()).split("\n")) {
    if (line.startsWith("spl_http_requests_total{") && line.includes(`route="${route}"`)) n += Number(line.split(" ").pop());
  }
  return n;
}

describe("emits of one moment, coalesced", () => {
  it("go as one request; each resolves with its own record, in call order on its thread", async () => {
    const a = fresh("th_coalesce_a"), b = fresh("th_coalesce_b");
    const before = await served("POST /v1/records/batch");
    const got = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      client.emit({ act: "DO", kind: "agent.step", thread: i % 2 ? b : a, body: { step: i } })));
    expect(await served("POST /v1/records/batch")).toBe(before + 1);
    expect(got.map((r) => r.storedBody.step)).toEqual([...Array(40).keys()]);
    for (const [thread, parity] of [[a, 0], [b, 1]] as const) {
      const recs = await client.query_thread({ thread });
      expect(recs.map((r) => r.storedBody.step)).toEqual([...Array(40).keys()].filter((i) => i % 2 === parity));
      expect(recs.map((r) => r.id)).toEqual(got.filter((_, i) => i % 2 === parity).map((r) => r.id));
      recs.forEach((r, i) => expect(r.prev).toBe(i ? recs[i - 1].id : null));
    }
  });
  it("a bad record fails alone, naming the field and the rule; nothing else is lost", async () => {
    const thread = fresh("th_coalesce_bad");
    const out = await Promise.allSettled([
      client.emit({ act: "DO", kind: "agent.step", thread, body: { step: 0 } }),
      client.emit({ act: "do", kind: "agent.step", thread, body: { step: 1 } }),
      client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread, body: { summary: "s", learnings: ["l"], thread: "th_other" } }),
      client.emit({ act: "DO", kind: "agent.step", thread, body: { step: 3 } }),
    ]);
    expect(out.map((o) => o.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    const [, act, cp] = out as PromiseRejectedResult[];
    expect(act.reason).toBeInstanceOf(InvalidError);
    expect(act.reason.field).toBe("act");
    expect(act.reason.rule).toMatch(/^must match/);
    expect(cp.reason).toBeInstanceOf(InvalidError);
    expect(cp.reason.field).toBe("body.thread");
    const recs = await client.query_thread({ thread });
    expect(recs.map((r) => r.storedBody.step)).toEqual([0, 3]);
  });
  it("a record too large to share a request (once refused, now kept beside the log) lands in call order", async () => {
    const thread = fresh("th_coalesce_big");
    const out = await Promise.allSettled([
      client.emit({ act: "DO", kind: "agent.step", thread, body: { step: 0 } }),
      client.emit({ act: "DO", kind: "agent.step", thread, body: { step: 1, text: "x".repeat(1_200_000) } }),
      client.emit({ act: "DO", kind: "agent.step", thread, body: { step: 2 } }),
    ]);
    expect(out.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    expect((await client.query_thread({ thread })).map((r) => r.storedBody.step)).toEqual([0, 1, 2]);
  });
  it("coalesce: false sends one request an emit", async () => {
    const c = await connect({ actor, coalesce: false });
    try {
      const thread = fresh("th_alone");
      const before = await served("POST /v1/records");
      await Promise.all([0, 1, 2].map((step) => c.emit({ act: "DO", kind: "agent.step", thread, body: { step } })));
      expect(await served("POST /v1/records")).toBe(before + 3);
      expect((await c.query_thread({ thread })).length).toBe(3);
    } finally {
      await c.close();
    }
  });
});

describe("conditional appends", () => {
  it("lands at the expected clock, and is refused with the thread's clock otherwise", async () => {
    const thread = fresh("th_cas");
    const first = await client.emit({ act: "DO", kind: "agent.step", thread, body: { n: 1 }, expectedClock: 0 });
    const err = await client.emit({ act: "DO", kind: "agent.step", thread, body: { n: 2 }, expectedClock: 0 }).catch((e) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err.field).toBe("expected_clock");
    expect(err.clock).toBe(first.clock);
    const second = await client.emit({ act: "DO", kind: "agent.step", thread, body: { n: 3 }, expectedClock: first.clock });
    expect(second.prev).toBe(first.id);
    expect((await client.query_thread({ thread })).map((r) => r.storedBody.n)).toEqual([1, 3]);
  });
});

describe("large records", () => {
  it("emits a 10 MB body and reads it back verified, a 5 MB checkpoint state too", async () => {
    const thread = fresh("th_large");
    const messages = Array.from({ length: 10_000 }, (_, i) => `message ${i} ` + "x".repeat(1000));
    const r = await client.emit({ act: "KNOW", kind: "agent.state", thread, body: { messages } });
    const back = await client.record(r.id, { thread });
    expect(back.verified).toBe(true);
    expect(back.storedBody.messages.length).toBe(10_000);
    expect(back.storedBody.messages[9_999]).toBe(messages[9_999]);
    const state = { messages: messages.slice(0, 5_000) };
    await client.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread, body: { summary: "long", learnings: ["kept"], state } });
    const cp = await client.latest_checkpoint(thread);
    expect((cp.extra.state as { messages: string[] }).messages.length).toBe(5_000);
  });
});
