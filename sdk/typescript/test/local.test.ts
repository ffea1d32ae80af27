// The local spl with nothing set up: no SPL_URL and no token, connect
// starts spl serve on the data directory through the spl binary, and
// never hands the directory's token to a listener that cannot prove it
// holds it.
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connect } from "../src/index.js";
import { ADDR_FILE, proof } from "../src/local.js";

const bin = process.env.SPL_BIN;
const actor = "did:sync:agent:dev";

describe("proof", () => {
  it("matches the server's vectors", () => {
    const f = JSON.parse(readFileSync(new URL("../../../serve/testdata/proof.json", import.meta.url), "utf8"));
    expect(f.vectors.length).toBeGreaterThan(0);
    for (const v of f.vectors) expect(proof(v.token, v.challenge)).toBe(v.proof);
  });
});

// running reports whether pid runs: a process that exited but that its
// parent (this test, which spawned it) has not reaped is a zombie, and
// does not run.
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

async function stop(home: string, signal: NodeJS.Signals) {
  let pid: number;
  try {
    pid = JSON.parse(await readFile(join(home, "server.json"), "utf8")).pid;
    process.kill(pid, signal);
  } catch {
    return;
  }
  for (let i = 0; i < 200; i++) { // gone, so its port and its lock are free
    if (!running(pid)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.skipIf(!bin)("the local spl", () => {
  let parent: string, home: string, saved: string | undefined;
  beforeEach(async () => {
    parent = await mkdtemp(join(tmpdir(), "spl-local-"));
    home = join(parent, "spl"); // not there yet: spl makes it
    saved = process.env.SPL_URL;
    delete process.env.SPL_URL;
  });
  afterEach(async () => {
    if (saved !== undefined) process.env.SPL_URL = saved;
    await stop(home, "SIGTERM");
    await rm(parent, { recursive: true, force: true });
  });

  it("is started, written to at once, and joined by the next session", async () => {
    const c = await connect({ home, splBinary: bin, actor });
    await c.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread: "th_local",
      body: { summary: "Completed auth refactor", learnings: ["mutex pattern worked"] } });
    await c.close();
    const again = await connect({ home, splBinary: bin, actor });
    expect((await again.query_thread({ thread: "th_local" })).map((r) => r.storedBody.summary)).toEqual(["Completed auth refactor"]);
    await again.close();
  });

  it("exits once nobody used it for its idle time", async () => {
    const saved = process.env.SPL_IDLE_EXIT;
    process.env.SPL_IDLE_EXIT = "1s";
    try {
      const c = await connect({ home, splBinary: bin, actor });
      await c.emit({ act: "DO", kind: "agent.step", thread: "th_idle", body: { n: 1 } });
      await c.close();
    } finally {
      if (saved === undefined) delete process.env.SPL_IDLE_EXIT;
      else process.env.SPL_IDLE_EXIT = saved;
    }
    const pid = JSON.parse(await readFile(join(home, "server.json"), "utf8")).pid as number;
    let alive = true;
    for (let i = 0; i < 150 && alive; i++) { // 15 s at most
      await new Promise((r) => setTimeout(r, 100));
      alive = running(pid);
    }
    expect(alive).toBe(false);
  });

  it("never sends the token to a stranger on a dead server's port", async () => {
    const c = await connect({ home, splBinary: bin, actor });
    await c.emit({ act: "LEARN", kind: "agent.session.checkpoint", thread: "th_kill",
      body: { summary: "before the kill", learnings: ["a kill leaves the address file"] } });
    await c.close();
    await stop(home, "SIGKILL");
    const [host, port] = (await readFile(join(home, ADDR_FILE), "utf8")).trim().split(":");
    const token = (await readFile(join(home, "token"), "utf8")).trim();
    const seen: string[] = [];
    const stranger: Server = createServer((sock) => {
      sock.once("data", (d) => {
        seen.push(d.toString("latin1"));
        const body = '{"status":"ok","last_clock":0}';
        sock.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nSpl-Proof: ${"0".repeat(64)}\r\nConnection: close\r\n\r\n${body}`);
      });
    });
    let listening = false;
    for (let i = 0; i < 100 && !listening; i++) { // the port frees once the killed server is gone
      listening = await new Promise<boolean>((res) => {
        stranger.once("error", () => res(false));
        stranger.listen(Number(port), host, () => res(true));
      });
      if (!listening) await new Promise((r) => setTimeout(r, 50));
    }
    expect(listening).toBe(true);
    try {
      const again = await connect({ home, splBinary: bin, actor });
      expect((await again.query_thread({ thread: "th_kill" })).map((r) => r.storedBody.summary)).toEqual(["before the kill"]);
      await again.close();
    } finally {
      await new Promise((r) => stranger.close(r));
    }
    expect(seen.length).toBeGreaterThan(0);
    for (const head of seen) {
      expect(head).not.toContain(token);
      expect(head.toLowerCase()).not.toContain("authorization");
    }
  });
});
