// A LangGraph.js long-term memory store on spl: BaseStore of
// @langchain/langgraph-checkpoint 1.x. Each namespace is one spl thread
// (`<prefix><namespace as JSON>`, or `<prefix>#<sha-256 of it>` when that
// would pass the 256 bytes of a thread name), each put one record of kind
// langgraph.store.item carrying the namespace, the key and the value;
// a delete (a put of null) is an spl erasure of the key's records: their
// bytes leave the disk and one core.erasure record stays as the audit
// trail. Reads fold the namespaces' records into memory, each read adding
// only the records written since the last (by any process), and answer
// from the fold as LangGraph's InMemoryStore answers from its maps.
import { createHash } from "node:crypto";
import {
  BaseStore,
  InvalidNamespaceError,
  validateNamespace,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import type { Client, SplRecord } from "./client.js";
import { inTurn } from "./turns.js";

export const KIND_STORE_ITEM = "langgraph.store.item";
const KIND_ERASURE = "core.erasure";
const MAX_THREAD_BYTES = 256;
/** The most threads one listing of the server returns. */
const MAX_LISTED = 10000;

/** Options of SplStore. */
export interface SplStoreOptions {
  /** Prefix of the spl threads (default "langgraph-store/"). */
  prefix?: string;
  /** Actor of the records written (default: the client's). */
  actor?: string;
  /** Reason recorded by the erasure of a deleted item (default "langgraph store delete"). */
  deleteReason?: string;
  /**
   * Time to live of a put, in minutes, unless its PutOperation says
   * otherwise (`ttl`); none by default. An expired item is absent from
   * every answer at once; sweep() erases it.
   */
  ttlMinutes?: number;
  /** With a TTL: start() sweeps every this many minutes (default 60). */
  sweepIntervalMinutes?: number;
}

/** A PutOperation with SplStore's time to live (minutes; null: none, undefined: the store's). */
export interface SplPutOperation extends PutOperation {
  ttl?: number | null;
}

/** One item as folded: its value and the records that hold it. */
interface FoldedItem {
  value: Record<string, any>;
  createdAt: number;
  updatedAt: number;
  expiresAt?: number;
  /** The ids of the key's records on the thread: a delete erases them all. */
  ids: string[];
}

/** What the store folded of one namespace's thread. */
interface FoldedNamespace {
  namespace: string[];
  /** The clock of the newest record folded (0: none yet). */
  clock: number;
  /** The clock of the oldest item record: namespaces are searched in this order. */
  first: number;
  /** By key, in the order keys were first put (a key deleted and put again comes last). */
  items: Map<string, FoldedItem>;
}

/**
 * jsonProblem is where v stops being JSON that reads back as itself
 * (NaN, Infinity, undefined, a bigint, a function, a Date or another
 * object that is not a plain one), as a path (`value.a[2]`), or
 * undefined when it is JSON. JSON.stringify would change those silently.
 */
export function jsonProblem(v: unknown, path = "value"): string | undefined {
  switch (typeof v) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(v) ? undefined : `${path}: ${v} is not a JSON number`;
    case "object": {
      if (v === null) return undefined;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          if (!(i in v)) return `${path}[${i}]: a hole in an array is not JSON`;
          const p = jsonProblem(v[i], `${path}[${i}]`);
          if (p) return p;
        }
        return undefined;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return `${path}: a ${proto?.constructor?.name ?? "non-plain"} object is not JSON (convert it first)`;
      for (const [k, x] of Object.entries(v)) {
        const p = jsonProblem(x, `${path}.${k}`);
        if (p) return p;
      }
      return undefined;
    }
    default:
      return `${path}: ${typeof v === "undefined" ? "undefined" : `a ${typeof v}`} is not JSON`;
  }
}

/** deepEqual compares two JSON values. */
function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const y = b as unknown[];
    return a.length === y.length && a.every((x, i) => deepEqual(x, y[i]));
  }
  const ka = Object.keys(a), kb = Object.keys(b as object);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual((a as any)[k], (b as any)[k]));
}

