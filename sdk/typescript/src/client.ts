// The client of spl serve's HTTP API (docs/http-api.yaml). It holds no rule
// of spl: every request goes to the server, which applies them once (the
// Go service layer). What it adds is the reader's check: every record it
// returns has been verified against its stored bytes (id and body digest).
import { errorOf, SplError } from "./errors.js";
import { HTTP } from "./http.js";
import { localToken, localURL } from "./local.js";
import { Run, type OpenAnswer, type OpenRunOptions, type RunSend } from "./run.js";
import { CorruptRecordError, verifyEnvelope, type Header } from "./verify.js";

/** Options of connect. */
export interface ConnectOptions {
  /** URL of an spl serve; default $SPL_URL, else the local spl (started when needed). */
  url?: string;
  /** Bearer token; default $SPL_TOKEN. Sent as `Authorization: Bearer …` when given. */
  token?: string;
  /** Actor (a DID) of what this client writes; default $SPL_ACTOR. */
  actor?: string;
  /** Data directory of the local spl; default $SPL_HOME, else ~/.spl. */
  home?: string;
  /** The spl binary used to start the local spl; default $SPL_BIN, else `spl` on PATH. */
  splBinary?: string;
  /** Write-behind: records in flight at once (emitMany, enqueue). Default 64. */
  maxInFlight?: number;
  /**
   * Send the emits awaited at the same moment as one request (POST
   * /v1/records/batch); each still resolves when its own record is
   * durable, or fails alone. Default true; false sends one request an
   * emit (a server older than the batch route).
   */
  coalesce?: boolean;
}

/** An event to emit: the page's emit({act, kind, body, thread}). */
export interface EmitInput {
  act: string;
  kind: string;
  body: Record<string, unknown>;
  thread: string;
  actor?: string;
  /** Unix milliseconds; the server's clock when absent. */
  ts?: number;
  /**
   * Makes the append conditional: it lands only while the thread's newest
   * record is at this clock (0: the thread has none); else a
   * ConflictError whose clock is where the thread is.
   */
  expectedClock?: number;
}

type Body = Record<string, any>;

/** The JSON form of a record, as the server answers it. */
interface RecordJSON {
  id: string; clock: number; thread: string; act: string; kind: string; actor: string;
  time: string; ts: number; prev: string | null; body: Body; envelope?: string;
  [extra: string]: unknown;
}

/**
 * SplRecord is a verified record. `storedBody` is the body exactly as
 * stored (decoded from the bytes whose digest was checked). `body` is the
 * same plus `kind` mirrored from the header when the stored body has no
 * `kind` of its own, so that the session-checkpoints page's filter
 * `r.body?.kind === "agent.session.checkpoint"` works: in spl the kind is
 * in the header. `derivedBodyKeys` names the keys `body` adds; nothing
 * stored is changed.
 */
export class SplRecord {
  readonly id: string;
  readonly clock: number;
  readonly thread: string;
  readonly act: string;
  readonly kind: string;
  readonly actor: string;
  readonly time: string;
  readonly ts: number;
  readonly prev: string | null;
  readonly storedBody: Body;
  readonly verified: boolean;
  /** Further fields of the answer (a checkpoint's summary, learnings, next_steps, …). */
  readonly extra: Record<string, unknown>;
  private mirrored?: Body;

  constructor(j: RecordJSON, verified: { header: Header; body: Body } | null) {
    const { id, clock, thread, act, kind, actor, time, ts, prev, body, envelope, ...extra } = j;
    void envelope;
    this.id = id; this.clock = clock; this.thread = thread; this.act = act; this.kind = kind;
    this.actor = actor; this.time = time; this.ts = ts; this.prev = prev;
    this.storedBody = verified ? verified.body : body;
    this.verified = verified !== null;
    this.extra = extra;
  }

  /** The keys `body` adds to the stored body (["kind"], or [] when the body has its own). */
  get derivedBodyKeys(): string[] {
    return Object.prototype.hasOwnProperty.call(this.storedBody, "kind") ? [] : ["kind"];
  }

  /** The stored body, with `kind` mirrored from the header (see the class). */
  get body(): Body {
    if (this.mirrored === undefined) {
      this.mirrored = this.derivedBodyKeys.length ? { ...this.storedBody, kind: this.kind } : this.storedBody;
    }
    return this.mirrored;
  }

