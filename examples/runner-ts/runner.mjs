#!/usr/bin/env node
// runner.mjs is an agent runner on spl's durable runs through spl serve's
// HTTP API and the TypeScript SDK: a port of examples/runner/main.go, with
// the same scripted fake LLM and tool, flags, crash points, records and
// output, so that a run this runner started and that was killed can be
// finished by the Go runner, and the other way round.
//
//	(cd sdk/typescript && npm ci && npm run build)
//	SPL_URL=http://127.0.0.1:PORT SPL_TOKEN=… node examples/runner-ts/runner.mjs --run R --tools N --effects FILE
//
// With neither SPL_URL nor SPL_TOKEN set it uses the local spl, as the
// SDK's connect() does.
//
// Killed at any moment (SIGKILL) and started again with the same run id,
// it resumes from its newest checkpoint: tool calls whose results are
// recorded are replayed, not run again, and it finishes with exactly one
// line per tool call in FILE and the same result. Started once more after
// it finished, it prints the stored result and calls neither the LLM nor
// any tool.
//
// Exactly one line per call across a kill between a tool's side effect
// and its record needs the tool itself to be idempotent: spl promises at
// least once for the tool and exactly once for the recorded result. So
// append_line writes its line keyed by the call id and skips a call id
// already in the file; that is the tool's own idempotency, not spl's.
//
// --crash-at NAME:N kills the process with SIGKILL the N-th time it
// reaches the point NAME, so that tests kill it at chosen places: any
// phase (run_started, step_started, pre_llm, llm, post_llm,
// pre_tool_batch, post_tool_batch), tool (inside fn before its side
// effect), tool_written (after the side effect, before its record),
// effect (after the record landed) and finish (before run_terminal).
// --llm-log FILE appends a line per LLM call.
//
// --await-approval makes the run wait, after its last step, for the
// signal "approval" (spl run signal RUN approval --data JSON, or
// Client.signalRun): the runner records that it waits, prints
// {"waiting_for": "approval", …} and exits 0; started again after the
// signal, it finishes with the signal's data as the result's "approval".
import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { connect, StillWaitingError } from "../../sdk/typescript/dist/index.js";

// callsPerStep is how many tool calls the scripted LLM asks for at once.
const callsPerStep = 3;

class Crasher {
  constructor(name = "", n = 0) {
    this.name = name;
    this.n = n;
    this.seen = new Map();
  }

  at(point) {
    const k = (this.seen.get(point) ?? 0) + 1;
    this.seen.set(point, k);
    if (point === this.name && k === this.n) {
      writeSync(2, `runner: crashing at ${point}:${this.n}\n`);
      process.kill(process.pid, "SIGKILL");
      // Nothing else runs until the signal lands.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
    }
  }
}

// The boolean flags, and the values Go's strconv.ParseBool takes.
const boolFlags = new Set(["await-approval"]);
const bools = { 1: true, t: true, T: true, TRUE: true, true: true, True: true, 0: false, f: false, F: false, FALSE: false, false: false, False: false };

/**
 * parseFlags reads flags as Go's flag package does: -name value, --name
 * value, --name=value; a boolean one is -name or -name=value.
 */
function parseFlags(argv) {
  const defs = { run: "", thread: "runner", tools: "5", effects: "", "crash-at": "", "llm-log": "", "await-approval": false };
  const f = { ...defs };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    const m = /^--?([^=]+)(?:=(.*))?$/.exec(a);
    if (!m || !Object.hasOwn(defs, m[1])) usage(`flag provided but not defined: ${a}`);
    let v = m[2];
    if (boolFlags.has(m[1])) {
      if (v !== undefined && !Object.hasOwn(bools, v)) usage(`invalid boolean value ${JSON.stringify(v)} for -${m[1]}`);
      f[m[1]] = v === undefined ? true : bools[v];
      continue;
    }
    if (v === undefined) {
      if (i + 1 >= argv.length) usage(`flag needs an argument: ${a}`);
      v = argv[++i];
    }
    f[m[1]] = v;
  }
  const tools = Number(f.tools);
  if (!Number.isInteger(tools)) usage(`invalid value ${JSON.stringify(f.tools)} for flag -tools`);
  return { runID: f.run, thread: f.thread, tools, effects: f.effects, crashAt: f["crash-at"], llmLog: f["llm-log"], approval: f["await-approval"] };
}

