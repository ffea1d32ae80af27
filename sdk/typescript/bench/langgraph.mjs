// The cost of a LangGraph step by thread length: N invokes (default 200)
// of a one-node graph on one thread under SplSaver (against SPL_URL),
// LangGraph's MemorySaver and its SqliteSaver (a file), in turns, in one
// process. Prints, per saver, the median invoke of the first and of the
// last 20, their ratio (1.0: a step costs the same at the end of the
// thread as at its start), and SplSaver's step over SqliteSaver's.
// Needs npm run build and SPL_URL (and SPL_TOKEN).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { connect } from "../dist/index.js";
import { SplSaver } from "../dist/langgraph.js";

const n = Number(process.env.N ?? 200), edge = 20;
const State = Annotation.Root({
  n: Annotation({ reducer: (a, b) => a + b, default: () => 0 }),
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
const graph = (saver) =>
  new StateGraph(State)
    .addNode("step", (s) => ({ n: 1, messages: [{ role: "assistant", content: `step ${s.n + 1}` }] }))
    .addEdge(START, "step").addEdge("step", END).compile({ checkpointer: saver });
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const dir = mkdtempSync(join(tmpdir(), "lg-bench-"));
const client = await connect({ actor: "did:sync:agent:bench" });
const savers = {
  spl: new SplSaver(client, { prefix: `lg-bench-${randomUUID().slice(0, 8)}/` }),
  memory: new MemorySaver(),
  sqlite: SqliteSaver.fromConnString(join(dir, "lg.sqlite")),
};
const graphs = Object.fromEntries(Object.entries(savers).map(([k, s]) => [k, graph(s)]));
const threads = Object.fromEntries(Object.keys(savers).map((k) => [k, { configurable: { thread_id: randomUUID() } }]));
const times = Object.fromEntries(Object.keys(savers).map((k) => [k, []]));
for (let i = 0; i < n; i++) {
  for (const k of Object.keys(savers)) { // in turns: the machine's noise falls on all three
    const t = performance.now();
    await graphs[k].invoke({ n: 0 }, threads[k]);
    times[k].push(performance.now() - t);
  }
}
const out = { invokes: n };
for (const [k, v] of Object.entries(times)) {
  const first = median(v.slice(0, edge)), last = median(v.slice(-edge));
  out[k] = { first_ms: +first.toFixed(3), last_ms: +last.toFixed(3), last_over_first: +(last / first).toFixed(2) };
}
out.spl_step_over_sqlite = +(median(times.spl.slice(-edge)) / median(times.sqlite.slice(-edge))).toFixed(2);
await client.close();
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(out, null, 2));
