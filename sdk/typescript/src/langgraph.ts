// A LangGraph.js checkpointer on spl: BaseCheckpointSaver of
// @langchain/langgraph-checkpoint 1.x. Each LangGraph thread is one spl
// thread (`<prefix><thread_id>`, prefix "langgraph/" by default); a
// checkpoint is a record of kind langgraph.checkpoint, a putWrites call one
// record of kind langgraph.writes, both durable when the call returns and
// verified (id and body digest) when read. Reads fold the thread's records
// into LangGraph's own in-memory saver and ask it, so the semantics (order
// of writes, which writes replace which, pending sends, delta channels) are
// LangGraph's, not a copy. deleteThread is an spl erasure: the thread's
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

export const KIND_CHECKPOINT = "langgraph.checkpoint";
export const KIND_WRITES = "langgraph.writes";

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

  constructor(client: Client, opts: SplSaverOptions = {}, serde?: SerializerProtocol) {
    super(serde);
    this.client = client;
    this.prefix = opts.prefix ?? "langgraph/";
    this.actor = opts.actor;
    this.eraseReason = opts.eraseReason ?? "langgraph deleteThread";
  }

  private splThread(threadId: string): string {
    return this.prefix + threadId;
  }

  /** load folds the records of the given LangGraph threads into a MemorySaver. */
  private async load(threadIds: string[]): Promise<MemorySaver> {
    const mem = new MemorySaver(this.serde);
    const storage = mem.storage as Record<string, Record<string, Record<string, [Uint8Array, Uint8Array, string | undefined]>>>;
    const writes = mem.writes as Record<string, Record<string, [string, string, Uint8Array, string]>>;
    for (const threadId of threadIds) {
      const recs: SplRecord[] = await this.client.query_thread({ thread: this.splThread(threadId) });
      // Channel values are stored once, in the checkpoint that changed
      // them (its blobs, by channel and version). A checkpoint takes the
      // value of each channel at the version it names from the nearest
      // checkpoint on its own branch that stored that version: itself, its
      // parent, the parent's parent. Versions alone do not name a value:
      // LangGraph's default versions are integers, and two branches of a
      // thread (time travel, updateState forks) reach the same version of
      // a channel with different values.
      const cps = new Map<string, { parent: string | null; blobs: Map<string, { version: string; value: string }> }>();
      for (const r of recs) {
        const b = r.storedBody as any;
        if (r.kind !== KIND_CHECKPOINT) continue;
        const own = new Map<string, { version: string; value: string }>();
        for (const bl of (b.blobs ?? []) as { channel: string; version: string; value: string }[]) own.set(bl.channel, { version: bl.version, value: bl.value });
        cps.set(JSON.stringify([b.ns, b.id]), { parent: b.parent ?? null, blobs: own });
      }
      const valueOf = (ns: string, id: string, channel: string, version: string): string | undefined => {
        const seen = new Set<string>();
        for (let at: string | null = id; at !== null && !seen.has(at); ) {
          seen.add(at); // a parent loop in bad data ends the walk
          const cp = cps.get(JSON.stringify([ns, at]));
          if (cp === undefined) return undefined;
          const bl = cp.blobs.get(channel);
          if (bl !== undefined && bl.version === version) return bl.value;
          at = cp.parent;
        }
        return undefined;
      };
      for (const r of recs) {
        const b = r.storedBody as any;
        if (r.kind === KIND_CHECKPOINT) {
          const cp = (await this.serde.loadsTyped("json", unb64(b.checkpoint))) as Checkpoint;
          for (const [ch, v] of Object.entries(cp.channel_versions ?? {})) {
            const val = valueOf(b.ns, b.id, ch, String(v));
            if (val !== undefined) cp.channel_values[ch] = await this.serde.loadsTyped("json", unb64(val));
          }
          const [, bytes] = await this.serde.dumpsTyped(cp);
          storage[threadId] ??= Object.create(null);
          storage[threadId][b.ns] ??= Object.create(null);
          storage[threadId][b.ns][b.id] = [bytes, unb64(b.metadata), b.parent ?? undefined];
        } else if (r.kind === KIND_WRITES) {
          const outer = JSON.stringify([threadId, b.ns, b.id]);
          const before = writes[outer];
          writes[outer] ??= Object.create(null);
          for (const w of b.writes as { channel: string; idx: number; value: string }[]) {
            const inner = `${b.task_id},${w.idx}`;
            if (w.idx >= 0 && before && inner in before) continue; // LangGraph keeps the first regular write
            writes[outer][inner] = [b.task_id, w.channel, unb64(w.value), b.task_path ?? ""];
          }
        }
      }
    }
    return mem;
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
    await this.client.emit({
      act: "KNOW", kind: KIND_CHECKPOINT, thread: this.splThread(String(config.configurable!.thread_id)), actor: this.actor,
      body: { ns, id: checkpoint.id, parent: config.configurable?.checkpoint_id ?? null, checkpoint: b64(cp), metadata: b64(md), blobs },
    });
    return out;
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    await new MemorySaver(this.serde).putWrites(config, writes, taskId, taskPath);
    const ws = await Promise.all(writes.map(async ([channel, value], idx) => {
      const [, v] = await this.serde.dumpsTyped(value);
      return { channel, idx: WRITES_IDX_MAP[channel] || idx, value: b64(v) };
    }));
    await this.client.emit({
      act: "DO", kind: KIND_WRITES, thread: this.splThread(String(config.configurable!.thread_id)), actor: this.actor,
      body: { ns: config.configurable?.checkpoint_ns ?? "", id: config.configurable!.checkpoint_id, task_id: taskId, task_path: taskPath ?? "", writes: ws },
    });
  }

  async deleteThread(threadId: string): Promise<void> {
    await new MemorySaver(this.serde).deleteThread(threadId); // LangGraph's checks of the id
    await this.client.erase(this.splThread(threadId), { all: true, reason: this.eraseReason, actor: this.actor });
  }

  override async getDeltaChannelHistory(options: Parameters<BaseCheckpointSaver["getDeltaChannelHistory"]>[0]) {
    const threadId = options.config.configurable?.thread_id;
    return (await this.load(threadId === undefined ? [] : [String(threadId)])).getDeltaChannelHistory(options);
  }
}
