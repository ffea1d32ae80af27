#!/usr/bin/env python3
"""An agent runner on spl's durable runs, in Python: a port of
examples/runner/main.go over spl serve's HTTP API (the Python SDK), with
the same scripted fake LLM and the same one tool, append_line, whose only
side effect is to append one line to the file named by --effects::

    PYTHONPATH=sdk/python/src python3 examples/runner-py/runner.py --run R --tools N --effects FILE

It talks to the spl serve at $SPL_URL (token $SPL_TOKEN), else to the
local spl, started when none answers, as the SDK's connect() does.

Killed at any moment (SIGKILL) and started again with the same run id, it
resumes from its newest checkpoint: tool calls whose results are recorded
are replayed, not run again, and it finishes with exactly one line per
tool call in FILE and the same result. Started once more after it
finished, it prints the stored result and calls neither the LLM nor any
tool.

Its records are the Go runner's (thread "runner", the same phases and
payload field names): a run this runner started and was killed in can be
finished by the Go runner, and the other way round.

Exactly one line per call across a kill between a tool's side effect and
its record needs the tool itself to be idempotent: spl promises at least
once for the tool and exactly once for the recorded result. So
append_line writes its line keyed by the call id and skips a call id
already in the file; that is the tool's own idempotency, not spl's.

--crash-at NAME:N kills the process with SIGKILL the N-th time it reaches
the point NAME, so that tests kill it at chosen places: any phase
(run_started, step_started, pre_llm, llm, post_llm, pre_tool_batch,
post_tool_batch), tool (inside fn before its side effect), tool_written
(after the side effect, before its record), effect (after the record
landed) and finish (before run_terminal). --llm-log FILE appends a line
per LLM call.

--await-approval makes the run wait, after its last step, for the signal
"approval" (sent with the SDK's client.signal_run(R, "approval",
data=...), or spl run signal R approval --data JSON): the runner records
that it waits, prints {"result": null, "stored": false, "waiting_for":
"approval", …} and exits 0; started again after the signal, it finishes
with the signal's data as the result's "approval" (as the Go runner).

It prints one JSON line: {"result": {"final_text", "messages", "steps",
"tool_calls", and with --await-approval "approval"}, "stored",
"replayed_effects", "ran_effects", "llm_calls_this_process", "coalesced",
"resumed_from", "waiting_for"} (resumed_from only when it resumed from a
snapshot, waiting_for only when it stopped waiting for the signal, as the
Go runner's)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time

try:
    import spl
except ImportError:  # run from a clone without PYTHONPATH: the SDK beside it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src"))
    import spl

ACTOR = "did:sync:agent:runner"

# How many tool calls the scripted LLM asks for at once.
CALLS_PER_STEP = 3


class Crasher:
    """Kills the process with SIGKILL the n-th time it reaches point name."""

    def __init__(self, spec: str):
        self.name, self.n, self.seen = "", 1, {}
        if spec:
            name, _, n = spec.partition(":")
            self.name = name
            try:
                self.n = int(n)
            except ValueError:
                pass

    def at(self, point: str) -> None:
        self.seen[point] = self.seen.get(point, 0) + 1
        if point == self.name and self.seen[point] == self.n:
            print(f"runner: crashing at {point}:{self.n}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)


def scripted_llm(step: int, tools: int) -> dict:
    """The answer to step (1, 2, …) of a run that makes tools tool calls in
    all: CALLS_PER_STEP calls a step, then a final text."""
    first = (step - 1) * CALLS_PER_STEP
    if first >= tools:
        return {"text": f"done: {tools} tool calls", "tool_calls": None, "finish_reason": "stop"}
    calls = [{"id": f"call-{i}", "name": "append_line", "args": f'{{"n":{i}}}'}
             for i in range(first, min(tools, first + CALLS_PER_STEP))]
    return {"text": f"step {step}: calling {len(calls)} tools", "tool_calls": calls, "finish_reason": "tool_calls"}


def append_line_once(path: str, call_id: str, args: str) -> str:
    """Appends "<call_id> <args>" to path unless a line for call_id is there
    already: the tool's own idempotency by call id."""
    line = f"{call_id} {args}"
    try:
        with open(path) as f:
            for have in f:
                have = have.rstrip("\n")
                if have.startswith(call_id + " "):
                    return have
    except FileNotFoundError:
        pass
    append_line(path, line)
    return line


def append_line(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def new_snapshot() -> dict:
    """The runtime snapshot of a new run, in the Go runner's field names."""
    return {"messages": [], "step": 0, "state": "running", "llm_calls": 0, "tool_calls": 0,
            "started_at_s": time.time_ns() // 1_000_000 / 1000,
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}, "total_cost_usd": 0.0,
            "pending_llm_response": None, "requested_model": "scripted-1", "provider_adapter": "fake", "final_text": ""}


def resume_snapshot(payload: dict) -> dict:
    """A stored snapshot's fields over a new one's, as the Go runner decodes
    one into its struct: the fields it knows, absent ones left as they
    were, null ones zero."""
    s = new_snapshot()
    for k in s:
        if k in payload:
            s[k] = payload[k]
    s["messages"] = list(s["messages"] or [])
    s["usage"] = {**{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}, **(s["usage"] or {})}
    for k in ("started_at_s", "total_cost_usd"):
        s[k] = float(s[k] or 0)
    return s


