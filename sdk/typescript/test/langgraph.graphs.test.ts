// Real LangGraph graphs under SplSaver, LangGraph's MemorySaver and its
// SqliteSaver: the same program must leave the same state and the same
// history (values, next, parents, order) under all three. LangGraph's own
// validation suite (langgraph.validation.ts) checks the saver's calls one
// by one; this checks what a LangGraph user sees, across branches: time
// travel, updateState forks, forks of forks, interrupt and resume,
// parallel writers to a reducer, subgraphs.
import { randomUUID } from "node:crypto";
import { Annotation, Command, END, interrupt, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { beforeAll, describe, expect, it } from "vitest";
import { connect, type Client } from "../src/index.js";
import { SplSaver } from "../src/langgraph.js";

let client: Client;
beforeAll(async () => {
  if (!process.env.SPL_URL) throw new Error("set SPL_URL to an spl serve (.ci/run starts one)");
  client = await connect({ actor: "did:sync:agent:langgraph" });
});

const State = Annotation.Root({
  n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  last: Annotation<string>(),
});

// The graph: a adds 1; then b (n even) or c (n odd), both to d; d fans
// out to two parallel writers of the reducers; ask interrupts for a
// human's answer; a subgraph counts in its own namespace.
function build(saver: BaseCheckpointSaver) {
  const sub = new StateGraph(State)
    .addNode("inner", () => ({ n: 100, log: ["inner"] }))
    .addEdge(START, "inner")
    .addEdge("inner", END)
    .compile();
  return new StateGraph(State)
    .addNode("a", () => ({ n: 1, log: ["a"], last: "a" }))
    .addNode("b", () => ({ log: ["b"], last: "b" }))
    .addNode("c", () => ({ log: ["c"], last: "c" }))
    .addNode("d", () => ({ log: ["d"] }))
    .addNode("p1", () => ({ n: 10, log: ["p1"] }))
    .addNode("p2", () => ({ n: 20, log: ["p2"] }))
    .addNode("ask", () => {
      const answer = interrupt({ question: "go on?" }) as string;
      return { log: [`ask:${answer}`], last: answer };
    })
    .addNode("sub", sub)
    .addEdge(START, "a")
    .addConditionalEdges("a", (s) => (s.n % 2 === 0 ? "b" : "c"), ["b", "c"])
    .addEdge("b", "d")
    .addEdge("c", "d")
    .addEdge("d", "p1")
    .addEdge("d", "p2")
    .addEdge(["p1", "p2"], "ask")
    .addEdge("ask", "sub")
    .addEdge("sub", END)
    .compile({ checkpointer: saver });
}

type Snap = { values: unknown; next: string[]; step: unknown; source: unknown; parent: number | null; tasks: unknown };

// history is the thread's history in order, each snapshot's parent named
// by its place in that order (checkpoint ids differ between savers).
async function history(g: ReturnType<typeof build>, thread: string): Promise<Snap[]> {
  const snaps = [];
  for await (const s of g.getStateHistory({ configurable: { thread_id: thread } })) snaps.push(s);
  const place = new Map(snaps.map((s, i) => [s.config.configurable?.checkpoint_id as string, i]));
  return snaps.map((s) => ({
    values: s.values,
    next: [...s.next].sort(),
    step: s.metadata?.step,
    source: s.metadata?.source,
    parent: s.parentConfig ? place.get(s.parentConfig.configurable?.checkpoint_id as string) ?? -1 : null,
    tasks: s.tasks.map((t) => ({ name: t.name, interrupts: t.interrupts.map((i) => i.value) })),
  }));
}

// strip drops what differs between savers by construction: the ids of
// interrupts, made from checkpoint ids.
function strip(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strip);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).filter(([k]) => k !== "id").map(([k, e]) => [k, strip(e)]));
  }
  return v;
}

