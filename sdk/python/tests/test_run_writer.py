"""The run's writer against a server of a few lines that answers as each
test scripts it: what a real spl serve does not do on demand (stall, 503,
lose an answer). Needs no SPL_URL."""

import asyncio
import json
import unittest

import spl

ACTOR = "did:sync:agent:dev"
OPEN = {"run_id": "r", "thread": "t", "status": "running", "resumed": False, "latest": None, "snapshot": None,
        "terminal_result": None, "pending_llm_response": None, "effects": [], "cancel": None}


class ScriptedServer:
    """Answers each request with handler(route, body): (status, JSON), or
    "drop" (close the connection unanswered), or "hang" (never answer)."""

    def __init__(self, handler):
        self.handler, self.requests = handler, []

    async def handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                path = lines[0].split()[1]
                length = next((int(h.split(":")[1]) for h in lines[1:] if h.lower().startswith("content-length:")), 0)
                body = json.loads(await reader.readexactly(length)) if length else None
                route = path.rsplit("/", 1)[1]
                self.requests.append((route, body))
                answer = self.handler(route, body)
                if answer == "drop":
                    break
                if answer == "hang":
                    await asyncio.sleep(3600)
                status, j = answer
                data = json.dumps(j).encode()
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (status, len(data)) + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def routes(self):
        return [r for r, _ in self.requests]


