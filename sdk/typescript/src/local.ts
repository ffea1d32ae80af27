// Starting or joining the local spl: with no URL given, the SDK uses the
// spl serve of the default data directory ($SPL_HOME, else ~/.spl),
// starting one through the spl binary when none answers. spl serve writes
// its bound HTTP address to <home>/serve-http.addr (--http-addr-file).
//
// That file outlives a server killed with -9, and another user's process
// may then hold the port. So the SDK trusts a listener only once it has
// proved it holds the directory's write token: /healthz answers a fresh
// random challenge (Spl-Challenge) with HMAC-SHA256 of it keyed by the
// token (Spl-Proof, see the server's serve/proof.go); the probe itself
// carries no credentials. And it returns only once the server has opened
// its log, so the first request is not refused as "starting".
import { spawn } from "node:child_process";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export const ADDR_FILE = "serve-http.addr";
// The server the SDK starts exits once nobody used it this long
// (spl serve --idle-exit): it serves the next session, not the night.
const idleExit = () => process.env.SPL_IDLE_EXIT || "10m";
const PROOF_CONTEXT = "spl healthz proof v1\n";

/** proof is what a server holding token answers to challenge (hex). */
export function proof(token: string, challenge: string): string {
  return createHmac("sha256", token).update(PROOF_CONTEXT + challenge).digest("hex");
}

// probe returns the health status of the spl serve at url when it is the
// one of the token's directory (it proved it holds token; any spl answer
// when there is no token to prove), else undefined: nothing answers, or
// a stranger.
async function probe(url: string, token: string | undefined): Promise<string | undefined> {
  const challenge = randomBytes(32).toString("hex");
  try {
    const r = await fetch(url + "/healthz", { headers: { "spl-challenge": challenge }, signal: AbortSignal.timeout(2000) });
    const body = await r.text();
    if (r.status !== 200 && r.status !== 503) return undefined;
    if (token !== undefined) {
      const got = Buffer.from(r.headers.get("spl-proof") ?? "");
      const want = Buffer.from(proof(token, challenge));
      if (got.length !== want.length || !timingSafeEqual(got, want)) return undefined;
    }
    const h = JSON.parse(body) as { status?: unknown };
    return typeof h.status === "string" ? h.status : undefined;
  } catch {
    return undefined;
  }
}

async function readAddr(home: string): Promise<string | undefined> {
  try {
    const a = (await readFile(join(home, ADDR_FILE), "utf8")).trim();
    return a ? `http://${a}` : undefined;
  } catch {
    return undefined;
  }
}

/**
 * localToken reads the write token that the local spl serve created in
 * its data directory (<home>/token, mode 0600: readable by the user who
 * owns the directory only); undefined when there is none.
 */
export async function localToken(home?: string): Promise<string | undefined> {
  const dir = home ?? process.env.SPL_HOME ?? join(homedir(), ".spl");
  try {
    const t = (await readFile(join(dir, "token"), "utf8")).trim();
    return t || undefined;
  } catch {
    return undefined;
  }
}

// ready returns the URL of home's own server once its log is open;
// undefined when no server of home answers. A server of home still
// starting is waited for until deadline.
async function ready(home: string, deadline: number): Promise<string | undefined> {
  for (;;) {
    const url = await readAddr(home);
    const status = url ? await probe(url, await localToken(home)) : undefined;
    if (url === undefined || status === undefined) return undefined;
    if (status !== "starting" || Date.now() >= deadline) return url;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * localURL returns the URL of the local spl serve of home, starting
 * `spl serve --listen 127.0.0.1:0 --http 127.0.0.1:0 --http-addr-file …`
 * (detached: it outlives this process, for the next session to join) when
 * none answers. It trusts a listener only once it proved it holds the
 * directory's write token, and returns once the server's log is open.
 */
export async function localURL(opts: { home?: string; bin?: string; timeoutMs?: number }): Promise<string> {
  const home = opts.home ?? process.env.SPL_HOME ?? join(homedir(), ".spl");
  const deadline = Date.now() + (opts.timeoutMs ?? 15000);
  const known = await ready(home, deadline);
  if (known) return known;
  const bin = opts.bin ?? process.env.SPL_BIN ?? "spl";
  const child = spawn(bin, ["serve", "--home", home, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-addr-file", join(home, ADDR_FILE), "--idle-exit", idleExit()], {
    detached: true,
    stdio: "ignore",
  });
  let failed: Error | undefined;
  child.on("error", (e) => {
    failed = new Error(`start ${bin} serve: ${e.message} (install it from a clone of spl: go install ./cmd/spl, or set SPL_BIN)`);
  });
  let exited: number | null = null;
  child.on("exit", (code) => { exited = code; });
  child.unref();
  while (Date.now() < deadline) {
    if (failed) throw failed;
    const url = await ready(home, deadline);
    if (url) return url;
    if (exited !== null) {
      // Another process may have started it first; look again once.
      const again = await ready(home, deadline);
      if (again) return again;
      throw new Error(`${bin} serve exited with code ${exited} (is the data directory ${home} in use by an spl process without serve?)`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${bin} serve did not report its address within the timeout`);
}
