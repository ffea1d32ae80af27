"""examples/runner-py end to end against the spl serve at SPL_URL: killed
with SIGKILL at chosen points (--crash-at) and started again, it ends with
one line per tool call, no LLM call whose answer was recorded made again,
and the result of a run never killed; started once more, it prints the
stored result and runs nothing (as e2e/runs_test.go checks the Go runner).
With --await-approval it waits for the signal "approval" across
processes."""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import uuid

import spl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
RUNNER = os.path.join(ROOT, "examples", "runner-py", "runner.py")
TOOLS = 7
# What the scripted LLM makes of 7 tool calls: 3 a step, then the final text.
WANT = {"final_text": "done: 7 tool calls", "messages": 11, "steps": 4, "tool_calls": 7}


@unittest.skipUnless(os.environ.get("SPL_URL"), "set SPL_URL to an spl serve")
class RunnerExampleTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.eff, self.llm = os.path.join(self.dir, "eff"), os.path.join(self.dir, "llm")
        self.args = ["--run", f"R_{uuid.uuid4().hex[:8]}", "--thread", "runner", "--tools", str(TOOLS),
                     "--effects", self.eff, "--llm-log", self.llm]

    def runner(self, *extra):
        """Runs the example; its output, or None when it died of SIGKILL."""
        env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "sdk", "python", "src")}
        p = subprocess.run([sys.executable, RUNNER, *self.args, *extra], env=env, capture_output=True, text=True, timeout=120)
        if p.returncode == -signal.SIGKILL:
            self.assertIn("runner: crashing at", p.stderr)
            return None
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 1, p.stdout)
        return json.loads(lines[0])

    def read(self, path):
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def check(self, points):
        for p in points:
            self.assertIsNone(self.runner("--crash-at", p), f"not killed at {p}")
        got = self.runner()
        self.assertEqual(got["result"], WANT)
        self.assertFalse(got["stored"])
        lines = sorted(self.read(self.eff).split("\n")[:-1])
        self.assertEqual(lines, sorted(f'call-{i} {{"n":{i}}}' for i in range(TOOLS)), "one line per tool call")
        # No LLM call whose answer was recorded is made again: only a kill
        # between an answer and its checkpoint (point llm) may repeat one.
        llm = self.read(self.llm).split("\n")[:-1]
        again = sum(p.startswith("llm:") for p in points)
        self.assertLessEqual(len(llm) - len(set(llm)), again, llm)
        self.assertEqual(len(set(llm)), WANT["steps"])
        eff, llm_before = self.read(self.eff), self.read(self.llm)
        stored = self.runner()
        self.assertEqual(stored, {"result": WANT, "stored": True, "replayed_effects": 0, "ran_effects": 0,
                                  "llm_calls_this_process": 0, "coalesced": 0})
        self.assertEqual((self.read(self.eff), self.read(self.llm)), (eff, llm_before), "a finished run ran something")
        return got

    def test_never_killed(self):
        got = self.check([])
        self.assertEqual((got["ran_effects"], got["replayed_effects"], got["llm_calls_this_process"]), (TOOLS, 0, WANT["steps"]))
        self.assertNotIn("resumed_from", got)

    def test_killed_and_resumed(self):
        # Between a tool's side effect and its record, after a durable
        # post_llm, after a record: killed again while resuming.
        got = self.check(["tool_written:2", "post_llm:1", "effect:2"])
        self.assertEqual(got["resumed_from"], "post_llm")

    def test_killed_after_the_llm_answered(self):
        self.check(["llm:2", "step_started:1"])

    def signal(self, data):
        async def send():
            client = await spl.connect(actor="did:sync:user:ana")
            try:
                return await client.signal_run(self.args[1], "approval", data=data, thread="runner")
            finally:
                await client.close()
        return asyncio.run(send())

    def checkpoint(self, phase, payload):
        async def write():
            client = await spl.connect(actor="did:sync:agent:runner")
            try:
                async with client.run(self.args[1], thread="runner") as run:
                    await run.checkpoint(phase, payload, durable=True)
            finally:
                await client.close()
        asyncio.run(write())

    def test_await_approval(self):
        waiting = self.runner("--await-approval")
        self.assertEqual(sorted(waiting), ["coalesced", "llm_calls_this_process", "ran_effects", "replayed_effects",
                                           "result", "stored", "waiting_for"])
        self.assertEqual({k: waiting[k] for k in ("result", "stored", "waiting_for", "replayed_effects", "ran_effects",
                                                  "llm_calls_this_process")},
                         {"result": None, "stored": False, "waiting_for": "approval", "replayed_effects": 0,
                          "ran_effects": TOOLS, "llm_calls_this_process": WANT["steps"]})
        eff, llm = self.read(self.eff), self.read(self.llm)
        self.assertEqual(len(eff.split("\n")[:-1]), TOOLS)
        # Started again before the signal: still waiting, nothing run again.
        again = self.runner("--await-approval")
        self.assertEqual((again["result"], again["waiting_for"], again["ran_effects"], again["llm_calls_this_process"],
                          again["resumed_from"]), (None, "approval", 0, 0, "post_llm"))
        self.assertEqual((self.read(self.eff), self.read(self.llm)), (eff, llm))

        sent = self.signal({"approved": True})
        self.assertEqual(sent["name"], "approval")
        # Killed after the signal came, before the run finished, and a
        # checkpoint written since (as a start's run_started): the newest
        # checkpoint waits for nothing, and the approval is not lost (a
        # signal name is one wait).
        self.assertIsNone(self.runner("--await-approval", "--crash-at", "finish"))
        self.checkpoint("run_started", {"agent_name": "example", "resumed": True})
        done = self.runner("--await-approval")
        self.assertEqual(done["result"], {**WANT, "approval": {"approved": True}})
        self.assertEqual((done["stored"], done["ran_effects"], done["llm_calls_this_process"]), (False, 0, 0))
        self.assertNotIn("waiting_for", done)
        stored = self.runner("--await-approval")
        self.assertEqual(stored, {"result": {**WANT, "approval": {"approved": True}}, "stored": True, "replayed_effects": 0,
                                  "ran_effects": 0, "llm_calls_this_process": 0, "coalesced": 0})
        self.assertEqual((self.read(self.eff), self.read(self.llm)), (eff, llm), "a finished run ran something")
        with self.assertRaises(spl.RunFinishedError):
            self.signal({"approved": False})


if __name__ == "__main__":
    unittest.main()
