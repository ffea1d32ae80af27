"""The Python SDK against a real spl serve at SPL_URL (.ci/run starts one)."""

import asyncio
import os
import unittest
import uuid

import spl

ACTOR = "did:sync:agent:dev"


def fresh(p):
    return f"{p}_{uuid.uuid4().hex[:8]}"


@unittest.skipUnless(os.environ.get("SPL_URL"), "set SPL_URL to an spl serve")
class ClientTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await spl.connect(actor=ACTOR)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_page_as_written(self):
        client, thread = self.client, fresh("th_auth_refactor")
        await client.emit(act="LEARN", kind="agent.session.checkpoint",
            body={"summary": "Completed auth refactor", "learnings": ["mutex pattern worked"], "next_steps": "Write migration tests"},
            thread=thread)
        await client.emit(act="KNOW", kind="agent.step", body={"step": 1}, thread=thread)
        records = await client.query_thread(thread=thread)
        checkpoints = sorted((r for r in records if r.body.get("kind") == "agent.session.checkpoint"), key=lambda r: r.clock)
        latest = checkpoints[-1]
        self.assertEqual(latest.body["summary"], "Completed auth refactor")
        self.assertEqual(latest.body["next_steps"], "Write migration tests")  # kept as given
        self.assertTrue(latest.verified)
        self.assertEqual(latest.derived_body_keys, ["kind"])
        self.assertNotIn("kind", latest.stored_body)
        cp = await client.latest_checkpoint(thread)
        self.assertEqual(cp.id, latest.id)
        self.assertEqual(cp["next_steps"], ["Write migration tests"])

    async def test_body_header_mismatch(self):
        thread = fresh("th_page")
        await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread,
            body={"summary": "s", "learnings": ["l"], "next_steps": "n", "thread": thread, "session_id": "sess_1", "actor": ACTOR})
        with self.assertRaises(spl.InvalidError) as e:
            await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread,
                body={"summary": "s", "learnings": ["l"], "thread": "th_other"})
        self.assertEqual(e.exception.field, "body.thread")

    async def test_many_paging_filters(self):
        thread = fresh("th_many")
        for i in range(25):
            self.client.enqueue(act="DO", kind="agent.step", thread=thread, body={"step": i})
        await self.client.flush()
        allr = await self.client.query_thread(thread=thread, page_size=7)
        self.assertEqual(sorted(r.stored_body["step"] for r in allr), list(range(25)))
        ten = await self.client.query_thread(thread=thread, limit=10, page_size=4)
        self.assertEqual(len(ten), 10)
        rest = await self.client.query_thread(thread=thread, from_clock=ten[-1].clock + 1)
        self.assertEqual(len(rest), 15)
        self.assertEqual(len(await self.client.query_thread(thread=thread, last=3)), 3)
        self.assertEqual(await self.client.query_thread(thread=thread, kind="agent.other"), [])

    async def test_checkpoints_records(self):
        thread = fresh("th_cp")
        for s in ("one", "two"):
            await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread, body={"summary": s, "learnings": ["l"]})
        cps = await self.client.list_checkpoints(thread)
        self.assertEqual([c["summary"] for c in cps], ["one", "two"])
        latest = await self.client.latest_checkpoints(limit=1000)
        self.assertTrue(any(c["thread"] == thread and c["summary"] == "two" for c in latest))
        r = await self.client.record(cps[0].id, thread=thread)
        self.assertEqual(r.stored_body["summary"], "one")
        raw = await self.client.record_bytes(cps[0].id, thread=thread)
        self.assertEqual(raw[0], 0xA3)

    async def test_large_records(self):
        thread = fresh("th_large")
        messages = [f"message {i} " + "x" * 1000 for i in range(10_000)]
        r = await self.client.emit(act="KNOW", kind="agent.state", thread=thread, body={"messages": messages})
        back = await self.client.record(r.id, thread=thread)
        self.assertTrue(back.verified)
        self.assertEqual(back.stored_body["messages"], messages)
        await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread,
            body={"summary": "long", "learnings": ["kept"], "state": {"messages": messages[:5_000]}})
        cp = await self.client.latest_checkpoint(thread)
        self.assertEqual(len(cp["state"]["messages"]), 5_000)

    async def test_errors(self):
        with self.assertRaises(spl.InvalidError) as e:
            await self.client.emit(act="do", kind="agent.step", thread="t", body={})
        self.assertEqual(e.exception.field, "act")
        with self.assertRaises(spl.NotFoundError):
            await self.client.latest_checkpoint(fresh("th_none"))

    async def test_conditional_append(self):
        client, thread = self.client, fresh("th_cas")
        # Emits of one moment: the conditional one goes alone, in its place.
        first, second = await asyncio.gather(
            client.emit(act="DO", kind="agent.step", body={"n": 1}, thread=thread),
            client.emit(act="DO", kind="agent.step", body={"n": 2}, thread=thread, expected_clock=0),
            return_exceptions=True)
        self.assertIsInstance(second, spl.ConflictError)
        self.assertEqual(second.field, "expected_clock")
        self.assertEqual(second.clock, first.clock)
        third = await client.emit(act="DO", kind="agent.step", body={"n": 3}, thread=thread, expected_clock=first.clock)
        self.assertEqual(third.prev, first.id)
        self.assertEqual([r.stored_body["n"] for r in await client.query_thread(thread=thread)], [1, 3])

    async def test_follow(self):
        thread = fresh("th_follow")
        got = []

        async def follow():
            async for r in self.client.follow(thread, from_clock=1):
                got.append(r.stored_body["n"])
                if len(got) == 3:
                    return
        task = asyncio.ensure_future(follow())
        for n in range(3):
            await self.client.emit(act="DO", kind="agent.step", thread=thread, body={"n": n})
        await asyncio.wait_for(task, 10)
        self.assertEqual(got, [0, 1, 2])

    async def test_erase_pin_retention(self):
        thread = fresh("th_erase")
        a = await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread, body={"summary": "secret", "learnings": ["l"]})
        self.assertEqual((await self.client.pin(thread, a.id, reason="keep"))["target"], a.id)
        self.assertEqual((await self.client.set_retention(thread=thread, keep_last=3))["keep_last"], 3)
        self.assertTrue(any(p["thread"] == thread for p in await self.client.retention()))
        await self.client.clear_retention(thread=thread)
        res = await self.client.erase(thread, all=True, reason="test")
        self.assertIn(a.id, res["erased"])
        left = await self.client.query_thread(thread=thread)
        self.assertTrue(all(r.kind == "core.erasure" for r in left))
        with self.assertRaises(spl.NotFoundError):
            await self.client.record(a.id, thread=thread)

    async def test_sessions_runs(self):
        thread = fresh("th_sess")
        await self.client.emit(act="LEARN", kind="agent.session.checkpoint", thread=thread, body={"summary": "s", "learnings": ["l"]})
        await self.client.pause(thread, reason="lunch")
        s = await self.client.sessions(status="paused")
        self.assertTrue(any(x["session_id"] == thread for x in s["sessions"]))
        await self.client.resume(thread)
        self.assertIsInstance(await self.client.runs(), list)
        self.assertEqual((await self.client.lineage(thread))["thread"], thread)


if __name__ == "__main__":
    unittest.main()
