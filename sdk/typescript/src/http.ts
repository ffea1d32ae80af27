// A small HTTP/1.1 client on node:net: keep-alive connections in a pool,
// one request at a time on each. Measured against spl serve on loopback,
// node:http's client costs about 0.1 ms a request more than a socket
// carrying the same bytes, as much as the rest of a latest-checkpoint
// read; this client writes each request in one piece and parses only
// what spl serve answers (a status line, headers, a body of
// Content-Length bytes or chunked).
import { connect, type Socket } from "node:net";

/** An answer: its status and body. */
export interface Answer {
  status: number;
  body: Buffer;
}

/**
 * A connection left idle this long is closed rather than reused, so that
 * it is never one the server is closing at the same moment (spl serve
 * closes idle connections after 120 s by default).
 */
const IDLE_MS = 30_000;

/** What one connection is waiting for. */
interface Waiter {
  resolve: (a: Answer) => void;
  reject: (e: Error) => void;
  started: boolean; // a byte of the answer arrived
}

class Conn {
  readonly sock: Socket;
  // What arrived of the current answer: buf[0:len], buf grown by doubling
  // so that an answer of n bytes costs O(n) copies, not one per packet.
  private buf: Buffer = Buffer.alloc(0);
  private len = 0;
  // The fewest bytes the answer can be complete in (parse's hint): no
  // parse before they are here.
  private need = 0;
  // buf when it is memory the connection does not own (a packet, or the
  // rest after an answer): copied before anything is written into it.
  private shared: Buffer | undefined;
  private waiter?: Waiter;
  private closed?: Error;
  onIdle?: (c: Conn) => void;

  constructor(sock: Socket) {
    this.sock = sock;
    sock.setNoDelay(true);
    sock.on("data", (d: Buffer) => this.data(d));
    sock.on("error", (e) => this.close(e));
    sock.on("close", () => this.close(new Error("spl: the server closed the connection")));
    sock.on("timeout", () => sock.destroy()); // idle too long
  }

  get usable(): boolean {
    return !this.closed && !this.sock.destroyed;
  }

  send(data: Buffer): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      this.waiter = { resolve, reject, started: false };
      this.sock.setTimeout(0);
      this.sock.ref();
      this.sock.write(data);
    });
  }

  /** started reports whether any byte of the current answer arrived. */
  get started(): boolean {
    return this.waiter?.started ?? false;
  }

  private close(e: Error): void {
    this.closed ??= e;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(e);
    this.sock.destroy();
  }

  private data(d: Buffer): void {
    const w = this.waiter;
    if (!w) {
      this.close(new Error("spl: the server sent data with no request waiting"));
      return;
    }
    w.started = true;
    if (this.len === 0) {
      this.buf = d;
      this.len = d.length;
    } else {
      if (this.len + d.length > this.buf.length || this.buf === this.shared) {
        const grown = Buffer.allocUnsafe(Math.max(this.len + d.length, 2 * this.buf.length));
        this.buf.copy(grown, 0, 0, this.len);
        this.buf = grown;
      }
      d.copy(this.buf, this.len);
      this.len += d.length;
    }
    this.shared = this.len === d.length ? d : undefined;
    if (this.len < this.need) return; // more to come
    let a: ReturnType<typeof parse>;
    try {
      a = parse(this.buf.subarray(0, this.len));
    } catch (e) {
      this.close(e as Error);
      return;
    }
    if (typeof a === "number") {
      this.need = a; // more to come
      return;
    }
    this.buf = a.rest;
    this.len = a.rest.length;
    this.shared = a.rest;
    this.need = 0;
    this.waiter = undefined;
    if (a.keep && !a.rest.length) {
      this.sock.unref(); // an idle connection does not keep the process alive
      this.sock.setTimeout(IDLE_MS);
      this.onIdle?.(this);
    } else {
      this.closed = new Error("spl: connection closed");
      this.sock.destroy();
    }
    w.resolve(a.answer);
  }
}

/**
 * parse reads one answer from the start of b. Until b holds all of it,
 * it returns the fewest bytes b must hold before the answer can be
 * whole (so that a long answer is not parsed again for every packet);
 * it throws on what is not HTTP/1.1.
 */
