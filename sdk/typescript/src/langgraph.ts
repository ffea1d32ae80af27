// A LangGraph.js checkpointer on spl: BaseCheckpointSaver of
// @langchain/langgraph-checkpoint 1.x. Each LangGraph thread is one spl
// thread (`<prefix><thread_id>`, prefix "langgraph/" by default); a
// checkpoint is a record of kind langgraph.checkpoint, a putWrites call one
// record of kind langgraph.writes, both durable when the call returns and
// verified (id and body digest) when read. Reads fold the thread's records
// into LangGraph's own in-memory saver and ask it, so the semantics (order
// of writes, which writes replace which, pending sends, delta channels) are
// LangGraph's, not a copy; the fold is kept, and each read adds only the
// records written since the last (by any process). deleteThread is an spl erasure: the thread's
// bytes leave the disk and one core.erasure record stays as the audit trail.
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  MemorySaver,
  WRITES_IDX_MAP,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type { Client, SplRecord } from "./client.js";
import { inTurn } from "./turns.js";

export const KIND_CHECKPOINT = "langgraph.checkpoint";
export const KIND_WRITES = "langgraph.writes";
const KIND_ERASURE = "core.erasure";

/**
 * A channel's value at a version, as stored (serialised, base64); no
 * value when no checkpoint of the branch stored one at that version (a
 * channel LangGraph versions but keeps empty), so that the next
 * checkpoint finds that out from its parent instead of walking the
 * branch to its root again.
 */
interface Blob {
  version: string;
  value?: string;
}

/** What the saver folded of one LangGraph thread. */
interface FoldedThread {
  /** The clock of the newest record folded. */
  clock: number;
  /** The id of the newest record folded (null before the first). */
  last: string | null;
  /**
   * Records this saver wrote and has not folded yet, by their prev: one
   * folds, without a read, once the record it chains on is the newest
   * folded (then no record of another writer came between).
   */
  own: Map<string, SplRecord>;
  /** Each checkpoint's parent and channel values, resolved, by JSON [ns, id]. */
  cps: Map<string, FoldedCheckpoint>;
}

interface FoldedCheckpoint {
  ns: string;
  parent: string | null;
  resolved: Map<string, Blob>;
}

/**
 * inherit is the value of channel ch at version from the nearest
 * checkpoint of the branch from cp up (cp, its parent, …): at once from
 * cp's resolved values as a rule, by the walk when cp did not have that
 * version (a channel its parent dropped).
 */
function inherit(t: FoldedThread, cp: FoldedCheckpoint | undefined, ch: string, version: string): Blob | undefined {
  const seen = new Set<FoldedCheckpoint>();
  for (let at = cp; at !== undefined && !seen.has(at); ) {
    seen.add(at); // a parent loop in bad data ends the walk
    const bl = at.resolved.get(ch);
    if (bl !== undefined && bl.version === version) return bl;
    at = at.parent === null ? undefined : t.cps.get(JSON.stringify([at.ns, at.parent]));
  }
  return undefined;
}

const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
const unb64 = (s: string) => new Uint8Array(Buffer.from(s, "base64"));

/** Options of SplSaver. */
export interface SplSaverOptions {
  /** Prefix of the spl threads (default "langgraph/"). */
  prefix?: string;
  /** Actor of the records written (default: the client's). */
  actor?: string;
  /** Reason recorded by deleteThread's erasure. */
  eraseReason?: string;
}

/** SplSaver is a LangGraph checkpointer that keeps everything in spl. */
export class SplSaver extends BaseCheckpointSaver {
  readonly client: Client;
  readonly prefix: string;
  private readonly actor?: string;
  private readonly eraseReason: string;
  /** The fold of every thread read so far: LangGraph's own saver answers from it. */
  private readonly mem: MemorySaver;
  private readonly threads = new Map<string, FoldedThread>();
  private readonly busy = new Map<string, Promise<void>>();

  constructor(client: Client, opts: SplSaverOptions = {}, serde?: SerializerProtocol) {
    super(serde);
    this.client = client;
    this.prefix = opts.prefix ?? "langgraph/";
    this.actor = opts.actor;
    this.eraseReason = opts.eraseReason ?? "langgraph deleteThread";
    this.mem = new MemorySaver(this.serde);
  }

  private splThread(threadId: string): string {
    return this.prefix + threadId;
  }

  /**
   * load brings the given LangGraph threads up to date in the saver's
   * fold and returns it: a MemorySaver holding what spl holds. A thread
   * is read once in full, then only from the clock after the last record
   * folded (one request that returns the records written since, by this
   * saver or any other process), so that a step costs the same at the
   * 200th checkpoint of a thread as at the first.
   */
  private async load(threadIds: string[]): Promise<MemorySaver> {
    for (const threadId of threadIds) await this.catchUp(threadId);
    return this.mem;
  }