// program runs one user's session on a saver and returns what they saw.
async function program(saver: BaseCheckpointSaver) {
  const g = build(saver);
  const thread = randomUUID();
  const cfg = { configurable: { thread_id: thread } };
  const seen: unknown[] = [];
  // A first run to the interrupt, resumed.
  seen.push(await g.invoke({ log: ["start"] }, cfg));
  seen.push((await g.getState(cfg)).next);
  seen.push(await g.invoke(new Command({ resume: "yes" }), cfg));
  // A second run on the thread (n is now odd after a's 1: the other branch).
  seen.push(await g.invoke({ log: ["again"] }, cfg));
  seen.push(await g.invoke(new Command({ resume: "twice" }), cfg));
  let h = await history(g, thread);
  seen.push(h);
  // Time travel: replay from the checkpoint before the first a ran.
  const snaps = [];
  for await (const s of g.getStateHistory(cfg)) snaps.push(s);
  const beforeA = snaps.filter((s) => s.next.includes("a"))[1]; // the first run's
  seen.push(await g.invoke(null, beforeA.config));
  seen.push(await g.invoke(new Command({ resume: "replayed" }), { configurable: { thread_id: thread } }));
  // A fork: updateState on an older checkpoint (after a, before b/c),
  // as node a, then run the fork to its end.
  const afterA = snaps.filter((s) => s.next.includes("b") || s.next.includes("c")).at(-1)!;
  const fork = await g.updateState(afterA.config, { n: 1, log: ["forked"] }, "a");
  seen.push(await g.invoke(null, fork));
  seen.push(await g.invoke(new Command({ resume: "fork" }), { configurable: { thread_id: thread } }));
  // A fork of that fork: from its checkpoint at the interrupt.
  const forkSnaps = [];
  for await (const s of g.getStateHistory(cfg)) forkSnaps.push(s);
  const atAsk = forkSnaps.find((s) => s.next.includes("ask") && (s.values as { log: string[] }).log.includes("forked"))!;
  const fork2 = await g.updateState(atAsk.config, { log: ["fork of fork"] }, "p1");
  seen.push(await g.invoke(new Command({ resume: "deep" }), fork2));
  seen.push(await g.getState(cfg).then((s) => ({ values: s.values, next: s.next })));
  // The subgraph's state, in its namespace.
  seen.push(await g.getState(cfg, { subgraphs: true }).then((s) => s.tasks.map((t) => t.name)));
  h = await history(g, thread);
  seen.push(h);
  return strip(seen) as unknown[];
}

describe("real graphs on every branch", () => {
  it("SplSaver leaves the state and history MemorySaver and SqliteSaver do", async () => {
    const memory = await program(new MemorySaver());
    const sqlite = await program(SqliteSaver.fromConnString(":memory:"));
    const spl = await program(new SplSaver(client, { prefix: `lg-graphs-${randomUUID().slice(0, 8)}/` }));
    expect(sqlite).toEqual(memory); // the peers agree: what is compared is LangGraph's
    expect(spl).toEqual(memory);
  });
});

