"""Durable runs (Client.run, Run) against a real spl serve at SPL_URL
(.ci/sdks starts one): the Go SDK's promises over the HTTP API."""

import asyncio
import os
import unittest
import uuid
from urllib.parse import quote

import spl

ACTOR = "did:sync:agent:dev"


def fresh(p):
    return f"{p}_{uuid.uuid4().hex[:8]}"


@unittest.skipUnless(os.environ.get("SPL_URL"), "set SPL_URL to an spl serve")
class RunTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = await spl.connect(actor=ACTOR)
        self.thread, self.rid = fresh("th_run"), fresh("r")

    async def asyncTearDown(self):
        await self.client.close()

    def run_of(self, client=None, **kw):
        return (client or self.client).run(self.rid, thread=self.thread, **kw)

    async def opened(self) -> spl.Run:
        """The run as a fresh client opens it (a resume in another process)."""
        other = await spl.connect(actor=ACTOR)
        try:
            run = await other.open_run(self.rid, thread=self.thread)
            await run.close()
            return run
        finally:
            await other.close()

    async def test_round_trip(self):
        calls = []
        async with self.run_of() as run:
            self.assertEqual((run.status, run.resumed, run.latest, run.snapshot, run.effects_recorded),
                             ("running", False, None, None, 0))
            self.assertIsNone(run.terminal_result)
            await run.checkpoint("run_started", {"agent_name": "test"})
            await run.checkpoint("step_started", {"step": 1, "messages": []})
            await run.checkpoint("post_llm", {"step": 1, "pending_llm_response": {"text": "t"}})
            res = await run.effect("call-0", "append_line", {"n": 0}, lambda: calls.append(0) or {"line": "call-0"})
            self.assertEqual((res.output, res.replayed), ({"line": "call-0"}, False))
            self.assertTrue(res.id)
            await run.checkpoint("post_tool_batch", {"tool_calls_total": 1})
            rep = await run.finish({"final_text": "done", "tool_calls": 1}, payload={"final_text": "done"})
        self.assertEqual(rep.status, "terminal")
        self.assertEqual((rep.stats.ran, rep.stats.replayed, rep.stats.pending), (1, 0, 0))
        # step_started was still queued when post_llm came: superseded.
        self.assertEqual((rep.stats.written, rep.stats.coalesced), (5, 1))
        self.assertEqual(calls, [0])

        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual(detail["status"], "terminal")
        self.assertEqual(detail["terminal_result"], {"final_text": "done", "tool_calls": 1})
        phases = [p["phase"] for p in detail["phases"]]
        self.assertEqual(phases[0], "run_started")
        self.assertEqual(phases[-1], "run_terminal")
        self.assertIn("post_llm", phases)
        self.assertEqual([e["call_id"] for e in detail["effects"]], ["call-0"])
        with_outputs = await self.client.run(self.rid, thread=self.thread, outputs=True)
        self.assertEqual(with_outputs["effects"][0]["output"], {"line": "call-0"})
        runs = await self.client.runs(thread=self.thread)
        self.assertEqual([(r["run_id"], r["status"]) for r in runs], [(self.rid, "terminal")])

        # Reopened: terminal, its result, nothing to run.
        async with self.run_of() as again:
            self.assertEqual(again.status, "terminal")
            self.assertTrue(again.resumed)
            self.assertEqual(again.terminal_result, {"final_text": "done", "tool_calls": 1})
            self.assertEqual(again.latest.phase, "run_terminal")
            with self.assertRaises(spl.RunFinishedError):
                await again.checkpoint("step_started", {})
            with self.assertRaises(spl.RunFinishedError):
                await again.effect("call-1", "append_line", {"n": 1}, lambda: calls.append(1))
            with self.assertRaises(spl.RunFinishedError):
                await again.finish({"final_text": "again"})
        self.assertEqual(calls, [0])
        # The server's refusal, by its code.
        for route, body in (("finish", {"state": "completed"}), ("checkpoints", {"checkpoints": [{"phase": "pre_llm"}]})):
            with self.assertRaises(spl.RunFinishedError) as e:
                await self.client.request("POST", f"/v1/runs/{quote(self.rid)}/{route}", {"thread": self.thread, "actor": ACTOR, **body})
            self.assertEqual((e.exception.status, e.exception.code), (409, "run_finished"))
            self.assertIsInstance(e.exception, spl.ConflictError)

    async def test_write_behind_coalesces(self):
        async with self.run_of() as run:
            for i in range(50):
                await run.checkpoint("step_started", {"step": i})
            # Every call returned before anything was written.
            self.assertEqual((run.stats.written, run.stats.pending), (0, 50))
            await run.flush()
            st = run.stats
            self.assertGreater(st.coalesced, 0)
            self.assertEqual((st.written + st.coalesced, st.pending), (50, 0))
            # Other phases are never dropped; the newest snapshot is kept.
            for i in range(5):
                await run.checkpoint("pre_llm", {"i": i})
                await run.checkpoint("step_started", {"step": 100 + i})
            await run.flush()
        detail = await self.client.run(self.rid, thread=self.thread)
        phases = [p["phase"] for p in detail["phases"]]
        self.assertEqual(phases.count("pre_llm"), 5)
        self.assertEqual(phases[-1], "step_started")
        seen = await self.opened()
        self.assertEqual((seen.snapshot.phase, seen.snapshot.payload), ("step_started", {"step": 104}))
        self.assertTrue(seen.resumed)

    async def test_payload_taken_at_the_call(self):
        async with self.run_of() as run:
            s = {"step": 1, "messages": []}
            await run.checkpoint("step_started", s)
            s["step"] = 2
            s["messages"].append("changed after the call")
        seen = await self.opened()
        self.assertEqual(seen.snapshot.payload, {"step": 1, "messages": []})

    async def test_post_llm_durable(self):
        pending = {"text": "calling", "tool_calls": [{"id": "call-0", "name": "append_line", "args": '{"n":0}'}]}
        async with self.run_of() as run:
            await run.checkpoint("pre_llm", {"message_count": 0})
            await run.checkpoint("post_llm", {"step": 1, "pending_llm_response": pending})
            # Stored on return, after what was queued before it.
            self.assertEqual(run.stats.pending, 0)
            seen = await self.opened()
            self.assertEqual(seen.snapshot.phase, "post_llm")
            self.assertEqual(seen.latest.phase, "post_llm")
            self.assertEqual(seen.pending_llm_response, pending)
            self.assertEqual(seen.snapshot.payload["step"], 1)

            await run.checkpoint("post_llm", {"step": 2}, durable=False)  # write-behind on request
            self.assertEqual(run.stats.pending, 1)
            await run.checkpoint("pre_tool_batch", {"tool_call_count": 1}, durable=True)
            self.assertEqual(run.stats.pending, 0)
            seen = await self.opened()
            self.assertEqual(seen.latest.phase, "pre_tool_batch")
            self.assertEqual(seen.snapshot.payload, {"step": 2})
            self.assertIsNone(seen.pending_llm_response)
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual([p["phase"] for p in detail["phases"]], ["pre_llm", "post_llm", "post_llm", "pre_tool_batch"])

    async def test_large_payload(self):
        big = {"step": 1, "messages": [{"role": "tool", "content": "x" * 300_000}]}
        async with self.run_of() as run:
            await run.checkpoint("pre_llm", {"n": 1})
            await run.checkpoint("step_started", big, durable=True)
        seen = await self.opened()
        self.assertEqual(seen.snapshot.payload, big)  # stored beside the log, fetched
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertIsNotNone(detail["phases"][-1]["blob"])

    async def test_refused_checkpoints(self):
        async with self.run_of() as run:
            # A durable one raises its own error: the server's, naming the field.
            with self.assertRaises(spl.InvalidError) as e:
                await run.checkpoint("Bad Phase", {}, durable=True)
            self.assertEqual(e.exception.field, "checkpoints[0].phase")
            with self.assertRaises(spl.InvalidError) as e:
                await run.checkpoint("run_terminal", {}, durable=True)
            self.assertEqual(e.exception.field, "checkpoints[0].phase")
            with self.assertRaises(spl.InvalidError) as e:
                await run.checkpoint("pre_llm", [1, 2], durable=True)
            self.assertTrue(e.exception.field.startswith("checkpoints[0].payload"), e.exception.field)
            # Write-behind: the next flush reports them; the others of the
            # same batch land.
            await run.checkpoint("pre_llm", {"a": 1})
            await run.checkpoint("bad-phase", {})
            await run.checkpoint("pre_tool_batch", {"b": 2})
            await run.checkpoint("pre_llm", {"x": 1.5})
            with self.assertRaises(spl.UnlandedError) as e:
                await run.flush()
            self.assertEqual([p for p, _ in e.exception.failures], ["bad-phase"])
            self.assertIsInstance(e.exception.failures[0][1], spl.InvalidError)
            self.assertEqual(e.exception.pending, 0)
            self.assertIn("bad-phase", str(e.exception))
            await run.flush()  # reported once
            with self.assertRaises(ValueError):  # not JSON: refused at the call
                await run.checkpoint("pre_llm", {"x": float("nan")})
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual([p["phase"] for p in detail["phases"]], ["pre_llm", "pre_tool_batch", "pre_llm"])

    async def test_unlanded_reported_by_close(self):
        run = await self.client.open_run(self.rid, thread=self.thread)
        await run.checkpoint("BAD", {})
        with self.assertRaises(spl.UnlandedError) as e:
            await run.close()
        self.assertEqual(len(e.exception.failures), 1)
        await run.close()  # once
        # Leaving `async with` on an error keeps that error, with a note.
        with self.assertRaises(KeyError) as e:
            async with self.run_of() as run:
                await run.checkpoint("BAD", {})
                raise KeyError("body")
        self.assertTrue(any("BAD" in n for n in e.exception.__notes__), e.exception.__notes__)

    async def test_effect_replay_mismatch_rerun(self):
        calls = []

        def tool(line):
            def fn():
                calls.append(line)
                return {"line": line}
            return fn

        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
            first = await run.effect("call-0", "append_line", {"n": 0}, tool("a"))
            self.assertEqual((first.output, first.replayed), ({"line": "a"}, False))
            same = await run.effect("call-0", "append_line", {"n": 0}, tool("a"))  # recorded by this run since
            self.assertEqual((same.output, same.replayed, same.id), ({"line": "a"}, True, first.id))
            self.assertEqual((run.stats.ran, run.stats.replayed), (1, 1))
        self.assertEqual(calls, ["a"])

        async def async_tool():
            calls.append("async")
            return {"line": "async"}

        async with self.run_of() as run:
            self.assertTrue(run.resumed)
            self.assertEqual(run.effects_recorded, 1)
            rec = run.recorded_effects["call-0"]
            self.assertEqual(rec.tool, "append_line")
            self.assertTrue(rec.input_hash.startswith("blake3:"))
            again = await run.effect("call-0", "append_line", {"n": 0}, async_tool)
            self.assertEqual((again.output, again.replayed, again.id, again.clock), ({"line": "a"}, True, first.id, first.clock))
            self.assertEqual(calls, ["a"])

            with self.assertRaises(spl.EffectMismatchError) as e:
                await run.effect("call-0", "append_line", {"n": 1}, tool("b"))
            err = e.exception
            self.assertIsInstance(err, spl.ConflictError)
            self.assertEqual((err.status, err.code, err.recorded_tool, err.call_id, err.tool), (409, "effect_mismatch", "append_line", "call-0", "append_line"))
            self.assertTrue(err.recorded.startswith("blake3:") and err.got.startswith("blake3:"))
            self.assertNotEqual(err.recorded, err.got)
            self.assertEqual(err.recorded, rec.input_hash)
            self.assertEqual(calls, ["a"])

            rerun = await run.effect("call-0", "append_line", {"n": 1}, tool("b"), rerun=True)
            self.assertEqual((rerun.output, rerun.replayed), ({"line": "b"}, False))
            self.assertEqual(calls, ["a", "b"])

            # An error from fn records nothing; the call runs next time.
            def boom():
                raise RuntimeError("tool failed")
            with self.assertRaises(RuntimeError):
                await run.effect("call-1", "append_line", {"n": 1}, boom)
            ok = await run.effect("call-1", "append_line", {"n": 1}, async_tool)
            self.assertFalse(ok.replayed)
            self.assertEqual(calls, ["a", "b", "async"])
            rep = await run.finish({"ok": True})
        self.assertEqual((rep.stats.ran, rep.stats.replayed), (2, 1))
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual(detail["replayed_effect_count"], 1)

    async def test_rerun_replays_new_result(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
            await run.effect("call-0", "t", {"v": 1}, lambda: "one")
            await run.effect("call-0", "t", {"v": 2}, lambda: "two", rerun=True)
        async with self.run_of() as run:
            got = await run.effect("call-0", "t", {"v": 2}, lambda: self.fail("ran again"))
            self.assertEqual((got.output, got.replayed), ("two", True))
            with self.assertRaises(spl.EffectMismatchError):
                await run.effect("call-0", "t", {"v": 1}, lambda: self.fail("ran again"))

    async def test_effect_post_retried_records_once(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
        path = f"/v1/runs/{quote(self.rid)}/effects"
        body = {"thread": self.thread, "actor": ACTOR, "call_id": "call-0", "tool": "append_line", "args": {"n": 0}}
        self.assertEqual((await self.client.request("POST", path, body))["status"], "absent")
        first = await self.client.request("POST", path, {**body, "output": {"line": "x"}})
        self.assertEqual(first["status"], "recorded")
        # The same request again, as after a lost answer: the first result.
        second = await self.client.request("POST", path, {**body, "output": {"line": "y"}})
        self.assertEqual((second["status"], second["output"], second["id"]), ("replayed", {"line": "x"}, first["id"]))
        self.assertEqual((await self.client.request("POST", path, body))["output"], {"line": "x"})
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual([e["call_id"] for e in detail["effects"]], ["call-0"])
        async with self.run_of() as run:
            self.assertEqual(run.effects_recorded, 1)
            got = await run.effect("call-0", "append_line", {"n": 0}, lambda: self.fail("ran again"))
            self.assertEqual((got.output, got.replayed, got.id), ({"line": "x"}, True, first["id"]))

    async def test_cancel_seen_at_effect_and_checkpoint(self):
        calls = []
        async with self.run_of() as run:
            await run.checkpoint("run_started", {}, durable=True)
            await self.client.cancel_run(self.rid, thread=self.thread, reason="stop it")
            # The checkpoint queued before the effect goes with its result
            # in one request, which the server refuses whole: neither is
            # stored (the tool ran: this Run had not seen the cancel).
            await run.checkpoint("pre_tool_batch", {"tool_call_count": 1})
            with self.assertRaises(spl.RunCancelledError) as e:
                await run.effect("call-0", "append_line", {"n": 0}, lambda: calls.append(0) or "x")
            err = e.exception
            self.assertIsInstance(err, spl.ConflictError)
            self.assertEqual((err.status, err.code, err.reason, err.actor), (409, "run_cancelled", "stop it", ACTOR))
            self.assertTrue(err.request)
            self.assertEqual(calls, [0])
            # Seen now: the next call's tool does not run.
            with self.assertRaises(spl.RunCancelledError):
                await run.effect("call-1", "append_line", {"n": 1}, lambda: calls.append(1) or "x")
            self.assertEqual(calls, [0])
            with self.assertRaises(spl.RunCancelledError):
                await run.checkpoint("pre_llm", {})
            rep = await run.finish(state="cancelled")
            self.assertEqual(rep.status, "cancelled")
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual(detail["status"], "cancelled")
        self.assertEqual(detail["effects"], [])
        async with self.run_of() as again:
            self.assertEqual(again.status, "cancelled")
            with self.assertRaises(spl.RunFinishedError):
                await again.finish(state="cancelled")

    async def test_cancel_seen_by_effect_request(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {}, durable=True)
            await self.client.cancel_run(self.rid, thread=self.thread, reason="stop it")
            # Nothing queued: the effect's own request is refused (after its
            # tool ran, by the client protocol), and records nothing.
            with self.assertRaises(spl.RunCancelledError):
                await run.effect("call-0", "append_line", {"n": 0}, lambda: "x")
            with self.assertRaises(spl.RunCancelledError):
                await run.effect("call-1", "append_line", {"n": 1}, lambda: self.fail("ran after the cancel was seen"))
            await run.finish(state="cancelled")
        detail = await self.client.run(self.rid, thread=self.thread)
        self.assertEqual(detail["effects"], [])

    async def test_cancel_seen_by_write_behind(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {}, durable=True)
            other = await self.client.open_run(self.rid, thread=self.thread)  # opened before the cancel
            await self.client.cancel_run(self.rid, thread=self.thread, reason="enough")
            with self.assertRaises(spl.RunCancelledError):  # durable: its own answer
                await other.checkpoint("post_llm", {})
            await other.close()
            await run.checkpoint("pre_llm", {})  # queued: the writer meets the refusal
            with self.assertRaises(spl.RunCancelledError) as e:
                await run.flush()
            self.assertEqual(e.exception.reason, "enough")
            with self.assertRaises(spl.RunCancelledError):
                await run.checkpoint("pre_llm", {})
            # Finishing as anything but cancelled is refused (the server's
            # rule: 400 naming state); as cancelled it is taken.
            with self.assertRaises(spl.InvalidError) as e:
                await run.finish({"final_text": "done"})
            self.assertEqual(e.exception.field, "state")
            rep = await run.finish(state="cancelled")
            self.assertEqual(rep.status, "cancelled")

    async def test_open_cancelled_run(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {}, durable=True)
        await self.client.cancel_run(self.rid, thread=self.thread, reason="before resume")
        async with self.run_of() as run:
            self.assertEqual(run.status, "cancelled")
            self.assertEqual((run.cancel.reason, run.cancel.actor), ("before resume", ACTOR))
            with self.assertRaises(spl.RunCancelledError):
                await run.checkpoint("step_started", {})
            with self.assertRaises(spl.RunCancelledError):
                await run.effect("call-0", "t", {}, lambda: self.fail("ran"))
            rep = await run.finish(state="cancelled")
        self.assertEqual(rep.status, "cancelled")

    async def test_finish_failed_and_closed(self):
        async with self.run_of() as run:
            await run.checkpoint("run_started", {})
            rep = await run.finish(state="failed", payload={"error": "model refused"})
            self.assertEqual(rep.status, "failed")
            with self.assertRaises(spl.RunFinishedError):
                await run.checkpoint("pre_llm", {})
        seen = await self.opened()
        self.assertEqual((seen.status, seen.latest.phase), ("failed", "run_terminal"))
        self.assertEqual(seen.latest.payload["error"], "model refused")

    async def test_thread_required(self):
        with self.assertRaises(spl.InvalidError) as e:
            async with self.client.run(self.rid) as _:
                pass
        self.assertEqual(e.exception.field, "thread")


if __name__ == "__main__":
    unittest.main()