  /** catchUp folds the records of one thread written since the last call, one call at a time. */
  private catchUp(threadId: string): Promise<void> {
    return inTurn(this.busy, threadId, () => this.fold(threadId));
  }

  /** fold reads a thread's new records and folds them in; an erasure makes it read the thread again. */
  private async fold(threadId: string): Promise<void> {
    let t = this.threads.get(threadId);
    if (t === undefined) {
      t = { clock: 0, last: null, cps: new Map(), own: new Map() };
      this.threads.set(threadId, t);
    }
    const recs: SplRecord[] = await this.client.query_thread({ thread: this.splThread(threadId), from: t.clock + 1 });
    if (t.clock > 0 && recs.some((r) => r.kind === KIND_ERASURE)) {
      // Records were erased: what was folded may be gone. Read it all again.
      this.forget(threadId);
      return this.fold(threadId);
    }
    for (const r of recs) await this.foldIn(threadId, t, r);
    for (const [prev, r] of t.own) if (r.clock <= t.clock) t.own.delete(prev);
    await this.foldOwn(threadId, t);
  }

  /**
   * wrote folds a record this saver just wrote without reading it back,
   * when the thread is folded and the record chains on the newest record
   * folded (or on one of this saver's records that does); any other
   * record waits for the next read, which folds it with those of other
   * writers. The record is the server's answer to the write: the stored
   * record, redaction and all. A fold that fails drops the thread from
   * the fold, to be read again in full.
   */
  private wrote(threadId: string, r: SplRecord): void {
    inTurn(this.busy, threadId, async () => {
      const t = this.threads.get(threadId);
      if (t === undefined || r.clock <= t.clock) return;
      t.own.set(r.prev ?? "", r);
      await this.foldOwn(threadId, t);
    }).catch(() => this.forget(threadId));
  }

  /** foldOwn folds the records of t.own that chain on the newest folded, in turn. */
  private async foldOwn(threadId: string, t: FoldedThread): Promise<void> {
    for (let r = t.own.get(t.last ?? ""); r !== undefined; r = t.own.get(t.last ?? "")) {
      t.own.delete(t.last ?? "");
      await this.foldIn(threadId, t, r);
    }
  }

  /** foldIn folds r, the record after the newest folded, and makes it the newest. */
  private async foldIn(threadId: string, t: FoldedThread, r: SplRecord): Promise<void> {
    await this.foldRecord(threadId, t, r);
    t.clock = r.clock;
    t.last = r.id;
  }

  /** forget drops a thread from the fold. */
  private forget(threadId: string): void {
    this.threads.delete(threadId);
    delete (this.mem.storage as Record<string, unknown>)[threadId];
    const writes = this.mem.writes as Record<string, unknown>;
    for (const k of Object.keys(writes)) if ((JSON.parse(k) as string[])[0] === threadId) delete writes[k];
  }

  /**
   * foldRecord adds one record to the fold.
   *
   * Channel values are stored once, in the checkpoint that changed them
   * (its blobs, by channel and version). A checkpoint takes the value of
   * each channel at the version it names from the nearest checkpoint on
   * its own branch that stored that version: itself, its parent, the
   * parent's parent. Versions alone do not name a value: LangGraph's
   * default versions are integers, and two branches of a thread (time
   * travel, updateState forks) reach the same version of a channel with
   * different values. Each checkpoint keeps the values it resolved, so a
   * new one looks at its parent's, not down the whole branch.
   */
  private async foldRecord(threadId: string, t: FoldedThread, r: SplRecord): Promise<void> {
    const b = r.storedBody as any;
    if (r.kind === KIND_CHECKPOINT) {
      const resolved = new Map<string, Blob>();
      for (const bl of (b.blobs ?? []) as { channel: string; version: string; value: string }[]) resolved.set(bl.channel, { version: bl.version, value: bl.value });
      const parent = b.parent == null ? undefined : t.cps.get(JSON.stringify([b.ns, b.parent]));
      const cp = (await this.serde.loadsTyped("json", unb64(b.checkpoint))) as Checkpoint;
      for (const [ch, v] of Object.entries(cp.channel_versions ?? {})) {
        const version = String(v);
        let bl = resolved.get(ch);
        if (bl === undefined || bl.version !== version) {
          bl = inherit(t, parent, ch, version) ?? { version };
          resolved.set(ch, bl);
        }
        if (bl.value !== undefined) cp.channel_values[ch] = await this.serde.loadsTyped("json", unb64(bl.value));
      }
      t.cps.set(JSON.stringify([b.ns, b.id]), { ns: b.ns, parent: b.parent ?? null, resolved });
      const [, bytes] = await this.serde.dumpsTyped(cp);
      const storage = this.mem.storage as Record<string, Record<string, Record<string, [Uint8Array, Uint8Array, string | undefined]>>>;
      storage[threadId] ??= Object.create(null);
      storage[threadId][b.ns] ??= Object.create(null);
      storage[threadId][b.ns][b.id] = [bytes, unb64(b.metadata), b.parent ?? undefined];
    } else if (r.kind === KIND_WRITES) {
      const writes = this.mem.writes as Record<string, Record<string, [string, string, Uint8Array, string]>>;
      const outer = JSON.stringify([threadId, b.ns, b.id]);
      writes[outer] ??= Object.create(null);
      for (const w of b.writes as { channel: string; idx: number; value: string }[]) {
        const inner = `${b.task_id},${w.idx}`;
        if (w.idx >= 0 && inner in writes[outer]) continue; // LangGraph keeps the first regular write
        writes[outer][inner] = [b.task_id, w.channel, unb64(w.value), b.task_path ?? ""];
      }
    }
  }

