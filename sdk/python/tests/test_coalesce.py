"""Emits of one moment, coalesced into one request, against a real spl
serve at SPL_URL (.ci/run starts one)."""

import asyncio
import os
import unittest
import urllib.request
import uuid

import spl

ACTOR = "did:sync:agent:dev"


def fresh(p):
    return f"{p}_{uuid.uuid4().hex[:8]}"


def served(route: str) -> int:
    """Requests the server counted on a route (its /metrics)."""
    req = urllib.request.Request(os.environ["SPL_URL"] + "/metrics")
    if os.environ.get("SPL_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["SPL_TOKEN"])
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("spl_http_requests_total{") and f'route="{route}"' in line)


@unittest.skipUnless(os.environ.get("SPL_URL"), "set SPL_URL to an spl serve")
class CoalesceTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await spl.connect(actor=ACTOR)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_one_request_in_call_order(self):
        a, b = fresh("th_coalesce_a"), fresh("th_coalesce_b")
        before = await asyncio.to_thread(served, "POST /v1/records/batch")
        got = await asyncio.gather(*(self.client.emit(act="DO", kind="agent.step", thread=b if i % 2 else a, body={"step": i})
                                     for i in range(40)))
        self.assertEqual(await asyncio.to_thread(served, "POST /v1/records/batch"), before + 1)
        self.assertEqual([r.stored_body["step"] for r in got], list(range(40)))
        for thread, parity in ((a, 0), (b, 1)):
            recs = await self.client.query_thread(thread=thread)
            self.assertEqual([r.stored_body["step"] for r in recs], [i for i in range(40) if i % 2 == parity])
            self.assertEqual([r.id for r in recs], [r.id for i, r in enumerate(got) if i % 2 == parity])
            for i, r in enumerate(recs):
                self.assertEqual(r.prev, recs[i - 1].id if i else None)

    async def test_bad_record_fails_alone(self):
        thread = fresh("th_coalesce_bad")
        out = await asyncio.gather(
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 0}),
            self.client.emit(act="do", kind="agent.step", thread=thread, body={"step": 1}),
            self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread,
                             body={"summary": "s", "learnings": ["l"], "thread": "th_other"}),
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"x": float("nan")}),
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 4}),
            return_exceptions=True)
        self.assertIsInstance(out[0], spl.Record)
        self.assertIsInstance(out[1], spl.InvalidError)
        self.assertEqual(out[1].field, "act")
        self.assertTrue(out[1].rule.startswith("must match"), out[1].rule)
        self.assertIsInstance(out[2], spl.InvalidError)
        self.assertEqual(out[2].field, "body.thread")
        self.assertIsInstance(out[3], spl.InvalidError)  # NaN is not JSON: refused as it is alone
        self.assertIsInstance(out[4], spl.Record)
        recs = await self.client.query_thread(thread=thread)
        self.assertEqual([r.stored_body["step"] for r in recs], [0, 4])

    async def test_too_large_goes_alone(self):
        # Too large to share a request (once refused, now kept beside the
        # log): it lands, in call order.
        thread = fresh("th_coalesce_big")
        out = await asyncio.gather(
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 0}),
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 1, "text": "x" * 1_200_000}),
            self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 2}),
            return_exceptions=True)
        for r in out:
            self.assertIsInstance(r, spl.Record)
        self.assertEqual([r.stored_body["step"] for r in await self.client.query_thread(thread=thread)], [0, 1, 2])

    async def test_cancelled_emit_is_not_sent(self):
        thread = fresh("th_coalesce_cancel")
        keep = asyncio.ensure_future(self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 0}))
        drop = asyncio.ensure_future(self.client.emit(act="DO", kind="agent.step", thread=thread, body={"step": 1}))
        await asyncio.sleep(0)  # both are queued
        drop.cancel()
        await keep
        self.assertEqual([r.stored_body["step"] for r in await self.client.query_thread(thread=thread)], [0])

    async def test_coalesce_off(self):
        c = await spl.connect(actor=ACTOR, coalesce=False)
        try:
            thread = fresh("th_alone")
            before = await asyncio.to_thread(served, "POST /v1/records")
            await asyncio.gather(*(c.emit(act="DO", kind="agent.step", thread=thread, body={"step": i}) for i in range(3)))
            self.assertEqual(await asyncio.to_thread(served, "POST /v1/records"), before + 3)
            self.assertEqual(len(await c.query_thread(thread=thread)), 3)
        finally:
            await c.close()


if __name__ == "__main__":
    unittest.main()
