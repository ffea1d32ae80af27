"""Signals (Run.await_signal, Client.signal_run) against a real spl serve
at SPL_URL (.ci/sdks starts one): the promises of the Go SDK's
AwaitSignal and SignalRun (sdk/run_signal.go) over the HTTP API."""

import asyncio
import os
import time
import unittest
import uuid

import spl

ACTOR = "did:sync:agent:dev"
ANA = "did:sync:user:ana"


def fresh(p):
    return f"{p}_{uuid.uuid4().hex[:8]}"


@unittest.skipUnless(os.environ.get("SPL_URL"), "set SPL_URL to an spl serve")
class RunSignalTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await spl.connect(actor=ACTOR)
        self.thread, self.rid = fresh("th_sig"), fresh("r")

    async def asyncTearDown(self):
        await self.client.close()

    def run_of(self):
        return self.client.run(self.rid, thread=self.thread)

    async def opened(self) -> spl.Run:
        """The run as a fresh client opens it (a resume in another process)."""
        other = await spl.connect(actor=ACTOR)
        try:
            run = await other.open_run(self.rid, thread=self.thread)
            await run.close()
            return run
        finally:
            await other.close()

    async def phases(self):
        return [p["phase"] for p in (await self.client.run(self.rid, thread=self.thread))["phases"]]

    async def until_waiting(self):
        """Returns once the run is waiting (as another process sees it)."""
        while True:
            try:
                if (await self.client.run(self.rid, thread=self.thread))["status"] == "waiting":
                    return
            except spl.NotFoundError:  # no checkpoint yet
                pass
            await asyncio.sleep(0.05)

    async def signal(self, name="approval", **kw):
        return await self.client.signal_run(self.rid, name, thread=self.thread, **kw)

    async def test_wait_signal_resume(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {}, durable=True)
            with self.assertRaises(spl.RunNotWaitingError) as e:  # running, waiting for nothing
                await self.signal()
            self.assertIsInstance(e.exception, spl.ConflictError)
            self.assertEqual((e.exception.status, e.exception.code), (409, "run_not_waiting"))
            self.assertEqual((run.status, run.waiting_for, run.signal), ("running", None, None))

            t0 = time.monotonic()
            with self.assertRaises(spl.StillWaitingError) as e:
                await run.await_signal("approval", {"question": "ship it?"})
            self.assertLess(time.monotonic() - t0, 5)  # timeout 0: does not wait
            err = e.exception
            self.assertNotIsInstance(err, spl.ConflictError)
            self.assertNotIsInstance(err, spl.SplError)
            self.assertEqual((err.run_id, err.name, err.timeout), (self.rid, "approval", 0.0))
            self.assertIn("waiting", str(err))
            self.assertIn("may end", str(err))
            self.assertEqual((run.status, run.waiting_for), ("waiting", "approval"))
            # Asked again through the same Run: still the one wait.
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval", {"question": "ship it?"})
        self.assertEqual(await self.phases(), ["run_started", "awaiting_signal"])

        # What another process opens: waiting for approval.
        seen = await self.opened()
        self.assertEqual((seen.status, seen.waiting_for, seen.signal, seen.signals), ("waiting", "approval", None, []))
        self.assertEqual((seen.latest.phase, seen.latest.payload), ("awaiting_signal", {"question": "ship it?", "signal": "approval"}))
        runs = await self.client.runs(thread=self.thread, status="waiting")
        self.assertEqual([(r["run_id"], r["status"], r.get("waiting_for")) for r in runs], [(self.rid, "waiting", "approval")])

        # Another signal's name is refused, the awaited one taken, once.
        with self.assertRaises(spl.RunNotWaitingError) as e:
            await self.signal("rejection")
        self.assertIn("approval", str(e.exception))
        sent = await self.signal(data={"approved": True, "by": "ana"}, actor=ANA)
        self.assertEqual((sent["run_id"], sent["name"]), (self.rid, "approval"))
        self.assertTrue(sent["request"] and sent["clock"])
        with self.assertRaises(spl.RunNotWaitingError):  # a second signal for the one wait
            await self.signal(data={"approved": False})

        # A resume carries the signal; await_signal returns it at once and
        # writes nothing.
        async with self.run_of() as run:
            self.assertEqual((run.status, run.waiting_for), ("running", None))
            self.assertEqual(run.signal, spl.RunSignal("approval", {"approved": True, "by": "ana"}, ANA, sent["request"], sent["clock"]))
            t0 = time.monotonic()
            got = await run.await_signal("approval", {"question": "ship it?"}, timeout=30)
            self.assertLess(time.monotonic() - t0, 1)
            self.assertIs(got, run.signal)
            self.assertEqual(run.signals, [got])
            self.assertEqual((run.stats.written, run.stats.pending), (0, 0))
            self.assertEqual(await self.phases(), ["run_started", "awaiting_signal"])
            rep = await run.finish({"shipped": got.data["approved"]})
        self.assertEqual(rep.status, "terminal")
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual((detail["status"], detail["terminal_result"]), ("terminal", {"shipped": True}))
        with self.assertRaises(spl.RunFinishedError):  # a finished run takes no signal
            await self.signal()

    async def test_a_name_is_one_wait(self):
        async with self.run_of() as run:
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        sent = await self.signal(data={"approved": True})
        # Resumed with the signal, a checkpoint written, then killed before
        # the run finished: the next open's newest checkpoint waits for
        # nothing, but the name was answered.
        async with self.run_of() as run:
            self.assertEqual(run.signal.request, sent["request"])
            await run.checkpoint("run_started", {"resumed": True}, durable=True)
        async with self.run_of() as run:
            self.assertEqual((run.status, run.signal), ("running", None))
            self.assertEqual([(g.name, g.data, g.request) for g in run.signals], [("approval", {"approved": True}, sent["request"])])
            got = await run.await_signal("approval", {"question": "again?"})
            self.assertEqual((got.data, got.request, got.clock), ({"approved": True}, sent["request"], sent["clock"]))
            self.assertEqual(run.stats.written, 0)
            # Another name is another wait.
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("review")
            self.assertEqual(run.signals, [got])
        self.assertEqual(await self.phases(), ["awaiting_signal", "run_started", "awaiting_signal"])

    async def test_signal_while_polling(self):
        async def send_once_waiting():
            await self.until_waiting()
            return await self.signal(data={"approved": True}, actor=ANA)

        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
            await run.checkpoint("pre_llm", {"n": 1})  # queued: lands before the wait
            sender = asyncio.ensure_future(asyncio.wait_for(send_once_waiting(), 20))
            t0 = time.monotonic()
            got = await run.await_signal("approval", timeout=30)
            self.assertLess(time.monotonic() - t0, 10)
            sent = await sender
            self.assertEqual((got.name, got.data, got.actor, got.request, got.clock),
                             ("approval", {"approved": True}, ANA, sent["request"], sent["clock"]))
            self.assertEqual((run.status, run.waiting_for, run.signal), ("running", None, got))
            self.assertEqual(run.stats.pending, 0)
            await run.finish({"approved": True})
        self.assertEqual(await self.phases(), ["run_started", "pre_llm", "awaiting_signal", "run_terminal"])

    async def test_waits_timeout_then_resume_waits_on(self):
        async with self.run_of() as run:
            t0 = time.monotonic()
            with self.assertRaises(spl.StillWaitingError) as e:
                await run.await_signal("approval", timeout=1.2)
            self.assertGreaterEqual(time.monotonic() - t0, 1.2)
            self.assertEqual(e.exception.timeout, 1.2)
        # Opened waiting for it, nothing checkpointed since: no second
        # awaiting_signal checkpoint.
        async with self.run_of() as run:
            self.assertEqual(run.status, "waiting")
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        self.assertEqual(await self.phases(), ["awaiting_signal"])
        # A checkpoint through the Run ends the wait (the run is running
        # again): the wait is recorded again, and the run is waiting.
        async with self.run_of() as run:
            await run.checkpoint("run_started", {"resumed": True})
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        self.assertEqual(await self.phases(), ["awaiting_signal", "run_started", "awaiting_signal"])
        self.assertEqual((await self.opened()).status, "waiting")
        # Waiting for one signal, asked for another: that one is recorded.
        async with self.run_of() as run:
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("review")
            self.assertEqual(run.waiting_for, "review")
        with self.assertRaises(spl.RunNotWaitingError):
            await self.signal("approval")
        await self.signal("review")
        seen = await self.opened()
        self.assertEqual((seen.status, seen.signal.name, seen.signal.data, seen.signal.actor), ("running", "review", None, ACTOR))

    async def test_cancel_while_waiting(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
            waiting = asyncio.ensure_future(run.await_signal("approval", timeout=60))
            await asyncio.wait_for(self.until_waiting(), 10)
            await self.client.cancel_run(self.rid, thread=self.thread, reason="not needed")
            with self.assertRaises(spl.RunCancelledError) as e:
                await asyncio.wait_for(waiting, 10)
            self.assertEqual((e.exception.reason, e.exception.actor, e.exception.code), ("not needed", ACTOR, "run_cancelled"))
            self.assertEqual(run.status, "cancelled")
            with self.assertRaises(spl.RunCancelledError):
                await run.checkpoint("pre_llm", {})
            with self.assertRaises(spl.RunFinishedError):  # cancelled: a signal is refused as for a finished run
                await self.signal()
            self.assertEqual((await run.finish(state="cancelled")).status, "cancelled")
        # Opened cancelled: await_signal raises the cancel.
        async with self.run_of() as run:
            with self.assertRaises(spl.RunFinishedError):
                await run.await_signal("approval")

    async def test_opened_cancelled_waiting(self):
        async with self.run_of() as run:
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        await self.client.cancel_run(self.rid, thread=self.thread, reason="stop")
        async with self.run_of() as run:
            self.assertEqual((run.status, run.waiting_for), ("cancelled", None))
            with self.assertRaises(spl.RunCancelledError) as e:
                await run.await_signal("approval")
            self.assertEqual(e.exception.reason, "stop")
        self.assertEqual(await self.phases(), ["awaiting_signal"])

    async def test_refused_names(self):
        async with self.run_of() as run:
            with self.assertRaises(spl.InvalidError) as e:
                await run.await_signal("Not A Name")
            self.assertEqual(e.exception.field, "checkpoints[0].payload.signal")
            with self.assertRaises(spl.StillWaitingError):
                await run.await_signal("approval")
        with self.assertRaises(spl.InvalidError) as e:
            await self.signal("Not A Name")
        self.assertEqual(e.exception.field, "name")
        with self.assertRaises(spl.NotFoundError):  # no such run
            await self.client.signal_run(fresh("nosuch"), "approval", thread=self.thread)


if __name__ == "__main__":
    unittest.main()
