"""The Python SDK's figures for bench/sdks.sh: one writer's durable emit
p50, 64 concurrent emitters' records/s, the latest checkpoint's p50
(verified). Prints one JSON object. Needs SPL_URL."""

import asyncio
import json
import os
import statistics
import time

import spl


async def main():
    n, total, workers = int(os.environ.get("N", 300)), int(os.environ.get("TOTAL", 3000)), 64
    c = await spl.connect(actor="did:sync:agent:bench", max_in_flight=workers)
    run = f"py_{time.time_ns()}"
    lat = []
    for i in range(n):
        t = time.perf_counter()
        await c.emit(act="DO", kind="agent.step", thread=f"{run}_one", body={"step": i})
        lat.append((time.perf_counter() - t) * 1000)
    emit_p50 = statistics.median(lat)
    nxt = iter(range(total))

    async def worker(w):
        for i in nxt:
            await c.emit(act="DO", kind="agent.step", thread=f"{run}_c{w}", body={"step": i})
    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    rps = total / (time.perf_counter() - start)
    cp = f"{run}_cp"
    await c.emit(act="LEARN", kind="agent.session.checkpoint", thread=cp,
                 body={"summary": "Completed auth refactor", "learnings": ["mutex pattern worked"], "next_steps": "Write migration tests"})
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        await c.latest_checkpoint(cp)
        lat.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"emit_p50_ms": emit_p50, "concurrent_rps": rps, "latest_p50_ms": statistics.median(lat)}))
    await c.close()


asyncio.run(main())
