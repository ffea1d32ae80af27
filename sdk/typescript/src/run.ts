// Durable agent runs over spl serve (POST /v1/runs/{run}/…): the promises
// of the Go SDK's Run (sdk/run.go, sdk/run_write.go), kept by a client
// that holds no rule of spl. The server checks phases and payloads,
// hashes tool inputs, decides replay and refuses writes to a cancelled or
// finished run; this side queues, batches, coalesces and maps answers.
//
// A run is a sequence of phase checkpoints and tool effects, written by an
// agent runner so that a run killed at any moment resumes where it was:
// effects already recorded are replayed instead of run again, and a run
// that finished returns its stored result without running anything.
//
// A run that needs a person (an approval, hours or days away) awaits a
// named signal (awaitSignal): it records a checkpoint of phase
// awaiting_signal and may end its process, its status "waiting"; someone
// sends the signal (Client.signalRun, spl run signal), and the run opened
// after that continues with its data (Run.signal).
import {
  InvalidError,
  RunCancelledError,
  RunFinishedError,
  SplError,
  StillWaitingError,
  UnavailableError,
  UnlandedError,
  type RunCancel,
  type UnlandedCheckpoint,
} from "./errors.js";

/**
 * Where a run stands. "waiting": its newest checkpoint awaits a signal
 * not sent yet (awaitSignal; waitingFor names it).
 */
export type RunStatus = "running" | "waiting" | "terminal" | "failed" | "cancelled";

/** A signal sent to a run (Client.signalRun), as /open answers it. */
export interface RunSignal {
  name: string;
  /** What the sender gave, any JSON; null for nothing. */
  data: any;
  /** Who sent it (a DID). */
  actor: string;
  /** The id of the agent.run.signal record. */
  request: string;
  clock: number;
}

/** A stored checkpoint of a run, as /open answers it. */
export interface RunCheckpoint {
  phase: string;
  /** agent.run.snapshot (phases step_started, post_llm) or agent.run.checkpoint. */
  kind: string;
  id: string;
  clock: number;
  /** timestamp_ms, RFC 3339. */
  time: string;
  payload: Record<string, any> | null;
  [extra: string]: unknown;
}

/** A tool effect recorded for a run: the newest per call id. */
export interface RecordedEffect {
  call_id: string;
  tool: string;
  input_hash: string;
  clock: number;
  [extra: string]: unknown;
}

/** The answer of POST /v1/runs/{run}/open. */
export interface OpenAnswer {
  run_id: string;
  thread: string;
  status: RunStatus;
  resumed: boolean;
  latest: RunCheckpoint | null;
  snapshot: RunCheckpoint | null;
  terminal_result: unknown;
  pending_llm_response: Record<string, any> | null;
  effects: RecordedEffect[] | null;
  cancel: RunCancel | null;
  /** Status "waiting": the signal the run waits for (absent otherwise). */
  waiting_for?: string;
  /** The signal the newest checkpoint (awaiting_signal) waited for, when it came; else null. */
  signal?: RunSignal | null;
  /** Every signal sent to the run, in clock order. */
  signals?: RunSignal[];
}

/** Options of Client.openRun. */
export interface OpenRunOptions {
  /** The thread of the run (required). */
  thread: string;
  /** Actor (a DID) of the run's records; default the client's, else the server's. */
  actor?: string;
  /** How long flush, finish and close wait for queued writes; default 5000. */
  flushTimeoutMs?: number;
}

/** Options of one checkpoint. */
export interface CheckpointOptions {
  /**
   * true: resolve only once stored, after everything queued before it,
   * with its own error (a post_llm checkpoint is durable unless false).
   * false: write-behind, post_llm's too.
   */
  durable?: boolean;
}

/** Options of one effect. */
export interface EffectOptions {
  /** Run the tool again when its input differs from the recorded one, instead of an EffectMismatchError. */
  rerun?: boolean;
}

