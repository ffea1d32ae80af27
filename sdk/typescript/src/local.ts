// Starting or joining the local spl: with no URL given, the SDK uses the
// spl serve of the default data directory ($SPL_HOME, else ~/.spl),
// starting one through the spl binary when none answers. spl serve writes
// its bound HTTP address to <home>/serve-http.addr (--http-addr-file).
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export const ADDR_FILE = "serve-http.addr";

async function answers(url: string, token?: string): Promise<boolean> {
  try {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    const r = await fetch(url + "/healthz", { headers, signal: AbortSignal.timeout(2000) });
    await r.arrayBuffer();
    return r.status === 200 || r.status === 503 || r.status === 401;
  } catch {
    return false;
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

/**
 * localURL returns the URL of the local spl serve of home, starting
 * `spl serve --listen 127.0.0.1:0 --http 127.0.0.1:0 --http-addr-file …`
 * (detached: it outlives this process, for the next session to join) when
 * none answers.
 */
export async function localURL(opts: { home?: string; bin?: string; token?: string; timeoutMs?: number }): Promise<string> {
  const home = opts.home ?? process.env.SPL_HOME ?? join(homedir(), ".spl");
  const known = await readAddr(home);
  if (known && (await answers(known, opts.token))) return known;
  const bin = opts.bin ?? process.env.SPL_BIN ?? "spl";
  const child = spawn(bin, ["serve", "--home", home, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-addr-file", join(home, ADDR_FILE)], {
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
  const deadline = Date.now() + (opts.timeoutMs ?? 15000);
  while (Date.now() < deadline) {
    if (failed) throw failed;
    const url = await readAddr(home);
    if (url && (await answers(url, opts.token))) return url;
    if (exited !== null) {
      // Another process may have started it first; look again once.
      const again = await readAddr(home);
      if (again && (await answers(again, opts.token))) return again;
      throw new Error(`${bin} serve exited with code ${exited} (is the data directory ${home} in use by an spl process without serve?)`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${bin} serve did not report its address within the timeout`);
}