class RunWriterTest(unittest.IsolatedAsyncioTestCase):
    async def serve(self, handler):
        self.srv = ScriptedServer(handler)
        self.server = await asyncio.start_server(self.srv.handle, "127.0.0.1", 0)
        self.addAsyncCleanup(self.stop)
        self.client = spl.Client(f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}", actor=ACTOR)
        return self.srv

    async def stop(self):
        await self.client.close()
        self.server.close()

    @staticmethod
    def receipts(body):
        return 201, {"receipts": [{"id": f"id{i}", "clock": i + 1} for i in range(len(body["checkpoints"]))]}

    async def test_flush_and_close_bounded(self):
        await self.serve(lambda route, body: (200, OPEN) if route == "open" else "hang")
        run = await self.client.open_run("r", thread="t", flush_timeout=0.2)
        await run.checkpoint("pre_llm", {"n": 1})
        with self.assertRaises(spl.UnlandedError) as e:
            await run.flush()
        self.assertEqual((e.exception.pending, e.exception.timeout, e.exception.failures), (1, 0.2, []))
        durable = asyncio.ensure_future(run.checkpoint("post_llm", {"step": 1}))
        await asyncio.sleep(0)
        with self.assertRaises(spl.UnlandedError) as e:
            await run.close()
        self.assertEqual(e.exception.pending, 2)
        with self.assertRaises(spl.SplError):  # given up on: in doubt
            await durable
        with self.assertRaises(spl.RunFinishedError):
            await run.checkpoint("pre_llm", {})
        run2 = await self.client.open_run("r", thread="t", flush_timeout=0.2)
        await run2.checkpoint("pre_llm", {})
        with self.assertRaises(spl.UnlandedError) as e:
            await run2.finish({"x": 1})
        self.assertEqual(e.exception.pending, 1)
        self.assertNotIn("finish", self.srv.routes())  # nothing finished: what was queued comes first
        with self.assertRaises(spl.UnlandedError):
            await run2.close()

    async def test_retried_on_503_and_lost_connection(self):
        seen = {"n": 0}

        def handler(route, body):
            if route == "open":
                return 200, OPEN
            seen["n"] += 1
            if seen["n"] == 1:
                return 503, {"error": "storage unavailable"}
            if seen["n"] == 2:
                return "drop"
            return self.receipts(body)
        srv = await self.serve(handler)
        async with self.client.run("r", thread="t") as run:
            await run.checkpoint("post_llm", {"step": 1})
            self.assertEqual(run.stats.written, 1)
        self.assertEqual(srv.routes(), ["open", "checkpoints", "checkpoints", "checkpoints"])

    async def test_batches_in_call_order(self):
        srv = await self.serve(lambda route, body: (200, OPEN) if route == "open" else self.receipts(body))
        async with self.client.run("r", thread="t") as run:
            for i in range(600):
                await run.checkpoint("pre_llm", {"i": i})
            await run.flush()
            self.assertEqual((run.stats.written, run.stats.coalesced), (600, 0))
        sent = [b for r, b in srv.requests if r == "checkpoints"]
        self.assertEqual([len(b["checkpoints"]) for b in sent], [256, 256, 88])
        self.assertEqual([c["payload"]["i"] for b in sent for c in b["checkpoints"]], list(range(600)))
        self.assertTrue(all(b["thread"] == "t" and b["actor"] == ACTOR for b in sent))

    async def test_finish_retried_after_lost_answer(self):
        state = {"finished": False}

        def handler(route, body):
            if route == "open":
                if state["finished"]:
                    return 200, {**OPEN, "status": "terminal", "resumed": True, "terminal_result": {"ok": 1},
                                 "latest": {"phase": "run_terminal", "kind": "agent.run.checkpoint", "id": "T", "clock": 9}}
                return 200, OPEN
            if route == "finish":
                if not state["finished"]:
                    state["finished"] = True
                    return "drop"  # written, answer lost
                return 409, {"code": "run_finished", "error": "run is terminal"}
            return self.receipts(body)
        await self.serve(handler)
        async with self.client.run("r", thread="t") as run:
            rep = await run.finish({"ok": 1})
        self.assertEqual((rep.id, rep.clock, rep.status), ("T", 9, "terminal"))

    async def test_not_retried_finish_conflict_raises(self):
        def handler(route, body):
            if route == "open":
                return 200, OPEN
            return 409, {"code": "run_finished", "error": "run is terminal"}
        await self.serve(handler)
        async with self.client.run("r", thread="t") as run:
            with self.assertRaises(spl.RunFinishedError):
                await run.finish({"ok": 1})

    async def test_await_signal_polls(self):
        state = {"opens": 0}
        signal = {"name": "approval", "data": {"ok": True}, "actor": "did:sync:user:ana", "request": "S", "clock": 3}

        def handler(route, body):
            if route == "open":
                state["opens"] += 1
                if state["opens"] == 4:  # the third poll: the signal came
                    return 200, {**OPEN, "resumed": True, "signal": signal,
                                 "latest": {"phase": "awaiting_signal", "kind": "agent.run.checkpoint", "id": "A", "clock": 2}}
                if state["opens"] > 1:
                    return 200, {**OPEN, "status": "waiting", "waiting_for": "approval", "resumed": True,
                                 "latest": {"phase": "awaiting_signal", "kind": "agent.run.checkpoint", "id": "A", "clock": 2}}
                return 200, OPEN
            return self.receipts(body)  # pre_llm at clock 1, the wait at 2
        srv = await self.serve(handler)
        async with self.client.run("r", thread="t") as run:
            await run.checkpoint("pre_llm", {"n": 1})
            got = await run.await_signal("approval", {"question": "q?", "signal": "overridden"}, timeout=30)
            self.assertEqual(got, spl.RunSignal("approval", {"ok": True}, "did:sync:user:ana", "S", 3))
            self.assertEqual((run.status, run.waiting_for, run.signal), ("running", None, got))
        self.assertEqual(srv.routes(), ["open", "checkpoints", "open", "open", "open"])
        # One batch: the queued checkpoint, then the wait, in call order.
        sent = [c for r, b in srv.requests if r == "checkpoints" for c in b["checkpoints"]]
        self.assertEqual([(c["phase"], c["payload"]) for c in sent],
                         [("pre_llm", {"n": 1}), ("awaiting_signal", {"question": "q?", "signal": "approval"})])
        self.assertTrue(all(b == {"thread": "t"} for r, b in srv.requests if r == "open"))

    async def test_await_signal_timeout_zero_asks_once(self):
        srv = await self.serve(lambda route, body: (200, OPEN) if route == "open" else self.receipts(body))
        async with self.client.run("r", thread="t") as run:
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        self.assertEqual(srv.routes(), ["open", "checkpoints", "open"])


if __name__ == "__main__":
    unittest.main()