/** Options of Run.awaitSignal. */
export interface AwaitSignalOptions {
  /**
   * How long to wait for the signal, in ms, polling about once a second;
   * 0 (the default): do not wait. Then awaitSignal rejects with a
   * StillWaitingError: the run stays waiting, the process may end.
   */
  timeoutMs?: number;
}

/** A stored record: its id and clock. */
export interface Receipt {
  id: string;
  clock: number;
}

/** What effect resolves to. */
export interface EffectResult<T = any> extends Receipt {
  /** The output as stored (the thread's redaction applied), or as recorded before. */
  output: T;
  /** From the record: fn did not run, or ran and lost the race to record. */
  replayed: boolean;
}

/** The end finish writes: the run_terminal checkpoint. */
export interface FinishOptions {
  /** "completed" (the server's default), "failed", "error" or "cancelled". */
  state?: "completed" | "failed" | "error" | "cancelled" | (string & {});
  /** More fields of the checkpoint: final_text, requested_model, … */
  payload?: Record<string, unknown>;
}

/** What a Run wrote. */
export interface RunStats {
  /** Records landed: checkpoints, effects recorded, the terminal one. */
  written: number;
  /** Runtime snapshots superseded by a newer queued one before they were written. */
  coalesced: number;
  /** Effects run and recorded by this Run. */
  ran: number;
  /** Effects replayed from their records by this Run. */
  replayed: number;
  /** Writes queued and not yet settled. */
  pending: number;
}

/** What finish wrote, and the run's stats then. */
export interface FinishReport extends RunStats, Receipt {
  status: RunStatus;
}

/** How a Run sends a request: POST /v1/runs/{run}/<route> with a JSON body. */
export type RunSend = <T>(route: string, json: string) => Promise<T>;

/** The phases whose checkpoints are runtime snapshots (coalesced). */
const SNAPSHOT_PHASES = new Set(["step_started", "post_llm"]);

/** Bounds of one batch of checkpoints: the server's 256, and half its default body limit. */
const MAX_BATCH = 256;
const MAX_BATCH_BYTES = 1 << 20;

/** The phase of a checkpoint that awaits a signal; its payload's "signal" names it. */
const PHASE_AWAITING_SIGNAL = "awaiting_signal";

/** How often awaitSignal asks the server whether its signal came. */
const SIGNAL_POLL_MS = 1000;

/** How many times a request answered 503 is sent again (after 100, 200, 400, 800 ms). */
const RETRIES_503 = 4;

/** A write queued on the run. */
interface Item {
  seq: number;
  route: "checkpoints" | "effects" | "finish";
  phase: string;
  /** A checkpoint's element of the batch, or the body of an effect or finish. */
  json: string;
  bytes: number;
  snapshot: boolean;
  /** The caller waits for it, and gets its error. */
  durable: boolean;
  resolve?: (v: any) => void;
  reject?: (e: unknown) => void;
  settled: boolean;
  onSettle?: (() => void)[];
}

interface EffectAnswer {
  status: "replayed" | "absent" | "recorded";
  output?: unknown;
  id?: string;
  clock?: number;
}

/**
 * Run is an open run (Client.openRun). Write its checkpoints
 * (checkpoint: write-behind, but post_llm), its tool effects (effect:
 * durable, replayed once recorded) and its end (finish). One run id is
 * to be written by one Run at a time.
 *
 * Write-behind checkpoints go to the server from one background writer,
 * in call order, in batches; a failure is never lost: the next flush,
 * finish or close reports it (UnlandedError). The writer never rejects
 * a promise nobody holds.
 */
