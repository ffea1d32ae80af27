// The TypeScript SDK's figures for bench/sdks.sh: one writer's durable emit
// p50, 64 concurrent emitters' records/s, the latest checkpoint's p50
// (verified). Prints one JSON object. Needs npm run build and SPL_URL.
import { connect } from "../dist/index.js";

const n = Number(process.env.N ?? 300), total = Number(process.env.TOTAL ?? 3000), workers = 64;
const c = await connect({ actor: "did:sync:agent:bench", maxInFlight: workers });
const run = `ts_${Date.now()}`;
const p50 = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
let lat = [];
for (let i = 0; i < n; i++) {
  const t = performance.now();
  await c.emit({ act: "DO", kind: "agent.step", thread: `${run}_one`, body: { step: i } });
  lat.push(performance.now() - t);
}
const emitP50 = p50(lat);
let next = 0;
const start = performance.now();
await Promise.all(Array.from({ length: workers }, async (_, w) => {
  while (next < total) {
    const i = next++;
    await c.emit({ act: "DO", kind: "agent.step", thread: `${run}_c${w}`, body: { step: i } });
  }
}));
const rps = total / ((performance.now() - start) / 1000);
const cp = `${run}_cp`;
await c.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread: cp, body: { summary: "Completed auth refactor", learnings: ["mutex pattern worked"], next_steps: "Write migration tests" } });
lat = [];
for (let i = 0; i < n; i++) {
  const t = performance.now();
  await c.latestCheckpoint(cp);
  lat.push(performance.now() - t);
}
await c.close();
console.log(JSON.stringify({ emit_p50_ms: emitP50, concurrent_rps: rps, latest_p50_ms: p50(lat) }));
