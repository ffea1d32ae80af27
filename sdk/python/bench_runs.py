"""The Python SDK's figures for bench/sdks.sh: a durable effect's p50,
a write-behind checkpoint's p50 (the call, not the write), and the steps
per second of 64 runs at once (a step: a checkpoint, an effect, a
checkpoint). Prints one JSON object. Needs SPL_URL."""

import asyncio
import json
import os
import time

import spl

N = int(os.environ.get("N", "300"))
RUNS = 64
STEPS = int(os.environ.get("STEPS", "20"))


def p50(v: list[float]) -> float:
    return sorted(v)[len(v) // 2]


def tool() -> dict:
    return {"ok": True}


async def main() -> None:
    c = await spl.connect(actor="did:sync:agent:bench")
    run_id = f"py_{time.time_ns()}"
    effect: list[float] = []
    cp: list[float] = []
    async with c.run(run_id, thread="bench-runs") as run:
        for i in range(N):
            t = time.perf_counter()
            await run.effect(f"c{i}", "t", {"i": i}, tool)
            effect.append((time.perf_counter() - t) * 1000)
        for i in range(N):
            t = time.perf_counter()
            await run.checkpoint("pre_tool_batch", {"i": i})
            cp.append((time.perf_counter() - t) * 1000)
        await run.finish("ok")

    async def one(w: int) -> None:
        async with c.run(f"{run_id}_c{w}", thread="bench-runs") as r:
            for s in range(STEPS):
                await r.checkpoint("pre_tool_batch", {"s": s})
                await r.effect(f"c{s}", "t", {"s": s}, tool)
                await r.checkpoint("post_tool_batch", {"s": s})
            await r.finish("ok")

    start = time.perf_counter()
    await asyncio.gather(*(one(w) for w in range(RUNS)))
    sps = RUNS * STEPS / (time.perf_counter() - start)
    await c.close()
    print(json.dumps({"effect_p50_ms": p50(effect), "checkpoint_p50_us": p50(cp) * 1000, "concurrent_steps_per_s": sps}))


asyncio.run(main())
