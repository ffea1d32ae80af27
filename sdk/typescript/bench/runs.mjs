// The TypeScript SDK's figures for bench/sdks.sh: a durable effect's
// p50, a write-behind checkpoint's p50 (the call, not the write), and the
// steps per second of 64 runs at once (a step: a checkpoint, an effect, a
// checkpoint). Prints one JSON object. Needs npm run build and SPL_URL.
import { connect } from "../dist/index.js";

const n = Number(process.env.N ?? 300), runs = 64, steps = Number(process.env.STEPS ?? 20);
const c = await connect({ actor: "did:sync:agent:bench" });
const id = `ts_${Date.now()}`;
const p50 = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const tool = () => ({ ok: true });
const run = await c.openRun(id, { thread: "bench-runs" });
const effect = [], cp = [];
for (let i = 0; i < n; i++) {
  const t = performance.now();
  await run.effect(`c${i}`, "t", { i }, tool);
  effect.push(performance.now() - t);
}
for (let i = 0; i < n; i++) {
  const t = performance.now();
  await run.checkpoint("pre_tool_batch", { i });
  cp.push(performance.now() - t);
}
await run.finish("ok");
const start = performance.now();
await Promise.all(Array.from({ length: runs }, async (_, w) => {
  const r = await c.openRun(`${id}_c${w}`, { thread: "bench-runs" });
  for (let s = 0; s < steps; s++) {
    await r.checkpoint("pre_tool_batch", { s });
    await r.effect(`c${s}`, "t", { s }, tool);
    await r.checkpoint("post_tool_batch", { s });
  }
  await r.finish("ok");
}));
const sps = (runs * steps) / ((performance.now() - start) / 1000);
await c.close();
console.log(JSON.stringify({ effect_p50_ms: p50(effect), checkpoint_p50_us: p50(cp) * 1000, concurrent_steps_per_s: sps }));