const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

/**
 * matchesFilter is the rule of a search filter, LangGraph's: each key of
 * the filter names a top-level field of the value, and the field matches
 * a value (equal) or an object of operators ($eq $ne $gt $gte $lt $lte
 * $in $nin, compared as LangGraph does: order operators as numbers).
 * Objects and arrays compare by content, where InMemoryStore compares
 * them by reference (and so never matches one read back from a store).
 */
export function matchesFilter(value: Record<string, any>, filter: Record<string, any>): boolean {
  return Object.entries(filter).every(([k, f]) => {
    const v = value[k];
    const ops = typeof f === "object" && f !== null && !Array.isArray(f) && Object.keys(f).every((o) => OPERATORS.has(o));
    if (!ops) return deepEqual(v, f);
    return Object.entries(f as Record<string, unknown>).every(([op, x]) => {
      switch (op) {
        case "$eq": return deepEqual(v, x);
        case "$ne": return !deepEqual(v, x);
        case "$gt": return Number(v) > Number(x);
        case "$gte": return Number(v) >= Number(x);
        case "$lt": return Number(v) < Number(x);
        case "$lte": return Number(v) <= Number(x);
        case "$in": return Array.isArray(x) && x.some((y) => deepEqual(v, y));
        case "$nin": return !Array.isArray(x) || !x.some((y) => deepEqual(v, y));
        default: return false;
      }
    });
  });
}

/** matchesCondition is LangGraph's rule of a listNamespaces condition ("*" matches any label). */
function matchesCondition(c: MatchCondition, ns: string[]): boolean {
  if (c.path.length > ns.length) return false;
  const at = c.matchType === "prefix" ? 0 : ns.length - c.path.length;
  if (c.matchType !== "prefix" && c.matchType !== "suffix") throw new Error(`spl store: unsupported match type ${JSON.stringify(c.matchType)}`);
  return c.path.every((p, i) => p === "*" || ns[at + i] === p);
}

const isPut = (op: Operation): op is SplPutOperation => "value" in op;
const isGet = (op: Operation): op is GetOperation => "key" in op && "namespace" in op && !("value" in op);
const isSearch = (op: Operation): op is SearchOperation => "namespacePrefix" in op;
const isList = (op: Operation): op is ListNamespacesOperation => "matchConditions" in op || ("limit" in op && "offset" in op && !("namespacePrefix" in op));

/**
 * SplStore is a LangGraph store that keeps its items in spl: pass it as
 * `store` to `compile`, or use it directly (get, put, delete, search,
 * listNamespaces, batch). Items are durable when put resolves, shared by
 * every process on the same spl, and verified when read. Semantic search
 * (an `index` of embeddings) is not supported: a search's `query` is
 * ignored, as InMemoryStore ignores it without an index.
 */
export class SplStore extends BaseStore {
  readonly client: Client;
  readonly prefix: string;
  private readonly actor?: string;
  private readonly deleteReason: string;
  private readonly ttlMinutes?: number;
  private readonly sweepMs: number;
  private sweeper?: NodeJS.Timeout;
  /** By thread. */
  private readonly folded = new Map<string, FoldedNamespace>();
  private readonly busy = new Map<string, Promise<void>>();

  constructor(client: Client, opts: SplStoreOptions = {}) {
    super();
    if (opts.ttlMinutes !== undefined && !(opts.ttlMinutes > 0)) throw new RangeError(`spl store: ttlMinutes must be a positive number of minutes, got ${opts.ttlMinutes}`);
    this.client = client;
    this.prefix = opts.prefix ?? "langgraph-store/";
    this.actor = opts.actor;
    this.deleteReason = opts.deleteReason ?? "langgraph store delete";
    this.ttlMinutes = opts.ttlMinutes;
    this.sweepMs = (opts.sweepIntervalMinutes ?? 60) * 60_000;
  }