export class Run {
  readonly id: string;
  readonly thread: string;
  readonly actor?: string;
  /** Where the run stood when opened. */
  readonly status: RunStatus;
  /** The run had checkpoints. */
  readonly resumed: boolean;
  /** The newest checkpoint (null for a new run). */
  readonly latest: RunCheckpoint | null;
  /** The newest runtime snapshot (step_started, post_llm), payload fetched; null when none. */
  readonly snapshot: RunCheckpoint | null;
  /** The stored result of a finished run (status "terminal"): return it, run nothing. */
  readonly terminalResult: unknown;
  /** The snapshot's LLM response whose tool calls have not all run: run them, skip the LLM call. */
  readonly pendingLlmResponse: Record<string, any> | null;
  /** The effects recorded when opened, newest per call id. */
  readonly effects: RecordedEffect[];
  /** The cancel request, when the run was cancelled before it was opened. */
  readonly cancel: RunCancel | null;
  /** Status "waiting": the name of the signal the run waits for; else null. */
  readonly waitingFor: string | null;
  /**
   * The signal the run waited for (its newest checkpoint awaiting_signal),
   * sent since: continue with its data (awaitSignal of its name resolves
   * with it at once). null when none came or the run awaited none.
   */
  readonly signal: RunSignal | null;
  /**
   * Every signal sent to the run, in clock order. A signal name is one
   * wait of a run: awaitSignal of a name one of these bears resolves with
   * it at once.
   */
  readonly signals: RunSignal[];
  readonly flushTimeoutMs: number;

  private readonly send: RunSend;
  private readonly actorJSON: string; // `"actor":"…",` or ""
  private readonly recorded = new Set<string>();
  private queue: Item[] = [];
  private readonly unsettled = new Set<Item>();
  private writing = false;
  private failures: UnlandedCheckpoint[] = [];
  private state: "open" | "finishing" | "finished" = "open";
  private seq = 0;
  /** Checkpoints this Run queued (then the run is no longer waiting as opened). */
  private nCheckpointsQueued = 0;
  private whyFinished = "";
  private cancelSeen?: RunCancelledError;
  private nWritten = 0;
  private nCoalesced = 0;
  private nRan = 0;
  private nReplayed = 0;

  /** @internal Made by Client.openRun. */
  constructor(runId: string, opts: OpenRunOptions, actor: string | undefined, a: OpenAnswer, send: RunSend) {
    this.id = runId;
    this.thread = opts.thread;
    this.actor = actor;
    this.flushTimeoutMs = opts.flushTimeoutMs ?? 5000;
    this.send = send;
    this.actorJSON = actor !== undefined ? `"actor":${JSON.stringify(actor)},` : "";
    this.status = a.status;
    this.resumed = a.resumed;
    this.latest = a.latest ?? null;
    this.snapshot = a.snapshot ?? null;
    this.terminalResult = a.terminal_result ?? null;
    this.pendingLlmResponse = a.pending_llm_response ?? null;
    this.effects = a.effects ?? [];
    this.cancel = a.cancel ?? null;
    this.waitingFor = a.status === "waiting" && typeof a.waiting_for === "string" ? a.waiting_for : null;
    this.signal = a.signal ?? null;
    this.signals = a.signals ?? [];
    for (const e of this.effects) this.recorded.add(e.call_id);
    if (a.status === "terminal" || a.status === "failed" || a.latest?.phase === "run_terminal") {
      // Nothing more is written to a finished run.
      this.state = "finished";
      this.whyFinished = `it is ${a.status}`;
    }
    if (this.cancel) this.cancelSeen = this.cancelledBy(this.cancel);
  }

  private cancelledBy(c: RunCancel): RunCancelledError {
    return new RunCancelledError(`run ${JSON.stringify(this.id)} cancelled by ${c.actor}: ${c.reason}`, c);
  }

  /** The call ids with a recorded result: from /open, and recorded by this Run since. */
  get recordedCallIds(): string[] {
    return [...this.recorded];
  }

  /** What the run wrote so far. */
  stats(): RunStats {
    return { written: this.nWritten, coalesced: this.nCoalesced, ran: this.nRan, replayed: this.nReplayed, pending: this.unsettled.size };
  }