def compact(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


async def run(run_id: str, thread: str, tools: int, effects: str, llm_log: str, approval: bool, cr: Crasher) -> dict:
    client = await spl.connect(actor=ACTOR)
    try:
        async with client.run(run_id, thread=thread) as r:
            return await drive(r, run_id, tools, effects, llm_log, approval, cr)
    finally:
        await client.close()


async def drive(r: spl.Run, run_id: str, tools: int, effects: str, llm_log: str, approval: bool, cr: Crasher) -> dict:
    if r.status == "terminal":
        return {"result": r.terminal_result, "stored": True, "replayed_effects": 0, "ran_effects": 0,
                "llm_calls_this_process": 0, "coalesced": 0}
    out = {"llm_calls_this_process": 0}
    s = new_snapshot()
    if r.snapshot is not None:
        s = resume_snapshot(r.snapshot.payload or {})
        out["resumed_from"] = r.snapshot.phase

    async def cp(phase: str, payload: dict) -> None:
        try:
            await r.checkpoint(phase, payload)
        except spl.RunCancelledError:
            raise
        except spl.SplError as e:
            print(f"runner: checkpoint: {e}", file=sys.stderr)
        cr.at(phase)

    try:
        await cp("run_started", {"agent_name": "example", "resumed": r.resumed})
        # A step_started snapshot is a step begun whose LLM call is not known
        # to have been made: that step is made again, not the next one.
        again = r.snapshot is not None and r.snapshot.phase == "step_started"
        while True:
            if s["pending_llm_response"] is None:
                if not again:
                    s["step"] += 1
                    await cp("step_started", s)
                again = False
                await cp("pre_llm", {"model": s["requested_model"], "provider": s["provider_adapter"],
                                     "message_count": len(s["messages"])})
                resp = scripted_llm(s["step"], tools)
                out["llm_calls_this_process"] += 1
                if llm_log:
                    append_line(llm_log, f"{run_id} step {s['step']}")
                cr.at("llm")
                s["llm_calls"] += 1
                s["usage"]["input_tokens"] += 100
                s["usage"]["output_tokens"] += 20
                s["usage"]["total_tokens"] += 120
                s["total_cost_usd"] += 0.0012
                s["pending_llm_response"] = resp
                s["messages"].append({"role": "assistant", "content": resp["text"]})
                await cp("post_llm", s)
            resp = s["pending_llm_response"]
            calls = resp.get("tool_calls") or []
            if not calls:
                s["final_text"] = resp.get("text", "")
                break
            await cp("pre_tool_batch", {"tool_call_count": len(calls)})
            for tc in calls:
                def tool(tc=tc) -> dict:
                    cr.at("tool")
                    line = append_line_once(effects, tc["id"], tc["args"])
                    cr.at("tool_written")
                    return {"line": line}
                er = await r.effect(tc["id"], tc["name"], json.loads(tc["args"]), tool)
                cr.at("effect")
                s["tool_calls"] += 1
                s["messages"].append({"role": "tool", "content": compact(er.output), "call_id": tc["id"]})
            s["pending_llm_response"] = None
            await cp("post_tool_batch", {"tool_calls_total": s["tool_calls"], "tool_failures": 0})
        result = {"final_text": s["final_text"], "tool_calls": s["tool_calls"], "steps": s["step"], "messages": len(s["messages"])}
        if approval:
            try:
                sig = await r.await_signal("approval", {"question": f"finish run {run_id}?"})
            except spl.StillWaitingError:
                # Recorded as waiting: this process ends; started again after
                # the signal, the run finishes.
                await r.flush()
                st = r.stats
                out.update(result=None, stored=False, waiting_for="approval", replayed_effects=st.replayed,
                           ran_effects=st.ran, coalesced=st.coalesced)
                return out
            result["approval"] = sig.data
    except spl.RunCancelledError as e:
        # Someone cancelled the run: stop, and finish it as cancelled.
        try:
            await r.finish(state="cancelled")
        except spl.SplError as fe:
            e.add_note(f"finish: {fe}")
        raise
    cr.at("finish")
    rep = await r.finish(result, payload={"final_text": s["final_text"], "requested_model": s["requested_model"],
                                          "normalized_model": s["requested_model"], "provider_adapter": s["provider_adapter"]})
    out.update(result=result, stored=False, replayed_effects=rep.stats.replayed, ran_effects=rep.stats.ran,
               coalesced=rep.stats.coalesced)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description="An agent runner on spl's durable runs (a scripted LLM, one tool).",
                                allow_abbrev=False)
    # The Go runner's flags, spelled either way Go's flag package takes them.
    p.add_argument("--run", "-run", default="", help="run id")
    p.add_argument("--thread", "-thread", default="runner", help="thread of the run")
    p.add_argument("--tools", "-tools", type=int, default=5, help="tool calls the scripted LLM asks for in all")
    p.add_argument("--effects", "-effects", default="", help="file the tool appends its lines to")
    p.add_argument("--crash-at", "-crash-at", dest="crash_at", default="",
                   help="SIGKILL this process the N-th time it reaches point NAME (NAME:N)")
    p.add_argument("--llm-log", "-llm-log", dest="llm_log", default="", help="file to append a line to per LLM call")
    p.add_argument("--await-approval", "-await-approval", dest="await_approval", action="store_true",
                   help='wait for the signal "approval" before finishing')
    a = p.parse_args()
    if not a.run or not a.effects:
        print("runner: --run and --effects are required", file=sys.stderr)
        return 2
    try:
        out = asyncio.run(run(a.run, a.thread, a.tools, a.effects, a.llm_log, a.await_approval, Crasher(a.crash_at)))
    except Exception as e:
        print(f"runner: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