describe("the cost of a step", () => {
  // A client of its own that counts the records its thread reads return.
  async function counting(): Promise<{ client: Client; read: () => number }> {
    let n = 0;
    const c = await connect({ actor: "did:sync:agent:langgraph" });
    const query = c.query_thread.bind(c);
    c.query_thread = async (o) => {
      const recs = await query(o);
      n += recs.length;
      return recs;
    };
    return { client: c, read: () => n };
  }
  const Loop = Annotation.Root({ n: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
  const loop = (saver: BaseCheckpointSaver) =>
    new StateGraph(Loop).addNode("step", () => ({ n: 1 })).addEdge(START, "step").addEdge("step", END).compile({ checkpointer: saver });

  it("an invoke reads the records written since the last, not the thread: the 40th as the 2nd", async () => {
    const { client: c, read } = await counting();
    const saver = new SplSaver(c, { prefix: `lg-cost-${randomUUID().slice(0, 8)}/` });
    const g = loop(saver);
    const cfg = { configurable: { thread_id: randomUUID() } };
    const perInvoke: number[] = [];
    for (let i = 0; i < 40; i++) {
      const before = read();
      await g.invoke({ n: 0 }, cfg);
      perInvoke.push(read() - before);
    }
    expect((await g.getState(cfg)).values).toEqual({ n: 40 });
    // Each invoke reads what others wrote since, not the thread; what the
    // saver wrote itself it folds from the answers to its writes: with no
    // other writer, it reads no record back, the 40th invoke as the 2nd.
    expect(perInvoke.slice(1)).toEqual(Array(39).fill(0));
  });

  it("two savers taking turns on one thread: each folds the other's writes between its own", async () => {
    const prefix = `lg-turns-${randomUUID().slice(0, 8)}/`;
    const { client: c, read } = await counting();
    const savers = [new SplSaver(c, { prefix }), new SplSaver(client, { prefix })];
    const cfg = { configurable: { thread_id: randomUUID() } };
    for (let i = 1; i <= 6; i++) {
      await loop(savers[i % 2]).invoke({ n: 0 }, cfg);
      for (const s of savers) expect((await loop(s).getState(cfg)).values).toEqual({ n: i });
    }
    const history = async (s: SplSaver) => {
      const h: unknown[] = [];
      for await (const st of loop(s).getStateHistory(cfg)) h.push([st.config.configurable?.checkpoint_id, st.values, st.next]);
      return h;
    };
    const [one, two] = [await history(savers[0]), await history(savers[1])];
    expect(one).toEqual(two);
    expect(one).toHaveLength(18); // 3 checkpoints an invoke: input, the loop's, the step's
    expect(read()).toBeGreaterThan(0); // savers[0] read savers[1]'s records back
  });

  it("a saver sees what another saver (another process) wrote to the thread since, and an erased thread is gone", async () => {
    const prefix = `lg-two-${randomUUID().slice(0, 8)}/`;
    const one = new SplSaver(client, { prefix });
    const two = new SplSaver(client, { prefix });
    const cfg = { configurable: { thread_id: randomUUID() } };
    await loop(one).invoke({ n: 0 }, cfg);
    expect((await loop(two).getState(cfg)).values).toEqual({ n: 1 });
    await loop(one).invoke({ n: 0 }, cfg);
    await loop(one).invoke({ n: 0 }, cfg);
    expect((await loop(two).getState(cfg)).values).toEqual({ n: 3 });
    await one.deleteThread(cfg.configurable.thread_id);
    expect(await two.getTuple(cfg)).toBeUndefined();
    await loop(two).invoke({ n: 0 }, cfg);
    expect((await loop(one).getState(cfg)).values).toEqual({ n: 1 });
  });
});

describe("any state size", () => {
  // Messages kept in state, as a chat agent keeps them: 10 MB after two
  // invokes, where a state over ~780 KB was refused.
  const Chat = Annotation.Root({ messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  const chat = (saver: BaseCheckpointSaver) =>
    new StateGraph(Chat)
      .addNode("talk", (s) => ({ messages: Array.from({ length: 5_000 }, (_, i) => `turn ${s.messages.length + i} ` + "w".repeat(1000)) }))
      .addEdge(START, "talk")
      .addEdge("talk", END)
      .compile({ checkpointer: saver });

  it("a 10 MB state saves and loads, in this saver and in a new one, as under MemorySaver", async () => {
    const cfg = { configurable: { thread_id: randomUUID() } };
    const prefix = `lg-large-${randomUUID().slice(0, 8)}/`;
    const memory = new MemorySaver();
    const spl = new SplSaver(client, { prefix });
    for (const saver of [memory, spl]) {
      await chat(saver).invoke({ messages: [] }, cfg);
      await chat(saver).invoke({ messages: [] }, cfg);
    }
    const want = (await chat(memory).getState(cfg)).values as { messages: string[] };
    expect(want.messages).toHaveLength(10_000);
    expect(JSON.stringify(want).length).toBeGreaterThan(10_000_000);
    expect((await chat(spl).getState(cfg)).values).toEqual(want);
    const fresh = new SplSaver(await connect({ actor: "did:sync:agent:langgraph" }), { prefix });
    expect((await chat(fresh).getState(cfg)).values).toEqual(want);
  });
});