  toJSON(): Record<string, unknown> {
    return { id: this.id, clock: this.clock, thread: this.thread, act: this.act, kind: this.kind, actor: this.actor,
      time: this.time, ts: this.ts, prev: this.prev, body: this.storedBody, ...this.extra };
  }
}

/** A checkpoint: the record plus its lifted fields. */
export type Checkpoint = SplRecord & {
  extra: { summary: string; learnings: string[]; next_steps: string[]; name: string; session_id: string };
};

/** Filters and paging of query_thread. */
export interface QueryOptions {
  thread: string;
  kind?: string;
  act?: string;
  /** Start at this clock. */
  from?: number;
  /** At most this many records (from `from`); every page when absent. */
  limit?: number;
  /** The last N records instead. */
  last?: number;
  /** Records a page (the server's limit); default 1000. */
  pageSize?: number;
}

/**
 * Bounds of one batch. The server takes at most 1000 records a request;
 * a batch is cut once it holds 1 MiB of record JSON, so that one large
 * record does not hold back the small ones of its moment. A record larger
 * than that goes alone (the server keeps a body over 1 MiB beside the log,
 * up to its --max-record).
 */
const MAX_BATCH_RECORDS = 1000;
const MAX_BATCH_BYTES = 1 << 20;

/** An emit waiting for the batch of its moment. */
interface Queued {
  item: Record<string, unknown>;
  resolve: (r: SplRecord) => void;
  reject: (e: unknown) => void;
}

/** One item's outcome in the answer of POST /v1/records/batch. */
interface BatchResult {
  status: number;
  record?: RecordJSON;
  error?: string;
  field?: string;
  rule?: string;
}

function b64(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, "base64"));
}

/** Client of one spl serve. Safe for concurrent use. */
export class Client {
  readonly url: string;
  readonly actor?: string;
  private readonly token?: string;
  private readonly maxInFlight: number;
  private inFlight = 0;
  private waiters: (() => void)[] = [];
  private pending = new Set<Promise<unknown>>();
  private failures: unknown[] = [];
  private readonly http: HTTP;
  private readonly base: string; // the URL's path, before the API's
  private readonly coalesce: boolean;
  private queued: Queued[] = [];

