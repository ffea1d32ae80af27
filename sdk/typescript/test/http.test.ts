import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Client } from "../src/index.js";
import { HTTP } from "../src/http.js";

const actor = "did:sync:agent:dev";
let client: Client;

beforeAll(async () => {
  if (!process.env.SPL_URL) throw new Error("set SPL_URL to an spl serve (.ci/run starts one)");
  client = await connect({ actor });
});
afterAll(async () => {
  await client.close();
});

describe("the HTTP client, against spl serve", () => {
  it("reads answers of every size (spl serve sends those past 2 KiB chunked)", async () => {
    const thread = `th_sizes_${randomUUID().slice(0, 8)}`;
    const sizes = [0, 10, 3000, 100_000, 400_000];
    for (const n of sizes) await client.emit({ act: "DO", kind: "agent.step", thread, body: { text: "é".repeat(n / 2) } });
    const recs = await client.query_thread({ thread });
    expect(recs.map((r) => (r.storedBody.text as string).length)).toEqual(sizes.map((n) => n / 2));
    expect(recs.every((r) => r.verified)).toBe(true);
  });
  it("leaves no idle connection keeping the process alive", async () => {
    const script = `import { connect } from ${JSON.stringify(new URL("../dist/index.js", import.meta.url).href)};
      const c = await connect({ actor: ${JSON.stringify(actor)} });
      await c.emit({ act: "DO", kind: "agent.step", thread: "th_exit", body: {} });
      await c.health();`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => { child.kill(); resolve(null); }, 10_000);
      child.on("exit", (c) => { clearTimeout(t); resolve(c); });
    });
    expect(err).toBe("");
    expect(code).toBe(0);
  });
});

/**
 * A server that answers each request with the next of answers, written in
 * pieces of n bytes; "DROP" closes the connection instead.
 */
async function fake(answers: string[], n: number): Promise<{ url: string; close: () => void; requests: string[] }> {
  const requests: string[] = [];
  const socks: Socket[] = [];
  const srv = createServer((s) => {
    socks.push(s);
    let buf = "";
    s.on("data", async (d) => {
      buf += d.toString("latin1");
      while (buf.includes("\r\n\r\n")) {
        const i = buf.indexOf("\r\n\r\n");
        requests.push(buf.slice(0, i));
        buf = buf.slice(i + 4);
        const a = answers.shift() ?? "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
        if (a === "DROP") {
          s.destroy(); // read, not answered
          return;
        }
        for (let k = 0; k < a.length; k += n) {
          s.write(a.slice(k, k + n), "latin1");
          await new Promise((r) => setImmediate(r));
        }
        if (/connection: close/i.test(a)) s.end();
      }
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, requests, close: () => { socks.forEach((s) => s.destroy()); srv.close(); } };
}

describe("the HTTP client, parsing", () => {
  it("reads chunked and sized answers split anywhere, on one connection; a closing answer closes it", async () => {
    const f = await fake([
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n",
      "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nsame",
      "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew",
    ], 3);
    const h = new HTTP(f.url);
    try {
      const a = await h.request("GET", "/a", { authorization: "Bearer t" });
      expect([a.status, a.body.toString()]).toEqual([200, "hello, world"]);
      const b = await h.request("POST", "/b", {}, Buffer.from("{}"));
      expect([b.status, b.body.toString()]).toEqual([201, "same"]);
      const c = await h.request("GET", "/c", {});
      expect([c.status, c.body.toString()]).toEqual([404, "no"]);
      const d = await h.request("GET", "/d", {});
      expect([d.status, d.body.toString()]).toEqual([200, "new"]);
      expect(f.requests[0]).toMatch(/^GET \/a HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+\r\nauthorization: Bearer t$/);
      expect(f.requests[1]).toMatch(/Content-Length: 2$/);
    } finally {
      h.close();
      f.close();
    }
  });
  it("sends a GET again when a reused connection closes before answering, not a POST", async () => {
    const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    const f = await fake([ok, "DROP", ok, ok, "DROP", ok], 64);
    const h = new HTTP(f.url);
    try {
      await h.request("GET", "/warm", {});
      const get = await h.request("GET", "/again", {}); // dropped on the reused connection, then sent anew
      expect(get.body.toString()).toBe("ok");
      expect(f.requests.map((r) => r.split(" ")[1])).toEqual(["/warm", "/again", "/again"]);
      await h.request("GET", "/warm", {});
      const post = await h.request("POST", "/append", {}, Buffer.from("{}")).catch((e) => e);
      expect(post).toBeInstanceOf(Error); // it may have landed: the caller's to decide
      expect(f.requests.filter((r) => r.startsWith("POST")).length).toBe(1);
    } finally {
      h.close();
      f.close();
    }
  });
});
