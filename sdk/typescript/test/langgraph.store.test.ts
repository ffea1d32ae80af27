// SplStore against LangGraph's InMemoryStore: LangGraph publishes no
// validation suite for stores, so the same cases run against both and
// must give the same answers (values, keys, namespaces, order, errors),
// with timestamps checked for what they mean rather than their instants.
// Then what only a store that outlives its process can show: another
// client sees the items, a delete erases the bytes, a TTL expires, bad
// values are refused, and a graph uses the store through compile.
import { randomUUID } from "node:crypto";
import { Annotation, END, InMemoryStore, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { BaseStore, Item } from "@langchain/langgraph-checkpoint";
import { beforeAll, describe, expect, it } from "vitest";
import { connect, type Client } from "../src/index.js";
import { KIND_STORE_ITEM, SplStore } from "../src/langgraph.js";

let client: Client;
beforeAll(async () => {
  if (!process.env.SPL_URL) throw new Error("set SPL_URL to an spl serve (.ci/run starts one)");
  client = await connect({ actor: "did:sync:agent:langgraph-store" });
});

const fresh = (opts = {}) => new SplStore(client, { prefix: `store-test-${randomUUID().slice(0, 8)}/`, ...opts });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The answer without instants: items keep their value, key and namespace. */
function plain(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(plain);
  if (x && typeof x === "object" && "key" in x && "namespace" in x && "createdAt" in x) {
    const it = x as Item & { score?: number };
    expect(it.createdAt).toBeInstanceOf(Date);
    expect(it.updatedAt).toBeInstanceOf(Date);
    expect(it.updatedAt.getTime()).toBeGreaterThanOrEqual(it.createdAt.getTime());
    return { key: it.key, namespace: it.namespace, value: it.value, ...("score" in it ? { score: it.score } : {}) };
  }
  return x;
}

/** run plays a case on a store and returns every answer (or the error's class and message). */
type Step = (s: BaseStore) => Promise<unknown>;
async function play(s: BaseStore, steps: Step[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const step of steps) {
    try {
      out.push(plain(await step(s)));
    } catch (e) {
      out.push({ error: (e as Error).constructor.name });
    }
  }
  return out;
}

const seed: Step = async (s) => {
  await s.put(["users", "u1", "memories"], "m1", { text: "likes tea", score: 3, kind: "pref" });
  await s.put(["users", "u1", "memories"], "m2", { text: "lives in Lyon", score: 5, kind: "fact" });
  await s.put(["users", "u2", "memories"], "m1", { text: "likes coffee", score: 4, kind: "pref" });
  await s.put(["users", "u2"], "profile", { name: "Ana", score: 1 });
  await s.put(["docs"], "readme", { title: "Read me", score: 2.5 });
  await s.put(["usersx"], "other", { score: 9 }); // a label that only starts like "users"
  return null;
};

const cases: Record<string, Step[]> = {
  "put, get, missing": [
    seed,
    (s) => s.get(["users", "u1", "memories"], "m1"),
    (s) => s.get(["users", "u1", "memories"], "nope"),
    (s) => s.get(["nobody"], "m1"),
  ],
  "update and delete": [
    seed,
    (s) => s.put(["users", "u1", "memories"], "m1", { text: "likes green tea", score: 4 }),
    (s) => s.get(["users", "u1", "memories"], "m1"),
    (s) => s.delete(["users", "u1", "memories"], "m2"),
    (s) => s.get(["users", "u1", "memories"], "m2"),
    (s) => s.delete(["users", "u1", "memories"], "never-there"),
    (s) => s.search(["users"]),
    (s) => s.put(["users", "u1", "memories"], "m2", { text: "back", score: 0 }),
    (s) => s.search(["users", "u1"]), // a key put again after its delete comes last
  ],
  "search by namespace prefix": [
    seed,
    (s) => s.search([], { limit: 100 }),
    (s) => s.search(["users"], { limit: 100 }),
    (s) => s.search(["users", "u1"]),
    (s) => s.search(["users", "u1", "memories"]),
    (s) => s.search(["use"]),
    (s) => s.search(["nothing", "here"]),
  ],
  "search filters": [
    seed,
    (s) => s.search(["users"], { filter: { kind: "pref" } }),
    (s) => s.search([], { filter: { score: { $gt: 3 } }, limit: 100 }),
    (s) => s.search([], { filter: { score: { $gte: 3, $lt: 5 } }, limit: 100 }),
    (s) => s.search([], { filter: { score: { $lte: 2.5 } }, limit: 100 }),
    (s) => s.search([], { filter: { kind: { $ne: "pref" } }, limit: 100 }),
    (s) => s.search([], { filter: { kind: { $eq: "fact" } }, limit: 100 }),
    (s) => s.search([], { filter: { kind: { $in: ["fact", "x"] } }, limit: 100 }),
    (s) => s.search([], { filter: { kind: { $nin: ["pref"] } }, limit: 100 }),
    (s) => s.search(["users"], { filter: { kind: "pref", score: 4 } }),
    (s) => s.search([], { filter: { missing: "x" } }),
  ],
  "search pages": [
    seed,
    (s) => s.search([], { limit: 2 }),
    (s) => s.search([], { limit: 2, offset: 2 }),
    (s) => s.search([], { limit: 2, offset: 4 }),
    (s) => s.search([], { limit: 2, offset: 10 }),
    (s) => s.search([]), // the default limit, 10
  ],
  "list namespaces": [
    seed,
    (s) => s.listNamespaces(),
    (s) => s.listNamespaces({ prefix: ["users"] }),
    (s) => s.listNamespaces({ suffix: ["memories"] }),
    (s) => s.listNamespaces({ prefix: ["users", "*", "memories"] }),
    (s) => s.listNamespaces({ maxDepth: 2 }),
    (s) => s.listNamespaces({ prefix: ["users"], maxDepth: 1 }),
    (s) => s.listNamespaces({ limit: 2, offset: 1 }),
  ],
  "batch: the last put of a key wins": [
    seed,
    // The answers of the batch itself are compared in their own test:
    // InMemoryStore's get hands out the item its later put then changes.
    async (s) => (await s.batch([
      { namespace: ["docs"], key: "readme", value: { title: "new" } },
      { namespace: ["docs"], key: "readme" },
      { namespacePrefix: ["docs"], limit: 10, offset: 0 },
      { namespace: ["docs"], key: "readme", value: { title: "newer" } },
      { namespace: ["docs"], key: "fresh", value: { title: "fresh" } },
    ])).length,
    (s) => s.search(["docs"]),
  ],
  "labels of any text": [
    (s) => s.put(["ünïcode ✓", "with/slash", "with \"quotes\"", "spaces and 'apostrophes'"], "k/ey", { ok: true }),
    (s) => s.get(["ünïcode ✓", "with/slash", "with \"quotes\"", "spaces and 'apostrophes'"], "k/ey"),
    (s) => s.search(["ünïcode ✓", "with/slash"]),
    (s) => s.listNamespaces(),
  ],
  "refused namespaces": [
    (s) => s.put([], "k", { a: 1 }),
    (s) => s.put(["a.b"], "k", { a: 1 }),
    (s) => s.put(["a:b"], "k", { a: 1 }),
    (s) => s.put(["a", ""], "k", { a: 1 }),
    (s) => s.put(["langgraph", "x"], "k", { a: 1 }),
    (s) => s.search(["a.b"]),
    (s) => s.listNamespaces(),
  ],
};

describe("SplStore answers as InMemoryStore does", () => {
  for (const [name, steps] of Object.entries(cases)) {
    it(name, async () => {
      const want = await play(new InMemoryStore(), steps);
      const got = await play(fresh(), steps);
      expect(got).toEqual(want);
    });
  }

  it("keeps createdAt across updates and moves updatedAt", async () => {
    for (const s of [new InMemoryStore(), fresh()] as BaseStore[]) {
      await s.put(["t"], "k", { v: 1 });
      const a = (await s.get(["t"], "k"))!;
      // Read now: InMemoryStore hands out its own item, which the update changes.
      const created = a.createdAt.getTime(), updated = a.updatedAt.getTime();
      await sleep(5);
      await s.put(["t"], "k", { v: 2 });
      const b = (await s.get(["t"], "k"))!;
      expect(b.createdAt.getTime()).toBe(created);
      expect(b.updatedAt.getTime()).toBeGreaterThan(updated);
      expect(b.value).toEqual({ v: 2 });
    }
  });
});

describe("SplStore keeps what it stores", () => {
  it("is seen by another client, and a delete by one is seen by the other", async () => {
    const a = fresh();
    await a.put(["shared", "ns"], "k1", { text: "one" });
    await a.put(["shared", "ns"], "k2", { text: "two" });
    const other = await connect({ actor: "did:sync:agent:langgraph-store-2" });
    try {
      const b = new SplStore(other, { prefix: a.prefix });
      expect((await b.get(["shared", "ns"], "k1"))?.value).toEqual({ text: "one" });
      expect((await b.search(["shared"])).map((i) => i.key)).toEqual(["k1", "k2"]);
      await b.delete(["shared", "ns"], "k1");
      await b.put(["shared", "ns"], "k3", { text: "three" });
      expect(await a.get(["shared", "ns"], "k1")).toBeNull();
      expect((await a.search(["shared"])).map((i) => i.key)).toEqual(["k2", "k3"]);
      expect(await a.listNamespaces()).toEqual([["shared", "ns"]]);
    } finally {
      await other.close();
    }
  });

  it("erases the bytes of a deleted item: only the erasure record stays", async () => {
    const s = fresh();
    await s.put(["gone"], "k", { secret: "v1" });
    await s.put(["gone"], "k", { secret: "v2" });
    await s.put(["gone"], "keep", { v: 1 });
    await s.delete(["gone"], "k");
    const recs = await client.query_thread({ thread: s.threadOf(["gone"]) });
    expect(recs.map((r) => r.kind).sort()).toEqual(["core.erasure", KIND_STORE_ITEM]);
    expect(JSON.stringify(recs.map((r) => r.storedBody))).not.toContain("v1");
    expect(JSON.stringify(recs.map((r) => r.storedBody))).not.toContain("v2");
    expect((await s.search(["gone"])).map((i) => i.key)).toEqual(["keep"]);
    // A namespace whose every item is deleted is listed no more.
    await s.delete(["gone"], "keep");
    expect(await s.listNamespaces()).toEqual([]);
    expect(await s.search([])).toEqual([]);
  });

  it("refuses a value that is not JSON, naming where, and writes nothing", async () => {
    const s = fresh();
    const bad: [Record<string, any>, string][] = [
      [{ n: NaN }, "value.n: NaN"],
      [{ n: Infinity }, "value.n: Infinity"],
      [{ a: [1, undefined] }, "value.a[1]: undefined"],
      [{ d: new Date(0) }, "value.d: a Date object"],
      [{ deep: { f: () => 1 } }, "value.deep.f: a function"],
      [{ big: 1n }, "value.big: a bigint"],
    ];
    for (const [value, where] of bad) {
      await expect(s.put(["bad"], "k", value)).rejects.toThrow(where);
    }
    await expect(s.put(["bad"], "k", [1, 2] as any)).rejects.toThrow("value must be an object");
    // A batch with one bad put writes none of its puts.
    await expect(s.batch([
      { namespace: ["bad"], key: "ok", value: { fine: true } },
      { namespace: ["bad"], key: "k", value: { n: NaN } },
    ])).rejects.toThrow("value.n");
    expect(await client.query_thread({ thread: s.threadOf(["bad"]) })).toEqual([]);
  });

  it("answers a batch's reads from the store as it was before the batch's puts", async () => {
    const s = fresh();
    await s.put(["docs"], "readme", { title: "old" });
    const r = await s.batch([
      { namespace: ["docs"], key: "readme", value: { title: "new" } },
      { namespace: ["docs"], key: "readme" },
      { namespacePrefix: ["docs"], limit: 10, offset: 0 },
      { namespace: ["docs"], key: "fresh", value: { title: "fresh" } },
      { matchConditions: undefined, limit: 10, offset: 0 },
    ]);
    expect(r[0]).toBeNull();
    expect((r[1] as Item).value).toEqual({ title: "old" });
    expect((r[2] as Item[]).map((i) => [i.key, i.value.title])).toEqual([["readme", "old"]]);
    expect(r[3]).toBeNull();
    expect(r[4]).toEqual([["docs"]]);
    expect((await s.search(["docs"])).map((i) => [i.key, i.value.title])).toEqual([["readme", "new"], ["fresh", "fresh"]]);
    // An item read is the caller's: changing it changes nothing stored.
    const it = (await s.get(["docs"], "readme"))!;
    it.value.title = "changed by the caller";
    expect((await s.get(["docs"], "readme"))!.value.title).toBe("new");
  });

  it("answers the filter of an object or array by content", async () => {
    const s = fresh();
    await s.put(["f"], "a", { tags: ["x", "y"], meta: { lang: "fr" } });
    await s.put(["f"], "b", { tags: ["z"], meta: { lang: "en" } });
    expect((await s.search(["f"], { filter: { tags: ["x", "y"] } })).map((i) => i.key)).toEqual(["a"]);
    expect((await s.search(["f"], { filter: { meta: { lang: "en" } } })).map((i) => i.key)).toEqual(["b"]);
    expect((await s.search(["f"], { filter: { meta: { $ne: { lang: "en" } } } })).map((i) => i.key)).toEqual(["a"]);
  });

  it("expires items after their TTL, and sweep erases them", async () => {
    const s = fresh({ ttlMinutes: 0.005 }); // 300 ms
    await s.put(["ttl"], "short", { v: 1 });
    await s.put(["ttl"], "forever", { v: 2 }, undefined, null);
    await s.put(["ttl", "sub"], "short2", { v: 3 });
    expect((await s.search(["ttl"])).map((i) => i.key)).toEqual(["short", "forever", "short2"]);
    await sleep(400);
    expect(await s.get(["ttl"], "short")).toBeNull();
    expect((await s.search(["ttl"])).map((i) => i.key)).toEqual(["forever"]);
    expect(await s.listNamespaces()).toEqual([["ttl"]]);
    expect(await s.sweep()).toBe(2);
    const recs = await client.query_thread({ thread: s.threadOf(["ttl"]) });
    expect(recs.filter((r) => r.kind === KIND_STORE_ITEM).map((r) => (r.storedBody as any).key)).toEqual(["forever"]);
    expect(() => fresh({ ttlMinutes: 0 })).toThrow("ttlMinutes");
    await expect(s.put(["ttl"], "k", { v: 1 }, undefined, -1)).rejects.toThrow("ttl");
  });

  it("keeps a namespace too long for a thread name under its digest", async () => {
    const s = fresh();
    const long = ["l".repeat(200), "m".repeat(200)];
    expect(s.threadOf(long)).toMatch(/#[0-9a-f]{64}$/);
    await s.put(long, "k", { v: 1 });
    const b = new SplStore(client, { prefix: s.prefix }); // reads it back knowing only the prefix
    expect((await b.get(long, "k"))?.value).toEqual({ v: 1 });
    expect((await b.search([long[0]])).map((i) => i.namespace)).toEqual([long]);
    expect(await b.listNamespaces()).toEqual([long]);
  });
});

describe("a graph with a store", () => {
  // A node remembers what each user said in the store, across threads,
  // and answers with everything it remembers of that user.
  const State = Annotation.Root({ user: Annotation<string>(), said: Annotation<string>(), answer: Annotation<string>() });
  const build = (store: BaseStore) =>
    new StateGraph(State)
      .addNode("remember", async (s, config: LangGraphRunnableConfig) => {
        const ns = ["memories", s.user];
        const n = (await config.store!.search(ns, { limit: 100 })).length;
        await config.store!.put(ns, `m${n}`, { text: s.said });
        const all = await config.store!.search(ns, { limit: 100 });
        return { answer: all.map((i) => i.value.text).join(" | ") };
      })
      .addEdge(START, "remember")
      .addEdge("remember", END)
      .compile({ store });

  it("leaves the same answers and memories under SplStore as under InMemoryStore", async () => {
    const answers = async (store: BaseStore) => {
      const g = build(store);
      const out: string[] = [];
      for (const [user, said] of [["ana", "hello"], ["bo", "hi"], ["ana", "I like tea"], ["ana", "bye"]]) {
        const r = await g.invoke({ user, said }, { configurable: { thread_id: randomUUID() } });
        out.push(r.answer);
      }
      return { out, namespaces: await store.listNamespaces() };
    };
    const want = await answers(new InMemoryStore());
    expect(want.out[3]).toBe("hello | I like tea | bye");
    expect(await answers(fresh())).toEqual(want);
  });
});