  constructor(url: string, opts: { token?: string; actor?: string; maxInFlight?: number; coalesce?: boolean } = {}) {
    this.url = url.replace(/\/+$/, "");
    this.http = new HTTP(this.url);
    this.base = new URL(this.url).pathname.replace(/\/+$/, "");
    if (opts.token && /[\r\n]/.test(opts.token)) throw new Error("spl: the token holds a line break");
    this.token = opts.token;
    this.actor = opts.actor;
    this.maxInFlight = opts.maxInFlight ?? 64;
    this.coalesce = opts.coalesce ?? true;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.token) h.authorization = `Bearer ${this.token}`;
    return h;
  }

  /** request does one HTTP request and answers its JSON, or throws the SplError of an error answer. */
  async request<T>(method: string, path: string, body?: unknown, query?: Record<string, unknown>): Promise<T> {
    return this.send<T>(method, path, body !== undefined ? JSON.stringify(body) : undefined, query);
  }

  /**
   * send is request with the body's JSON text; retrySafe sends it again
   * when a reused connection fails before any byte of the answer (a route
   * safe to retry as is: those of runs).
   */
  private async send<T>(method: string, path: string, json?: string, query?: Record<string, unknown>, retrySafe = false): Promise<T> {
    let p = this.base + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v === undefined || v === null) continue;
        if (Array.isArray(v)) v.forEach((x) => q.append(k, String(x)));
        else q.set(k, String(v));
      }
      const s = q.toString();
      if (s) p += "?" + s;
    }
    const data = json !== undefined ? Buffer.from(json) : undefined;
    const { status, body } = await this.http.request(method, p, this.headers(data ? { "Content-Type": "application/json" } : {}), data, retrySafe);
    const text = body.toString("utf8");
    let j: any;
    try {
      j = text ? JSON.parse(text) : undefined;
    } catch {
      j = { error: text };
    }
    if (status >= 400) throw errorOf(status, j);
    return j as T;
  }

  /** verify turns a JSON record with its envelope into a verified SplRecord. */
  private verify(j: RecordJSON): SplRecord {
    if (typeof j.envelope !== "string") throw new CorruptRecordError(`record ${j.id}: the server sent no envelope to verify`);
    const v = verifyEnvelope(b64(j.envelope), j.id);
    const h = v.header;
    const mismatch = (["thread", "act", "kind", "actor", "ts", "prev"] as const).find((k) => (h as any)[k] !== (j as any)[k]);
    if (mismatch) throw new CorruptRecordError(`record ${j.id}: ${mismatch} is ${JSON.stringify((j as any)[mismatch])} in the answer, ${JSON.stringify((h as any)[mismatch])} in the verified header`);
    return new SplRecord(j, v as { header: Header; body: Body });
  }

  private threadPath(thread: string, rest: string): string {
    return `/v1/threads/${encodeURIComponent(thread)}/${rest}`;
  }

  /**
   * emit appends one record and resolves once it is durable (fsynced).
   * The emits made at the same moment (before the event loop turns) go
   * to the server as one request, unless the client was made with
   * `coalesce: false`; each resolves with its own record or fails with
   * its own error (InvalidError naming the field and rule), and the
   * records of one thread land in the order of the calls.
   */
  emit(ev: EmitInput): Promise<SplRecord> {
    const item = { thread: ev.thread, act: ev.act, kind: ev.kind, actor: ev.actor ?? this.actor, ts: ev.ts, body: ev.body,
      expected_clock: ev.expectedClock };
    if (!this.coalesce || ev.expectedClock !== undefined) {
      // A conditional append goes alone: a batch does not take one.
      try {
        return this.emitAlone(JSON.stringify(item));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return new Promise<SplRecord>((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.sendQueued());
    });
  }

  private async emitAlone(json: string): Promise<SplRecord> {
    return new SplRecord(await this.send<RecordJSON>("POST", "/v1/records", json), null);
  }

  /**
   * sendQueued sends the emits of the moment: one alone, more in
   * batches within the server's bounds (a record too large to share a
   * request goes alone), one request after the other so that the
   * records of one thread land in the order of the calls.
   */
  private async sendQueued(): Promise<void> {
    const q = this.queued;
    this.queued = [];
    const batches: { batch: Queued[]; texts: string[] }[] = [];
    let cur = { batch: [] as Queued[], texts: [] as string[] };
    let bytes = 0;
    for (const e of q) {
      let text: string;
      try {
        text = JSON.stringify(e.item);
      } catch (err) {
        e.reject(err);
        continue;
      }
      const n = Buffer.byteLength(text) + 1;
      if (cur.batch.length === MAX_BATCH_RECORDS || (cur.batch.length && bytes + n > MAX_BATCH_BYTES)) {
        batches.push(cur);
        cur = { batch: [], texts: [] };
        bytes = 0;
      }
      cur.batch.push(e);
      cur.texts.push(text);
      bytes += n;
    }
    if (cur.batch.length) batches.push(cur);
    for (const { batch, texts } of batches) await this.sendBatch(batch, texts);
  }

  /** sendBatch sends one batch and settles each of its emits; it never throws. */
  private async sendBatch(batch: Queued[], texts: string[]): Promise<void> {
    if (batch.length === 1) {
      await this.emitAlone(texts[0]).then(batch[0].resolve, batch[0].reject);
      return;
    }
    let r: { results?: BatchResult[] };
    try {
      r = await this.send("POST", "/v1/records/batch", `{"records":[${texts.join(",")}]}`);
    } catch (err) {
      for (const e of batch) e.reject(err);
      return;
    }
    batch.forEach((e, i) => {
      const res = r?.results?.[i];
      if (res?.status === 201 && res.record) e.resolve(new SplRecord(res.record, null));
      else if (res) e.reject(errorOf(res.status, res));
      else e.reject(new SplError(500, `the server answered ${r?.results?.length ?? 0} results for a batch of ${batch.length}`));
    });
  }

  /**
   * enqueue is write-behind: it queues ev and returns at once; at most
   * maxInFlight appends are in flight. flush() waits for every queued
   * record and throws the first failure.
   */
  enqueue(ev: EmitInput): void {
    const p = (async () => {
      while (this.inFlight >= this.maxInFlight) await new Promise<void>((r) => this.waiters.push(r));
      this.inFlight++;
      try {
        return await this.emit(ev);
      } finally {
        this.inFlight--;
        this.waiters.shift()?.();
      }
    })();
    this.pending.add(p);
    p.catch((e) => this.failures.push(e)).finally(() => this.pending.delete(p));
  }

  /** emitMany queues every event (enqueue) and flushes. */
  async emitMany(evs: EmitInput[]): Promise<void> {
    for (const ev of evs) this.enqueue(ev);
    await this.flush();
  }

  /** flush waits until every enqueued record has landed or failed; throws the first failure. */
  async flush(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
    if (this.failures.length) {
      const [first] = this.failures;
      this.failures = [];
      throw first;
    }
  }

  /** query_thread returns the records of a thread in clock order, verified, every page. */
  async query_thread(o: QueryOptions): Promise<SplRecord[]> {
    const out: SplRecord[] = [];
    for await (const r of this.iterThread(o)) out.push(r);
    return out;
  }

  /** queryThread is query_thread. */
  queryThread(o: QueryOptions): Promise<SplRecord[]> {
    return this.query_thread(o);
  }

  /** iterThread yields a thread's records page by page. */
  async *iterThread(o: QueryOptions): AsyncGenerator<SplRecord> {
    const path = this.threadPath(o.thread, "records");
    if (o.last !== undefined) {
      const q = await this.request<{ records: RecordJSON[]; corrupt: unknown[] }>("GET", path, undefined, { kind: o.kind, act: o.act, from: o.from, last: o.last, envelope: true });
      this.checkCorrupt(q.corrupt);
      for (const j of q.records) yield this.verify(j);
      return;
    }
    let from = o.from;
    let left = o.limit ?? Infinity;
    const page = o.pageSize ?? 1000;
    while (left > 0) {
      const q = await this.request<{ records: RecordJSON[]; corrupt: unknown[]; next: number | null }>("GET", path, undefined, {
        kind: o.kind, act: o.act, from, limit: Math.min(page, left), envelope: true,
      });
      this.checkCorrupt(q.corrupt);
      for (const j of q.records) yield this.verify(j);
      left -= q.records.length;
      if (q.next === null || q.next === undefined) return;
      from = q.next;
    }
  }

  private checkCorrupt(corrupt: unknown[] | undefined): void {
    if (corrupt && corrupt.length) throw new CorruptRecordError(`the server found stored messages that do not verify: ${JSON.stringify(corrupt)}`);
  }

  /** latestCheckpoint returns the newest checkpoint of a thread (NotFoundError when none). */
  async latestCheckpoint(thread: string): Promise<Checkpoint> {
    return this.verify(await this.request<RecordJSON>("GET", this.threadPath(thread, "checkpoint"), undefined, { envelope: true })) as Checkpoint;
  }
  latest_checkpoint(thread: string): Promise<Checkpoint> { return this.latestCheckpoint(thread); }

  /** checkpoint returns a checkpoint of a thread by id (or end of id) or by name. */
  async checkpoint(thread: string, ref: { id?: string; name?: string }): Promise<Checkpoint> {
    return this.verify(await this.request<RecordJSON>("GET", this.threadPath(thread, "checkpoint"), undefined, { ...ref, envelope: true })) as Checkpoint;
  }

  /** listCheckpoints returns the newest checkpoints of a thread, oldest first. */
  async listCheckpoints(thread: string, o: { limit?: number } = {}): Promise<Checkpoint[]> {
    const r = await this.request<{ checkpoints: RecordJSON[] }>("GET", this.threadPath(thread, "checkpoints"), undefined, { limit: o.limit, envelope: true });
    return r.checkpoints.map((j) => this.verify(j) as Checkpoint);
  }
  list_checkpoints(thread: string, o: { limit?: number } = {}): Promise<Checkpoint[]> { return this.listCheckpoints(thread, o); }

  /** latestCheckpoints lists the latest checkpoint of every thread, newest first (from the index: ids, no bodies). */
  async latestCheckpoints(o: { limit?: number; offset?: number; actor?: string; since?: string } = {}): Promise<any[]> {
    return (await this.request<{ checkpoints: any[] }>("GET", "/v1/checkpoints/latest", undefined, o)).checkpoints;
  }

  /** record returns one record by id, verified from its stored bytes. */
  async record(id: string, o: { thread?: string } = {}): Promise<SplRecord> {
    return this.verify(await this.request<RecordJSON>("GET", `/v1/records/${encodeURIComponent(id)}`, undefined, { thread: o.thread, envelope: true }));
  }

  /** recordBytes returns a record's stored bytes (canonical CBOR), verified against id. */
  async recordBytes(id: string, o: { thread?: string } = {}): Promise<Uint8Array> {
    const q = o.thread ? `?thread=${encodeURIComponent(o.thread)}` : "";
    const r = await fetch(`${this.url}/v1/records/${encodeURIComponent(id)}${q}`, { headers: this.headers({ accept: "application/cbor" }) });
    if (!r.ok) throw errorOf(r.status, await r.json().catch(() => undefined));
    const b = new Uint8Array(await r.arrayBuffer());
    verifyEnvelope(b, id);
    return b;
  }

  /**
   * follow yields the records of a thread as they land (SSE), from clock
   * `from` (default: what lands after the call), verified, until the
   * signal aborts. It reconnects with Last-Event-ID when the stream drops.
   */
  async *follow(thread: string, o: { from?: number; signal?: AbortSignal } = {}): AsyncGenerator<SplRecord> {
    let last: number | undefined = o.from !== undefined ? o.from - 1 : undefined;
    let first = true;
    while (!o.signal?.aborted) {
      const headers = this.headers({ accept: "text/event-stream" });
      const q = new URLSearchParams({ envelope: "true" });
      if (last !== undefined) {
        if (first && o.from !== undefined) q.set("from", String(o.from));
        else headers["last-event-id"] = String(last);
      }
      first = false;
      let r: Response;
      try {
        r = await fetch(`${this.url}${this.threadPath(thread, "events")}?${q}`, { headers, signal: o.signal });
      } catch (e) {
        if (o.signal?.aborted) return;
        throw e;
      }
      if (!r.ok || !r.body) throw errorOf(r.status, await r.json().catch(() => undefined));
      const dec = new TextDecoder();
      let buf = "";
      try {
        for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
          buf += dec.decode(chunk, { stream: true });
          let i: number;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let event = "message";
            let data = "";
            let id: string | undefined;
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) event = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
              else if (line.startsWith("id: ")) id = line.slice(4);
            }
            if (id !== undefined) last = Number(id);
            if (event === "record") yield this.verify(JSON.parse(data));
            else if (event === "corrupt") throw new CorruptRecordError(`stored message does not verify: ${data}`);
          }
        }
      } catch (e) {
        if (o.signal?.aborted) return;
        if (e instanceof SplError || e instanceof CorruptRecordError) throw e;
      }
      if (last === undefined) last = 0;
    }
  }

  /**
   * openRun opens run runId on opts.thread (POST /v1/runs/{run}/open,
   * which writes nothing): a new run, or the one it was, to resume. A run
   * that finished comes back with status "terminal" and its
   * terminalResult: return that, run nothing. See Run.
   */
  async openRun(runId: string, opts: OpenRunOptions): Promise<Run> {
    const path = `/v1/runs/${encodeURIComponent(runId)}/`;
    const send: RunSend = (route, json) => this.send("POST", path + route, json, undefined, true);
    const answer = await send<OpenAnswer>("open", JSON.stringify({ thread: opts?.thread }));
    return new Run(runId, opts, opts.actor ?? this.actor, answer, send);
  }

  // Runs and sessions, lineage: as the HTTP API has them.
  runs(o: { thread?: string; status?: string } = {}): Promise<{ runs: any[] }> { return this.request("GET", "/v1/runs", undefined, o); }
  run(runId: string, o: { thread?: string; outputs?: boolean } = {}): Promise<any> { return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}`, undefined, o); }
  /** cancelRun asks run runId to stop, for reason (POST /v1/runs/{run}/cancel): its runner sees a RunCancelledError. */
  cancelRun(runId: string, o: { thread?: string; reason: string; actor?: string }): Promise<{ run_id: string; request: string; clock: number }> {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/cancel`, { ...o, actor: o.actor ?? this.actor });
  }
  /**
   * signalRun sends run runId the signal name it waits for (POST
   * /v1/runs/{run}/signal), with data (any JSON value; none when absent),
   * as actor (default the client's): a record of kind agent.run.signal.
   * The run is running again, and its runner, opened after, continues
   * with the data (Run.signal, Run.awaitSignal). A run not waiting for
   * name (waiting for another, for none, or a second signal for one
   * wait) is refused with a RunNotWaitingError, a finished one with a
   * RunFinishedError; a bad name is an InvalidError. thread is needed
   * when the run id is on several threads. Not sent again on a lost
   * answer: a signal that landed would be refused the second time.
   */
  signalRun(runId: string, name: string, o: { data?: unknown; thread?: string; actor?: string } = {}): Promise<{ run_id: string; name: string; request: string; clock: number }> {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/signal`, { thread: o.thread, name, data: o.data, actor: o.actor ?? this.actor });
  }
  sessions(o: { status?: string | string[]; resumable?: boolean; offset?: number; limit?: number } = {}): Promise<{ sessions: any[]; total: number }> {
    return this.request("GET", "/v1/sessions", undefined, o);
  }
  pause(thread: string, o: { reason?: string; node?: string; sessionId?: string; agents?: string[]; budgetSpent?: number; rounds?: number; elapsedMs?: number; depth?: number; actor?: string } = {}): Promise<any> {
    return this.request("POST", this.threadPath(thread, "pause"), { ...o, actor: o.actor ?? this.actor });
  }
  resume(thread: string, o: { from?: string; set?: Record<string, unknown>; actor?: string } = {}): Promise<any> {
    return this.request("POST", this.threadPath(thread, "resume"), { ...o, actor: o.actor ?? this.actor });
  }
  lineage(thread: string): Promise<any> { return this.request("GET", this.threadPath(thread, "lineage")); }
  diff(thread: string, a: string, b: string, o: { bThread?: string } = {}): Promise<any> {
    return this.request("GET", this.threadPath(thread, "diff"), undefined, { a, b, b_thread: o.bThread });
  }
  fork(thread: string, o: { to: string; from?: string; set?: Record<string, unknown>; actor?: string }): Promise<any> {
    return this.request("POST", this.threadPath(thread, "fork"), { ...o, actor: o.actor ?? this.actor });
  }
  prune(thread: string, o: { older_than_ms?: number; keep_last?: number; keep_clean_only?: boolean; dry_run?: boolean; actor?: string }): Promise<any> {
    return this.request("POST", this.threadPath(thread, "prune"), { ...o, actor: o.actor ?? this.actor });
  }
  threads(o: { limit?: number; actor?: string; kind?: string; since?: string } = {}): Promise<{ threads: any[]; total: number; as_of: number; log_clock: number }> {
    return this.request("GET", "/v1/threads", undefined, o);
  }

  // Erasure, pins, retention.
  /** erase erases records of a thread (ids, or all: every record but its erasure records); the bytes leave the disk, an audit record stays. */
  erase(thread: string, o: { ids?: string[]; all?: boolean; reason: string; actor?: string }): Promise<{ thread: string; erased: string[]; already: string[]; erasures: { id: string; clock: number }[] }> {
    return this.request("POST", this.threadPath(thread, "erase"), { ...o, actor: o.actor ?? this.actor });
  }
  pin(thread: string, id: string, o: { reason?: string; actor?: string } = {}): Promise<any> {
    return this.request("POST", this.threadPath(thread, "pins"), { id, ...o, actor: o.actor ?? this.actor });
  }
  retention(): Promise<{ policies: any[] }> { return this.request("GET", "/v1/retention"); }
  setRetention(o: { thread?: string; all?: boolean; keep_last: number; max_age_ms?: number; actor?: string }): Promise<any> {
    return this.request("PUT", "/v1/retention", { ...o, actor: o.actor ?? this.actor });
  }
  clearRetention(o: { thread?: string; all?: boolean; actor?: string }): Promise<any> {
    return this.request("DELETE", "/v1/retention", { ...o, actor: o.actor ?? this.actor });
  }
  health(): Promise<{ status: string; last_clock: number }> { return this.request("GET", "/healthz"); }

  /** close flushes what is queued. */
  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      this.http.close();
    }
  }
}

/**
 * connect resolves to a client of spl serve: options.url, else $SPL_URL,
 * else the local spl of the data directory (started through the spl
 * binary when none answers). The token (options.token, else $SPL_TOKEN
 * with a URL, else the local server's own) is sent as `Authorization:
 * Bearer …`; the actor (options.actor, else $SPL_ACTOR) is the actor of
 * what the client writes.
 */
export async function connect(options: ConnectOptions = {}): Promise<Client> {
  let token = options.token;
  const actor = options.actor ?? process.env.SPL_ACTOR ?? undefined;
  let url = options.url ?? process.env.SPL_URL;
  if (url) {
    token ??= process.env.SPL_TOKEN || undefined;
  } else {
    url = await localURL({ home: options.home, bin: options.splBinary });
    // The local server's own credentials, which its user may read:
    // $SPL_TOKEN is another server's (it goes with $SPL_URL).
    token ??= await localToken(options.home);
  }
  const c = new Client(url, { token, actor, maxInFlight: options.maxInFlight, coalesce: options.coalesce });
  await c.health().catch((e) => {
    if (e instanceof SplError && e.status === 503) return; // starting: requests will say
    throw e;
  });
  return c;
}