function parse(b: Buffer): { answer: Answer; keep: boolean; rest: Buffer } | number {
  const end = b.indexOf("\r\n\r\n");
  if (end < 0) {
    if (b.length > 1 << 16) throw new Error("spl: answer headers over 64 KiB");
    return b.length + 1;
  }
  const lines = b.toString("latin1", 0, end).split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`spl: not an HTTP answer: ${JSON.stringify(lines[0].slice(0, 80))}`);
  let length = -1;
  let chunked = false;
  let keep = lines[0].startsWith("HTTP/1.1");
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const c = line.indexOf(":");
    if (c < 0) continue;
    const k = line.slice(0, c).trim().toLowerCase();
    const v = line.slice(c + 1).trim().toLowerCase();
    if (k === "content-length") length = Number(v);
    else if (k === "transfer-encoding") chunked = v.split(",").map((s) => s.trim()).includes("chunked");
    else if (k === "connection") keep = !v.split(",").map((s) => s.trim()).includes("close");
  }
  const status = Number(m[1]);
  let off = end + 4;
  if (chunked) {
    const parts: Buffer[] = [];
    for (;;) {
      const le = b.indexOf("\r\n", off);
      if (le < 0) return b.length + 1;
      const size = parseInt(b.toString("latin1", off, le).split(";")[0], 16);
      if (!Number.isFinite(size) || size < 0) throw new Error("spl: bad chunk size in the answer");
      off = le + 2;
      if (size === 0) {
        // Trailers (none from spl serve), then the empty line.
        const te = b.indexOf("\r\n", off);
        if (te < 0) return b.length + 1;
        if (te !== off) {
          const tend = b.indexOf("\r\n\r\n", off);
          if (tend < 0) return b.length + 1;
          off = tend + 4;
        } else off = te + 2;
        return { answer: { status, body: Buffer.concat(parts) }, keep, rest: b.subarray(off) };
      }
      if (b.length < off + size + 2) return off + size + 2;
      parts.push(b.subarray(off, off + size));
      off += size + 2;
    }
  }
  if (length < 0) {
    // No length: the body runs to the end of the connection. spl serve
    // always sends one of the two; refuse rather than guess.
    if (status === 204 || status === 304) return { answer: { status, body: Buffer.alloc(0) }, keep, rest: b.subarray(off) };
    throw new Error("spl: an answer without Content-Length or chunked encoding");
  }
  if (b.length < off + length) return off + length;
  return { answer: { status, body: b.subarray(off, off + length) }, keep, rest: b.subarray(off + length) };
}

/** HTTP is a pool of keep-alive connections to one server. */
export class HTTP {
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  private idle: Conn[] = [];
  private closed = false;

  constructor(url: string) {
    const u = new URL(url);
    if (u.protocol !== "http:") throw new Error(`spl: only http:// URLs, got ${url}`);
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(u.port || 80);
    this.hostHeader = u.host;
  }

  /**
   * request sends one request (path with its query) and answers the
   * status and body. A request that a reused connection fails before any
   * byte of the answer came is sent again, on a new connection, when the
   * method is idempotent (GET, PUT, DELETE): the server may have
   * closed the connection as it was taken; so is any request the caller
   * says is safe to send again (retrySafe: the routes of runs). Any other
   * failure is the caller's: an append that fails may or may not have
   * landed.
   */
  async request(method: string, path: string, headers: Record<string, string>, body?: Buffer, retrySafe = false): Promise<Answer> {
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\n`;
    for (const k in headers) head += `${k}: ${headers[k]}\r\n`;
    if (body !== undefined) head += `Content-Length: ${body.length}\r\n`;
    head += "\r\n";
    const data = body !== undefined && body.length ? Buffer.concat([Buffer.from(head, "latin1"), body]) : Buffer.from(head, "latin1");
    for (;;) {
      const [c, reused] = await this.conn();
      try {
        return await c.send(data);
      } catch (e) {
        if (reused && !c.started && (retrySafe || method === "GET" || method === "PUT" || method === "DELETE")) continue;
        throw e;
      }
    }
  }

  private async conn(): Promise<[Conn, boolean]> {
    if (this.closed) throw new Error("spl: the client is closed");
    while (this.idle.length) {
      const c = this.idle.pop()!;
      if (c.usable) return [c, true];
    }
    const sock = connect({ host: this.host, port: this.port });
    await new Promise<void>((resolve, reject) => {
      const failed = (e: Error) => reject(e);
      sock.once("error", failed);
      sock.once("connect", () => {
        sock.off("error", failed);
        resolve();
      });
    });
    const c = new Conn(sock);
    c.onIdle = (x) => {
      if (this.closed) x.sock.destroy();
      else this.idle.push(x);
    };
    return [c, false];
  }

  /** close closes the idle connections; those in use close when their answer is in. */
  close(): void {
    this.closed = true;
    for (const c of this.idle) c.sock.destroy();
    this.idle = [];
  }
}