  /** threadOf names the spl thread of a namespace. */
  threadOf(namespace: string[]): string {
    const t = this.prefix + JSON.stringify(namespace);
    if (Buffer.byteLength(t) <= MAX_THREAD_BYTES) return t;
    return `${this.prefix}#${createHash("sha256").update(JSON.stringify(namespace)).digest("hex")}`;
  }

  /** namespaceOf reads a namespace from its thread's name; undefined for a hashed one. */
  private namespaceOf(thread: string): string[] | undefined {
    const rest = thread.slice(this.prefix.length);
    if (!rest.startsWith("[")) return undefined;
    try {
      const ns = JSON.parse(rest);
      return Array.isArray(ns) && ns.every((l) => typeof l === "string") ? ns : undefined;
    } catch {
      return undefined;
    }
  }

  async batch<Op extends readonly Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    // Every operation is checked before anything is read or written.
    for (const op of operations) this.check(op);
    const now = Date.now();
    // Reads first, against the store as it is before this batch's puts
    // (InMemoryStore's order).
    const needAll = operations.some((op) => isSearch(op) || isList(op));
    if (needAll) await this.catchUpAll();
    else await Promise.all([...new Set(operations.filter(isGet).map((op) => this.threadOf(op.namespace)))].map((t) => this.catchUp(t)));
    const results: unknown[] = operations.map((op) => {
      if (isPut(op)) return null; // as InMemoryStore answers a put
      if (isGet(op)) return this.getItem(op, now);
      if (isSearch(op)) return this.searchItems(op, now);
      return this.listNamespacesOf(op as ListNamespacesOperation, now);
    });
    // Then the puts: the last for a key wins; all at once (one request).
    const puts = new Map<string, SplPutOperation>();
    for (const op of operations) if (isPut(op)) puts.set(JSON.stringify([op.namespace, op.key]), op);
    if (puts.size) {
      await Promise.all([...new Set([...puts.values()].filter((p) => p.value === null).map((p) => this.threadOf(p.namespace)))].map((t) => this.catchUp(t)));
      await Promise.all([...puts.values()].map((p) => this.write(p, now)));
    }
    return results as OperationResults<Op>;
  }

  /** check refuses a malformed operation, naming what is wrong. */
  private check(op: Operation): void {
    if (isPut(op)) {
      validateNamespace(op.namespace, { allowReservedRoot: true });
      this.checkKey(op.key);
      if (op.value !== null) {
        if (typeof op.value !== "object" || Array.isArray(op.value)) throw new TypeError(`spl store: put ${JSON.stringify(op.namespace)} ${JSON.stringify(op.key)}: value must be an object or null, got ${Array.isArray(op.value) ? "an array" : typeof op.value}`);
        const p = jsonProblem(op.value);
        if (p) throw new TypeError(`spl store: put ${JSON.stringify(op.namespace)} ${JSON.stringify(op.key)}: ${p}`);
      }
      if (op.ttl !== undefined && op.ttl !== null && !(op.ttl > 0)) throw new RangeError(`spl store: put ${JSON.stringify(op.key)}: ttl must be a positive number of minutes or null, got ${op.ttl}`);
      if (op.index !== undefined && op.index !== false) throw new Error("spl store: put: index is not supported (SplStore has no semantic search)");
    } else if (isGet(op)) {
      validateNamespace(op.namespace, { allowReservedRoot: true });
      this.checkKey(op.key);
    } else if (isSearch(op)) {
      if (op.namespacePrefix.length) validateNamespace(op.namespacePrefix, { allowReservedRoot: true });
      if (op.filter !== undefined && (typeof op.filter !== "object" || op.filter === null || Array.isArray(op.filter))) throw new TypeError("spl store: search: filter must be an object");
    } else if (!isList(op)) {
      throw new TypeError(`spl store: unknown operation ${JSON.stringify(op)}`);
    }
  }

  private checkKey(key: unknown): void {
    if (typeof key !== "string" || key === "") throw new InvalidNamespaceError(`spl store: key must be a non-empty string, got ${JSON.stringify(key)}`);
  }

  private live(it: FoldedItem, now: number): boolean {
    return it.expiresAt === undefined || it.expiresAt > now;
  }

  private toItem(ns: string[], key: string, it: FoldedItem): Item {
    return { value: structuredClone(it.value), key, namespace: [...ns], createdAt: new Date(it.createdAt), updatedAt: new Date(it.updatedAt) };
  }

  private getItem(op: GetOperation, now: number): Item | null {
    const f = this.folded.get(this.threadOf(op.namespace));
    const it = f?.items.get(op.key);
    return it && this.live(it, now) ? this.toItem(op.namespace, op.key, it) : null;
  }

  /** The namespaces folded, oldest first. */
  private namespaces(): FoldedNamespace[] {
    return [...this.folded.values()].filter((f) => f.items.size > 0).sort((a, b) => a.first - b.first);
  }

  private searchItems(op: SearchOperation, now: number): SearchItem[] {
    const pre = op.namespacePrefix;
    const out: SearchItem[] = [];
    for (const f of this.namespaces()) {
      if (pre.length > f.namespace.length || !pre.every((l, i) => f.namespace[i] === l)) continue;
      for (const [key, it] of f.items) {
        if (!this.live(it, now) || (op.filter && !matchesFilter(it.value, op.filter))) continue;
        out.push({ ...this.toItem(f.namespace, key, it), score: undefined });
      }
    }
    const offset = op.offset ?? 0, limit = op.limit ?? 10;
    return out.slice(offset, offset + limit);
  }

  private listNamespacesOf(op: ListNamespacesOperation, now: number): string[][] {
    let nss = this.namespaces().filter((f) => [...f.items.values()].some((it) => this.live(it, now))).map((f) => f.namespace);
    if (op.matchConditions?.length) nss = nss.filter((ns) => op.matchConditions!.every((c) => matchesCondition(c, ns)));
    if (op.maxDepth !== undefined) {
      const seen = new Map<string, string[]>();
      for (const ns of nss) {
        const cut = ns.slice(0, op.maxDepth);
        seen.set(JSON.stringify(cut), cut);
      }
      nss = [...seen.values()];
    }
    nss.sort((a, b) => a.join(":").localeCompare(b.join(":")));
    const offset = op.offset ?? 0;
    return nss.slice(offset, op.limit === undefined ? undefined : offset + op.limit);
  }

  /** write stores one put: a record, or for null the erasure of the key's records. */
  private async write(p: SplPutOperation, now: number): Promise<void> {
    const thread = this.threadOf(p.namespace);
    if (p.value === null) {
      const it = this.folded.get(thread)?.items.get(p.key);
      if (!it) return;
      await this.client.erase(thread, { ids: it.ids, reason: this.deleteReason, actor: this.actor });
      return;
    }
    const ttl = p.ttl === undefined ? this.ttlMinutes : p.ttl ?? undefined;
    const body: Record<string, unknown> = { namespace: p.namespace, key: p.key, value: p.value };
    if (ttl !== undefined) body.expires_ts = now + Math.round(ttl * 60_000);
    await this.client.emit({ act: "KNOW", kind: KIND_STORE_ITEM, thread, actor: this.actor, body });
  }

  /** catchUpAll lists the store's namespaces and brings each changed one up to date. */
  private async catchUpAll(): Promise<void> {
    const t = await this.client.threads({ kind: KIND_STORE_ITEM, limit: MAX_LISTED });
    const mine = t.threads.filter((x) => typeof x.thread === "string" && x.thread.startsWith(this.prefix));
    if (t.threads.length >= MAX_LISTED) {
      throw new Error(`spl store: the server lists at most ${MAX_LISTED} threads of kind ${KIND_STORE_ITEM}; this store cannot search or list more namespaces`);
    }
    const listed = new Set(mine.map((x) => x.thread as string));
    const stale = mine.filter((x) => (this.folded.get(x.thread)?.clock ?? 0) < x.last_clock).map((x) => x.thread as string);
    // One folded before but no longer listed had its items erased: read
    // what is left, and forget it when nothing is.
    const gone = [...this.folded.keys()].filter((th) => !listed.has(th));
    await Promise.all([...stale.map((th) => this.catchUp(th)), ...gone.map(async (th) => {
      await this.catchUp(th);
      if (this.folded.get(th)?.items.size === 0) this.folded.delete(th);
    })]);
  }

  /** catchUp folds the records of one thread written since the last call, one call at a time per thread. */
  private catchUp(thread: string): Promise<void> {
    return inTurn(this.busy, thread, () => this.fold(thread));
  }

  /** fold reads a thread's new records and folds them in; an erasure makes it read the thread again. */
  private async fold(thread: string): Promise<void> {
    let f = this.folded.get(thread);
    const from = (f?.clock ?? 0) + 1;
    const recs: SplRecord[] = await this.client.query_thread({ thread, from });
    if (f && recs.some((r) => r.kind === KIND_ERASURE)) {
      // Items were deleted: read what is left.
      this.folded.delete(thread);
      return this.fold(thread);
    }
    if (!f) {
      f = { namespace: this.namespaceOf(thread) ?? [], clock: 0, first: 0, items: new Map() };
      this.folded.set(thread, f);
    }
    for (const r of recs) {
      f.clock = r.clock;
      if (r.kind !== KIND_STORE_ITEM) continue;
      const b = r.storedBody as { namespace?: unknown; key?: unknown; value?: unknown; expires_ts?: unknown };
      if (!Array.isArray(b.namespace) || typeof b.key !== "string" || typeof b.value !== "object" || b.value === null || Array.isArray(b.value)) continue; // not an item this store wrote
      if (f.namespace.length === 0) f.namespace = b.namespace as string[];
      if (f.first === 0) f.first = r.clock;
      const expiresAt = typeof b.expires_ts === "number" ? b.expires_ts : undefined;
      const it = f.items.get(b.key);
      if (it) {
        it.value = b.value as Record<string, any>;
        it.updatedAt = r.ts;
        it.expiresAt = expiresAt;
        it.ids.push(r.id);
      } else {
        f.items.set(b.key, { value: b.value as Record<string, any>, createdAt: r.ts, updatedAt: r.ts, expiresAt, ids: [r.id] });
      }
    }
  }

  /**
   * put stores value under namespace and key (null deletes it), with
   * LangGraph's checks of the namespace; ttl (minutes, null for none)
   * overrides the store's ttlMinutes for this item.
   */
  override async put(namespace: string[], key: string, value: Record<string, any>, index?: false | string[], ttl?: number | null): Promise<void> {
    validateNamespace(namespace);
    await this.batch([{ namespace, key, value, index, ttl } as SplPutOperation]);
  }

  /**
   * sweep erases the items whose time to live has passed (those this
   * store can see: it lists every namespace) and returns how many.
   */
  async sweep(): Promise<number> {
    await this.catchUpAll();
    const now = Date.now();
    let n = 0;
    for (const [thread, f] of this.folded) {
      const ids = [...f.items.values()].filter((it) => !this.live(it, now)).flatMap((it) => it.ids);
      if (!ids.length) continue;
      n += [...f.items.values()].filter((it) => !this.live(it, now)).length;
      await this.client.erase(thread, { ids, reason: "ttl", actor: this.actor });
    }
    return n;
  }

  /** start sweeps expired items every sweepIntervalMinutes, when the store has a TTL. */
  override start(): void {
    if (this.ttlMinutes === undefined || this.sweeper) return;
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), this.sweepMs);
    this.sweeper.unref();
  }

  /** stop ends the sweeps start began. */
  override stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