function usage(msg) {
  process.stderr.write(`runner: ${msg}\nusage: runner.mjs --run R [--thread runner] [--tools 5] --effects FILE [--crash-at NAME:N] [--llm-log FILE] [--await-approval]\n`);
  process.exit(2);
}

async function main() {
  const o = parseFlags(process.argv.slice(2));
  if (o.runID === "" || o.effects === "") {
    process.stderr.write("runner: --run and --effects are required\n");
    process.exit(2);
  }
  let cr = new Crasher();
  if (o.crashAt !== "") {
    // As Go's strings.Cut and strconv.Atoi: N is 1 unless it is a number.
    const i = o.crashAt.indexOf(":");
    const name = i < 0 ? o.crashAt : o.crashAt.slice(0, i);
    const n = i < 0 ? "" : o.crashAt.slice(i + 1);
    cr = new Crasher(name, /^[+-]?\d+$/.test(n) ? Number(n) : 1);
  }
  try {
    await run(o, cr);
  } catch (e) {
    process.stderr.write(`runner: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  }
}

async function run({ runID, thread, tools, effects, llmLog, approval }, cr) {
  const c = await connect({ actor: "did:sync:agent:runner" });
  try {
    const r = await c.openRun(runID, { thread });
    if (r.status === "terminal") {
      print({ result: r.terminalResult, stored: true, replayed_effects: 0, ran_effects: 0, llm_calls_this_process: 0, coalesced: 0 });
      return;
    }
    const out = { llmCalls: 0, resumedFrom: "" };
    // The runtime snapshot, in the runner's field names (the Go runner's).
    let s = {
      messages: [], step: 0, state: "running", llm_calls: 0, tool_calls: 0,
      started_at_s: Date.now() / 1000,
      usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 },
      total_cost_usd: 0, pending_llm_response: null,
      requested_model: "scripted-1", provider_adapter: "fake", final_text: "",
    };
    if (r.snapshot) {
      s = decodeSnapshot(s, r.snapshot.payload ?? {});
      out.resumedFrom = r.snapshot.phase;
    }
    const cp = async (phase, payload) => {
      try {
        await r.checkpoint(phase, payload);
      } catch (e) {
        process.stderr.write(`runner: checkpoint: ${e instanceof Error ? e.message : String(e)}\n`);
      }
      cr.at(phase);
    };
    await cp("run_started", { agent_name: "example", resumed: r.resumed });
    // A step_started snapshot is a step begun whose LLM call is not known
    // to have been made: that step is made again, not the next one.
    let again = r.snapshot?.phase === "step_started";
    for (;;) {
      if (s.pending_llm_response === null) {
        if (!again) {
          s.step++;
          await cp("step_started", s);
        }
        again = false;
        await cp("pre_llm", { model: s.requested_model, provider: s.provider_adapter, message_count: s.messages.length });
        const resp = scriptedLLM(s.step, tools);
        out.llmCalls++;
        if (llmLog !== "") appendLine(llmLog, `${runID} step ${s.step}`);
        cr.at("llm");
        s.llm_calls++;
        s.usage.input_tokens += 100;
        s.usage.output_tokens += 20;
        s.usage.total_tokens += 120;
        s.total_cost_usd += 0.0012;
        s.pending_llm_response = resp;
        s.messages.push({ role: "assistant", content: resp.text });
        await cp("post_llm", s);
      }
      const resp = s.pending_llm_response;
      const calls = resp.tool_calls ?? [];
      if (calls.length === 0) {
        s.final_text = resp.text;
        break;
      }
      await cp("pre_tool_batch", { tool_call_count: calls.length });
      for (const tc of calls) {
        const er = await r.effect(tc.id, tc.name, JSON.parse(tc.args), () => {
          cr.at("tool");
          const line = appendLineOnce(effects, tc.id, tc.args);
          cr.at("tool_written");
          return { line };
        });
        cr.at("effect");
        s.tool_calls++;
        s.messages.push({ role: "tool", content: JSON.stringify(er.output), call_id: tc.id });
      }
      s.pending_llm_response = null;
      await cp("post_tool_batch", { tool_calls_total: s.tool_calls, tool_failures: 0 });
    }
    const result = { final_text: s.final_text, tool_calls: s.tool_calls, steps: s.step, messages: s.messages.length };
    if (approval) {
      let sig;
      try {
        sig = await r.awaitSignal("approval", { question: `finish run ${runID}?` });
      } catch (e) {
        if (!(e instanceof StillWaitingError)) throw e;
        // The run waits for its approval; this process ends.
        await r.close();
        const st = r.stats();
        const line = { result: null, stored: false, replayed_effects: st.replayed, ran_effects: st.ran, llm_calls_this_process: out.llmCalls, coalesced: st.coalesced };
        if (out.resumedFrom !== "") line.resumed_from = out.resumedFrom;
        line.waiting_for = "approval";
        print(line);
        return;
      }
      result.approval = sig.data;
    }
    cr.at("finish");
    const rep = await r.finish(result, {
      payload: { final_text: s.final_text, requested_model: s.requested_model, normalized_model: s.requested_model, provider_adapter: s.provider_adapter },
    });
    const line = { result, stored: false, replayed_effects: rep.replayed, ran_effects: rep.ran, llm_calls_this_process: out.llmCalls, coalesced: rep.coalesced };
    if (out.resumedFrom !== "") line.resumed_from = out.resumedFrom;
    print(line);
  } finally {
    await c.close();
  }
}

/**
 * decodeSnapshot lays a stored snapshot over the defaults, as the Go
 * runner's decode into its struct does: fields absent keep their default,
 * a null list is an empty one.
 */
function decodeSnapshot(defaults, p) {
  const s = { ...defaults };
  for (const k of Object.keys(defaults)) if (k in p) s[k] = p[k];
  s.messages = (s.messages ?? []).map((m) => (m.call_id ? { role: m.role, content: m.content, call_id: m.call_id } : { role: m.role, content: m.content }));
  s.usage = { input_tokens: 0, output_tokens: 0, total_tokens: 0, ...(s.usage ?? {}) };
  if (s.pending_llm_response) s.pending_llm_response = { ...s.pending_llm_response, tool_calls: s.pending_llm_response.tool_calls ?? null };
  else s.pending_llm_response = null;
  return s;
}

/** print writes the output line: the result's keys sorted, as the Go runner's (a map) are. */
function print(line) {
  process.stdout.write(JSON.stringify({ ...line, result: sorted(line.result) }) + "\n");
}

function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
  return v;
}

// scriptedLLM answers step (1, 2, …) of a run that makes tools tool calls
// in all: callsPerStep calls a step, then a final text.
function scriptedLLM(step, tools) {
  const first = (step - 1) * callsPerStep;
  if (first >= tools) return { text: `done: ${tools} tool calls`, tool_calls: null, finish_reason: "stop" };
  const calls = [];
  for (let i = first; i < tools && i < first + callsPerStep; i++) {
    calls.push({ id: `call-${i}`, name: "append_line", args: `{"n":${i}}` });
  }
  return { text: `step ${step}: calling ${calls.length} tools`, tool_calls: calls, finish_reason: "tool_calls" };
}

// appendLineOnce appends "<callID> <args>" to path unless a line for
// callID is there already: the tool's own idempotency by call id.
function appendLineOnce(path, callID, args) {
  let data = "";
  try {
    data = readFileSync(path, "utf8");
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
  }
  for (const l of data.split("\n")) if (l.startsWith(callID + " ")) return l;
  const line = `${callID} ${args}`;
  appendLine(path, line);
  return line;
}

// appendLine appends line to path and syncs it to disk.
function appendLine(path, line) {
  const fd = openSync(path, "a", 0o644);
  try {
    writeSync(fd, line + "\n");
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

await main();