  /** refused is why the run takes no write now (finished, closed, cancelled), or undefined. */
  private refused(): SplError | undefined {
    if (this.state !== "open") {
      return new RunFinishedError(`spl: run ${JSON.stringify(this.id)}: ${this.whyFinished || "finishing"}`);
    }
    return this.cancelSeen;
  }

  /**
   * checkpoint queues a phase checkpoint and resolves at once
   * (write-behind): the run's writer sends it in the background, in call
   * order, batched with the others queued. payload (a JSON object; {}
   * when absent) is serialised at the call, so it may be changed after.
   * A runtime snapshot (phases step_started, post_llm) still queued when
   * a newer one is queued is not written (coalesced, counted in stats):
   * the newest one is what a resume needs.
   *
   * Durable where money is spent: a post_llm checkpoint (the one that
   * carries pending_llm_response, the answer of a paid call) and one
   * given durable: true resolve only once stored, after everything queued
   * before them, or reject with their own error; they are never
   * coalesced. durable: false makes post_llm write-behind.
   *
   * Rejects at once with a RunCancelledError once the run is known to be
   * cancelled, a RunFinishedError after finish or close. The phase and
   * payload are checked by the server: a bad one fails alone, with an
   * InvalidError naming the field, at the next flush (or here, durable).
   */
  checkpoint(phase: string, payload?: object, opts: CheckpointOptions = {}): Promise<void> {
    const no = this.refused();
    if (no) return Promise.reject(no);
    let p: string | undefined;
    try {
      p = JSON.stringify(payload ?? {});
    } catch (e) {
      return Promise.reject(e);
    }
    if (p === undefined) return Promise.reject(new TypeError(`spl: checkpoint ${phase}: the payload is not JSON`));
    const json = `{"phase":${JSON.stringify(phase)},"payload":${p},"timestamp_ms":${Date.now()}}`;
    const durable = opts.durable ?? phase === "post_llm";
    const snapshot = SNAPSHOT_PHASES.has(phase);
    if (!durable) {
      this.enqueue({ route: "checkpoints", phase, json, snapshot, durable });
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.enqueue({ route: "checkpoints", phase, json, snapshot, durable, resolve: () => resolve(), reject });
    });
  }

  /**
   * effect runs the tool call callId once. When the run has a result
   * recorded for callId with the same input (the server hashes tool and
   * args), it resolves to that result, replayed, and fn does not run;
   * else it runs fn (sync or async; its result must be JSON, undefined is
   * recorded as null), records its output durably (after everything
   * queued before it) and resolves to the output as stored. A result
   * recorded with another input is an EffectMismatchError, unless
   * rerun: true. An error from fn is fn's: nothing is recorded, the call
   * runs again on the next attempt. A tool whose side effect happened but
   * whose record did not land (a kill in between) runs again on resume:
   * a tool with side effects must be idempotent by call id.
   */
  async effect<T = any>(callId: string, tool: string, args: unknown, fn: () => T | Promise<T>, opts: EffectOptions = {}): Promise<EffectResult<T>> {
    const no = this.refused();
    if (no) throw no;
    const rerun = opts.rerun ? true : undefined;
    const base = { thread: this.thread, actor: this.actor, call_id: callId, tool, args: args === undefined ? null : args, rerun };
    if (this.recorded.has(callId)) {
      const a = await this.post<EffectAnswer>("effects", JSON.stringify(base));
      if (a.status === "replayed") {
        this.nReplayed++;
        return { output: a.output as T, replayed: true, id: a.id!, clock: a.clock! };
      }
      if (a.status !== "absent") throw new SplError(500, `spl: run ${JSON.stringify(this.id)}: effect ${callId}: the server answered status ${JSON.stringify(a.status)}`);
    }
    let out: unknown = await fn();
    if (out === undefined) out = null;
    const json = JSON.stringify({ ...base, output: out });
    const no2 = this.refused();
    if (no2) throw no2;
    const a = await new Promise<EffectAnswer>((resolve, reject) => {
      this.enqueue({ route: "effects", phase: `effect ${callId}`, json, snapshot: false, durable: true, resolve, reject });
    });
    if (a.status !== "recorded" && a.status !== "replayed") {
      throw new SplError(500, `spl: run ${JSON.stringify(this.id)}: effect ${callId}: the server answered status ${JSON.stringify(a.status)} to an output`);
    }
    this.recorded.add(callId);
    if (a.status === "recorded") this.nRan++;
    else this.nReplayed++; // another writer recorded it first: its result holds
    return { output: a.output as T, replayed: a.status === "replayed", id: a.id!, clock: a.clock! };
  }

  /**
   * awaitSignal makes the run wait for the signal name (sent by
   * Client.signalRun, spl run signal, the MCP tool signal_run), as the Go
   * SDK's Run.AwaitSignal does:
   *
   * - a signal name is one wait of a run (wait twice: use two names):
   *   when the open found a signal of that name sent (Run.signal, or one
   *   of Run.signals), it resolves with it at once, writing nothing;
   * - otherwise it records a durable checkpoint of phase awaiting_signal
   *   whose payload is payload's fields and "signal": name (after
   *   everything queued before it; its own error, an InvalidError for a
   *   bad name, rejects it), unless the run is already waiting for name
   *   (opened with status "waiting" for it, and this Run queued no
   *   checkpoint since: one would have ended the wait);
   * - then it asks the server (POST /open) about once a second until the
   *   signal comes (resolves with it) or timeoutMs passes (0, the
   *   default: it asks once and does not wait), and rejects with a
   *   StillWaitingError: the run stays waiting, the process may end, and
   *   a run opened after the signal continues with it.
   *
   * A cancel, before or while it waits, rejects it with a
   * RunCancelledError; a run finished meanwhile with a RunFinishedError.
   */
  async awaitSignal(name: string, payload?: object, opts: AwaitSignalOptions = {}): Promise<RunSignal> {
    if (this.signal && this.signal.name === name) return this.signal;
    // A name is one wait: a signal of it sent before (the run resumed from
    // a checkpoint written after that wait) is the answer.
    const answered = this.signals.find((g) => g.name === name);
    if (answered) return answered;
    const no = this.refused();
    if (no) throw no;
    const timeoutMs = (opts.timeoutMs ?? 0) > 0 ? opts.timeoutMs! : 0; // NaN, negative: 0
    let since: number;
    if (this.status === "waiting" && this.waitingFor === name && this.latest && this.nCheckpointsQueued === 0) {
      since = this.latest.clock;
    } else {
      const p = JSON.stringify({ ...(payload ?? {}), signal: name });
      const json = `{"phase":${JSON.stringify(PHASE_AWAITING_SIGNAL)},"payload":${p},"timestamp_ms":${Date.now()}}`;
      const rc = await new Promise<Receipt>((resolve, reject) => {
        this.enqueue({ route: "checkpoints", phase: PHASE_AWAITING_SIGNAL, json, snapshot: false, durable: true, resolve, reject });
      });
      since = rc.clock;
    }
    const deadline = Date.now() + timeoutMs;
    const open = JSON.stringify({ thread: this.thread });
    for (;;) {
      const a = await this.post<OpenAnswer>("open", open);
      const sig = a.signal;
      if (sig && sig.name === name && sig.clock > since) return sig;
      if (a.cancel) throw (this.cancelSeen ??= this.cancelledBy(a.cancel));
      if (a.status === "terminal" || a.status === "failed" || a.status === "cancelled") {
        throw new RunFinishedError(`spl: run ${JSON.stringify(this.id)}: it is ${a.status}, waiting for signal ${JSON.stringify(name)} no more`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new StillWaitingError(this.id, name, timeoutMs);
      await new Promise((r) => setTimeout(r, Math.min(SIGNAL_POLL_MS, left)));
    }
  }

  /**
   * flush waits until every write queued so far has landed, been
   * coalesced or failed, at most flushTimeoutMs, and rejects with an
   * UnlandedError listing the checkpoints that failed since the last
   * report (and how many were still on their way, on a timeout).
   */
  async flush(): Promise<void> {
    const done = await this.settle([...this.unsettled]);
    const failures = this.takeFailures();
    if (!done || failures.length) {
      throw new UnlandedError(this.id, failures, { pending: done ? 0 : this.unsettled.size, timedOut: !done, timeoutMs: this.flushTimeoutMs });
    }
  }

  /**
   * finish writes the run_terminal checkpoint (state, result as
   * terminal_result, replayed_effect_count: the effects this Run
   * replayed, and opts.payload's fields) durably, after everything queued
   * before it, waiting at most flushTimeoutMs. Then the Run takes no more
   * writes. Checkpoints queued before that did not land reject it with an
   * UnlandedError whose report is what finish wrote (with state
   * "cancelled", those refused because the run was cancelled are not
   * reported: the finish acknowledges the cancel). A refusal of the
   * finish itself (RunCancelledError, InvalidError) leaves the Run open
   * for another finish.
   */
  async finish(result?: unknown, opts: FinishOptions = {}): Promise<FinishReport> {
    if (this.state !== "open") throw new RunFinishedError(`spl: run ${JSON.stringify(this.id)}: ${this.whyFinished || "finishing"}`);
    const json = JSON.stringify({ thread: this.thread, actor: this.actor, state: opts.state, result, payload: opts.payload, replayed_effect_count: this.nReplayed });
    this.state = "finishing";
    const p = new Promise<Receipt & { status: RunStatus }>((resolve, reject) => {
      this.enqueue({ route: "finish", phase: "run_terminal", json, snapshot: false, durable: true, resolve, reject });
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), this.flushTimeoutMs)));
    let a: (Receipt & { status: RunStatus }) | "timeout";
    try {
      a = await Promise.race([p, timeout]);
    } catch (e) {
      if (e instanceof RunFinishedError) {
        this.state = "finished";
        this.whyFinished = "it is finished";
      } else this.state = "open";
      throw e;
    } finally {
      clearTimeout(timer);
    }
    this.state = "finished";
    if (a === "timeout") {
      // The terminal checkpoint is still on its way: in doubt.
      this.whyFinished = "finishing (in doubt)";
      throw new UnlandedError(this.id, this.takeFailures(), { pending: this.unsettled.size, timedOut: true, timeoutMs: this.flushTimeoutMs });
    }
    this.whyFinished = "finished";
    let failures = this.takeFailures();
    if (opts.state === "cancelled") failures = failures.filter((f) => !(f.error instanceof RunCancelledError));
    const report: FinishReport = { id: a.id, clock: a.clock, status: a.status, ...this.stats() };
    if (failures.length) throw new UnlandedError(this.id, failures, { report });
    return report;
  }

  /**
   * close stops the Run without finishing it: it waits, at most
   * flushTimeoutMs, for the queued writes and reports those that did not
   * land (as flush). The run resumes from what landed.
   */
  async close(): Promise<void> {
    if (this.state === "open") {
      this.state = "finished";
      this.whyFinished = "closed";
    }
    await this.flush();
  }

  /** `await using run = await client.openRun(…)` closes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** takeFailures returns the write-behind failures not reported yet, in call order. */
  private takeFailures(): UnlandedCheckpoint[] {
    const f = this.failures as (UnlandedCheckpoint & { seq: number })[];
    this.failures = [];
    return f.sort((a, b) => a.seq - b.seq).map(({ phase, error }) => ({ phase, error }));
  }

  /**
   * post sends one request of the run, noting a cancel it reveals. A 503
   * (storage unavailable for now) is sent again as is, a few times, over
   * about 1.5 s: every route of runs is safe to retry.
   */
  private async post<T>(route: string, json: string): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.send<T>(route, json);
      } catch (e) {
        if (e instanceof RunCancelledError) this.cancelSeen ??= e;
        if (e instanceof UnavailableError && attempt < RETRIES_503) {
          await new Promise((r) => setTimeout(r, 100 << attempt));
          continue;
        }
        throw e;
      }
    }
  }

  private enqueue(o: Omit<Item, "seq" | "bytes" | "settled">): void {
    // The caller's literal becomes the item: an object spread here cost
    // about 4 µs a call in Node 20, most of a write-behind checkpoint.
    const it = o as Item;
    it.seq = ++this.seq;
    it.bytes = Buffer.byteLength(o.json) + 1;
    it.settled = false;
    if (o.route === "checkpoints") this.nCheckpointsQueued++;
    this.queue.push(it);
    this.unsettled.add(it);
    if (!this.writing) {
      this.writing = true;
      // The writer starts on the next turn: what the caller queues before
      // then goes in one batch.
      setImmediate(() => void this.write());
    }
  }

  /** settleItem records the outcome of one write. */
  private settleItem(it: Item, err: unknown, value?: unknown, landed = true): void {
    if (it.settled) return;
    it.settled = true;
    this.unsettled.delete(it);
    if (err !== undefined) {
      if (err instanceof RunCancelledError) this.cancelSeen ??= err;
      if (it.reject) it.reject(err);
      else this.failures.push({ phase: it.phase, error: err, seq: it.seq } as UnlandedCheckpoint);
    } else {
      if (landed) this.nWritten++;
      it.resolve?.(value);
    }
    for (const f of it.onSettle ?? []) f();
  }

  /** settle waits until every one of items is settled, at most flushTimeoutMs: false when it stopped waiting. */
  private settle(items: Item[]): Promise<boolean> {
    let left = items.filter((it) => !it.settled).length;
    if (!left) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.flushTimeoutMs);
      const one = () => {
        if (--left === 0) {
          clearTimeout(timer);
          resolve(true);
        }
      };
      for (const it of items) if (!it.settled) (it.onSettle ??= []).push(one);
    });
  }

  /**
   * write is the run's writer: it takes what is queued, drops the runtime
   * snapshots a newer queued one supersedes, and sends the rest in call
   * order (checkpoints in batches, effects and the finish alone), one
   * request at a time, until the queue is empty. It never throws: every
   * item is settled, with its error when it failed.
   */
  private async write(): Promise<void> {
    try {
      for (let first = true; this.queue.length; first = false) {
        // As at the start, what the caller queues in the moment a write
        // ends (the continuation of the effect it answered: the next
        // checkpoints, the next effect) goes in the next take, whole.
        if (!first) await new Promise<void>((r) => setImmediate(r));
        const take = this.queue;
        this.queue = [];
        try {
          await this.writeTake(take);
        } catch (e) {
          // Not reached (each send settles its items); kept so that no
          // item waits forever and nothing escapes.
          for (const it of take) this.settleItem(it, e);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  private async writeTake(take: Item[]): Promise<void> {
    let last = -1;
    take.forEach((it, i) => {
      if (it.snapshot) last = i;
    });
    const items: Item[] = [];
    take.forEach((it, i) => {
      if (it.snapshot && i !== last && !it.durable) {
        this.nCoalesced++;
        this.settleItem(it, undefined, undefined, false);
      } else items.push(it);
    });
    let i = 0;
    while (i < items.length) {
      if (items[i].route !== "checkpoints") {
        await this.sendOne(items[i++]);
        continue;
      }
      const batch: Item[] = [];
      let bytes = 0;
      while (i < items.length && items[i].route === "checkpoints" && batch.length < MAX_BATCH && (!batch.length || bytes + items[i].bytes <= MAX_BATCH_BYTES)) {
        bytes += items[i].bytes;
        batch.push(items[i++]);
      }
      const next = items[i];
      if (next?.route === "effects" && bytes + next.bytes <= MAX_BATCH_BYTES) {
        // A runner's step in one request: the checkpoints go with the
        // effect that follows them, and are stored before it.
        i++;
        await this.sendEffectAfter(batch, next);
        continue;
      }
      await this.sendCheckpoints(batch);
    }
  }

  /**
   * sendEffectAfter sends an effect's output with the checkpoints queued
   * before it (POST /effects with checkpoints) and settles them all. A
   * checkpoint the server refuses by name, or a refusal of the effect
   * alone (its input recorded otherwise), sends them apart, as without.
   */
  private async sendEffectAfter(batch: Item[], eff: Item): Promise<void> {
    const body = `{"checkpoints":[${batch.map((it) => it.json).join(",")}],${eff.json.slice(1)}`;
    try {
      const a = await this.post<{ status?: string; checkpoints?: Receipt[] }>("effects", body);
      const receipts = a?.checkpoints ?? [];
      if (receipts.length !== batch.length) {
        const e = new SplError(500, `spl: run ${JSON.stringify(this.id)}: the server answered ${receipts.length} receipts for ${batch.length} checkpoints`);
        for (const it of batch) this.settleItem(it, e);
        this.settleItem(eff, e);
        return;
      }
      batch.forEach((it, k) => this.settleItem(it, undefined, receipts[k]));
      this.settleItem(eff, undefined, a, a?.status === "recorded");
    } catch (e) {
      if (e instanceof RunCancelledError || e instanceof RunFinishedError || !(e instanceof SplError) || e.status >= 500) {
        for (const it of batch) this.settleItem(it, e);
        this.settleItem(eff, e);
        return;
      }
      await this.sendCheckpoints(batch);
      await this.sendOne(eff);
    }
  }

  /** sendOne sends an effect's output or the finish, and settles it. */
  private async sendOne(it: Item): Promise<void> {
    try {
      const a = await this.post<{ status?: string }>(it.route, it.json);
      this.settleItem(it, undefined, a, it.route !== "effects" || a?.status === "recorded");
    } catch (e) {
      this.settleItem(it, e);
    }
  }

  /**
   * sendCheckpoints sends one batch and settles its checkpoints. One the
   * server refuses by name (400 on checkpoints[i]…: refused before any is
   * written) fails alone, with the field as the caller knows it, and the
   * rest is sent again; any other error fails the batch.
   */
  private async sendCheckpoints(batch: Item[]): Promise<void> {
    let rest = batch;
    while (rest.length) {
      const body = `{"thread":${JSON.stringify(this.thread)},${this.actorJSON}"checkpoints":[${rest.map((it) => it.json).join(",")}]}`;
      try {
        const a = await this.post<{ receipts?: Receipt[] }>("checkpoints", body);
        const receipts = a?.receipts ?? [];
        if (receipts.length !== rest.length) {
          const e = new SplError(500, `spl: run ${JSON.stringify(this.id)}: the server answered ${receipts.length} receipts for ${rest.length} checkpoints`);
          for (const it of rest) this.settleItem(it, e);
          return;
        }
        rest.forEach((it, k) => this.settleItem(it, undefined, receipts[k]));
        return;
      } catch (e) {
        const m = e instanceof InvalidError ? /^checkpoints\[(\d+)\](?:\.(.*))?$/.exec(e.field ?? "") : null;
        const k = m ? Number(m[1]) : -1;
        if (m && k < rest.length) {
          const ie = e as InvalidError;
          this.settleItem(rest[k], new InvalidError(ie.status, ie.message, m[2] ?? "checkpoint", ie.rule, ie.clock, ie.code));
          rest = rest.filter((_, j) => j !== k);
          continue;
        }
        for (const it of rest) this.settleItem(it, e);
        return;
      }
    }
  }
}