  /** The LangGraph thread ids that have a checkpoint in spl under this prefix. */
  private async threadIds(): Promise<string[]> {
    const t = await this.client.threads({ kind: KIND_CHECKPOINT, limit: 10000 });
    return t.threads.map((x) => x.thread as string).filter((n) => n.startsWith(this.prefix)).map((n) => n.slice(this.prefix.length));
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined) return (await this.load([])).getTuple(config);
    return (await this.load([String(threadId)])).getTuple(config);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const threadId = config.configurable?.thread_id;
    const ids = threadId ? [String(threadId)] : await this.threadIds();
    yield* (await this.load(ids)).list(config, options);
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    // LangGraph's own checks of the config (thread_id present, safe keys)
    // on a scratch saver, so that errors are the same.
    const out = await new MemorySaver(this.serde).put(config, checkpoint, metadata);
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    // The values of the channels this checkpoint changed (newVersions) are
    // stored beside it by version; those of channels with a version it did
    // not change are taken, on load, from the nearest checkpoint of its
    // branch (parent, parent's parent) that stored that version.
    const versioned = checkpoint.channel_versions ?? {};
    const inline: Record<string, unknown> = {};
    const blobs: { channel: string; version: string; value: string }[] = [];
    for (const [ch, value] of Object.entries(checkpoint.channel_values ?? {})) {
      if (ch in newVersions) blobs.push({ channel: ch, version: String(newVersions[ch]), value: b64((await this.serde.dumpsTyped(value))[1]) });
      else if (!(ch in versioned)) inline[ch] = value;
    }
    const [[, cp], [, md]] = await Promise.all([this.serde.dumpsTyped({ ...checkpoint, channel_values: inline }), this.serde.dumpsTyped(metadata)]);
    const threadId = String(config.configurable!.thread_id);
    this.wrote(threadId, await this.client.emit({
      act: "KNOW", kind: KIND_CHECKPOINT, thread: this.splThread(threadId), actor: this.actor,
      body: { ns, id: checkpoint.id, parent: config.configurable?.checkpoint_id ?? null, checkpoint: b64(cp), metadata: b64(md), blobs },
    }));
    return out;
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    await new MemorySaver(this.serde).putWrites(config, writes, taskId, taskPath);
    const ws = await Promise.all(writes.map(async ([channel, value], idx) => {
      const [, v] = await this.serde.dumpsTyped(value);
      return { channel, idx: WRITES_IDX_MAP[channel] || idx, value: b64(v) };
    }));
    const threadId = String(config.configurable!.thread_id);
    this.wrote(threadId, await this.client.emit({
      act: "DO", kind: KIND_WRITES, thread: this.splThread(threadId), actor: this.actor,
      body: { ns: config.configurable?.checkpoint_ns ?? "", id: config.configurable!.checkpoint_id, task_id: taskId, task_path: taskPath ?? "", writes: ws },
    }));
  }

  async deleteThread(threadId: string): Promise<void> {
    await new MemorySaver(this.serde).deleteThread(threadId); // LangGraph's checks of the id
    await this.client.erase(this.splThread(threadId), { all: true, reason: this.eraseReason, actor: this.actor });
    await (this.busy.get(threadId) ?? Promise.resolve());
    this.forget(threadId);
  }

  override async getDeltaChannelHistory(options: Parameters<BaseCheckpointSaver["getDeltaChannelHistory"]>[0]) {
    const threadId = options.config.configurable?.thread_id;
    return (await this.load(threadId === undefined ? [] : [String(threadId)])).getDeltaChannelHistory(options);
  }
}

export { SplStore, KIND_STORE_ITEM, matchesFilter, jsonProblem, type SplStoreOptions, type SplPutOperation } from "./langgraph_store.js";
