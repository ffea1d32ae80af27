// spl's MCP server through the official TypeScript MCP client: `spl mcp`
// over stdio on a data directory of its own, and spl serve's /mcp with
// its tokens. Each refusal is a tool error naming the field; what MCP
// wrote, the CLI reads.
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const bin = process.env.SPL_BIN;
const actor = "did:sync:agent:mcp";

type ToolResult = { isError?: boolean; content: { type: string; text?: string }[]; structuredContent?: any };
const text = (r: ToolResult) => r.content.map((c) => c.text ?? "").join("");
const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as ToolResult;

describe.skipIf(!bin)("spl mcp over stdio", () => {
  let home: string, client: Client;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), "spl-mcp-"));
    client = new Client({ name: "spl-test", version: "1.0.0" });
    await client.connect(new StdioClientTransport({ command: bin!, args: ["mcp"],
      env: { PATH: process.env.PATH ?? "", HOME: home, SPL_HOME: join(home, "spl"), SPL_ACTOR: actor }, stderr: "inherit" }));
  });
  afterAll(async () => {
    await client?.close();
    await rm(home, { recursive: true, force: true });
  });

  it("lists its tools, resources and prompts", async () => {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    for (const n of ["save_checkpoint", "latest_checkpoint", "list_session_checkpoints", "inspect_checkpoint", "list_resumable_sessions", "resume_session",
      "pause_session", "fork_session", "diff_checkpoints", "emit", "thread_tail", "search_threads", "list_runs", "get_run", "cancel_run", "signal_run"]) {
      expect(tools).toContain(n);
    }
    const save = (await client.listTools()).tools.find((t) => t.name === "save_checkpoint")!;
    expect(save.inputSchema.required).toEqual(expect.arrayContaining(["thread", "summary", "learnings"]));
    expect((await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate)).toEqual(
      expect.arrayContaining(["spl://checkpoint/{thread}/{ref}", "spl://session/{thread}", "spl://thread/{thread}"]));
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toEqual(expect.arrayContaining(["resume_work", "checkpoint_protocol"]));
  });

  it("saves a checkpoint and reads it back through the tool, the resource and the prompt; the CLI sees it", async () => {
    const saved = await call(client, "save_checkpoint", { thread: "th_mcp", summary: "Completed auth refactor",
      learnings: ["mutex pattern worked"], next_steps: ["Write migration tests"], name: "auth-done" });
    expect(saved.isError ?? false).toBe(false);
    const id = saved.structuredContent.id as string;
    const latest = await call(client, "latest_checkpoint", { thread: "th_mcp" });
    expect(latest.structuredContent.checkpoint.id).toBe(id);
    expect(text(latest)).toContain("mutex pattern worked");
    const res = await client.readResource({ uri: "spl://checkpoint/th_mcp/auth-done" });
    expect(JSON.parse((res.contents[0] as { text: string }).text).id).toBe(id);
    const prompt = await client.getPrompt({ name: "resume_work", arguments: { thread: "th_mcp" } });
    expect((prompt.messages[0].content as { text: string }).text).toContain("Completed auth refactor");
    const proto = await client.getPrompt({ name: "checkpoint_protocol" });
    expect((proto.messages[0].content as { text: string }).text).toContain("At the start of a session");
    // A failed session, resumed with a change to its memory.
    await call(client, "emit", { thread: "th_mcp", act: "LEARN", kind: "agent.session.failed", body: { error: "boom" } });
    const resumed = await call(client, "resume_session", { thread: "th_mcp", set: { retry: true } });
    expect(resumed.isError ?? false).toBe(false);
    expect(resumed.structuredContent.resumed_from).toBe(id);
    // The CLI, on the same data directory once the MCP server is gone.
    await client.close();
    const out = execFileSync(bin!, ["--json", "session", "show", "th_mcp"], { env: { ...process.env, SPL_HOME: join(home, "spl") } }).toString();
    expect(JSON.parse(out).summary).toBe("Completed auth refactor");
  });
});

describe.skipIf(!bin)("spl mcp resource subscriptions", () => {
  let home: string, client: Client;
  const updated: string[] = [];
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), "spl-mcp-"));
    client = new Client({ name: "spl-test", version: "1.0.0" });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updated.push(n.params.uri);
    });
    await client.connect(new StdioClientTransport({ command: bin!, args: ["mcp"],
      env: { PATH: process.env.PATH ?? "", HOME: home, SPL_HOME: join(home, "spl"), SPL_ACTOR: actor }, stderr: "inherit" }));
  });
  afterAll(async () => {
    await client?.close();
    await rm(home, { recursive: true, force: true });
  });
  it("notifies a subscribed thread's new records, and stops after unsubscribe", async () => {
    expect(client.getServerCapabilities()?.resources?.subscribe).toBe(true);
    const uri = "spl://thread/th_sub";
    await client.subscribeResource({ uri });
    const emit = () => call(client, "emit", { thread: "th_sub", act: "DO", kind: "agent.step", body: { n: 1 } });
    // A subscribe may be taken a moment after it returns: write until told.
    for (let i = 0; i < 40 && !updated.includes(uri); i++) {
      await emit();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(updated).toContain(uri);
    await client.unsubscribeResource({ uri });
    await new Promise((r) => setTimeout(r, 300));
    updated.length = 0;
    await emit();
    await new Promise((r) => setTimeout(r, 500));
    expect(updated).toEqual([]);
  });
});

describe.skipIf(!bin)("spl mcp refusals", () => {
  let home: string, client: Client;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), "spl-mcp-"));
    client = new Client({ name: "spl-test", version: "1.0.0" });
    await client.connect(new StdioClientTransport({ command: bin!, args: ["mcp"],
      env: { PATH: process.env.PATH ?? "", HOME: home, SPL_HOME: join(home, "spl"), SPL_ACTOR: actor }, stderr: "inherit" }));
  });
  afterAll(async () => {
    await client?.close();
    await rm(home, { recursive: true, force: true });
  });
  it("answers each refusal as a tool error naming the field", async () => {
    for (const [tool, args, field] of [
      ["save_checkpoint", { thread: "th_r", summary: "", learnings: ["l"] }, "summary"],
      ["latest_checkpoint", { thread: "th_unknown" }, "not found"],
      ["inspect_checkpoint", { thread: "th_r", ref: "" }, "ref"],
      ["emit", { thread: "th_r", act: "nope", kind: "agent.step", body: {} }, "act"],
    ] as [string, Record<string, unknown>, string][]) {
      const r = await call(client, tool, args);
      expect(r.isError, `${tool} ${JSON.stringify(args)}: ${text(r)}`).toBe(true);
      expect(text(r)).toContain(field);
    }
  });
});

const url = process.env.SPL_URL, token = process.env.SPL_TOKEN, readToken = process.env.SPL_READ_TOKEN;

describe.skipIf(!url || !token || !readToken)("spl serve's /mcp", () => {
  const connectWith = async (tok: string) => {
    const c = new Client({ name: "spl-test", version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(new URL(url + "/mcp"), { requestInit: { headers: { Authorization: `Bearer ${tok}` } } }));
    return c;
  };
  it("writes with the write token, only reads with the read token, and refuses no token", async () => {
    const thread = `th_mcp_${randomUUID().slice(0, 8)}`;
    const w = await connectWith(token!);
    const saved = await call(w, "save_checkpoint", { thread, summary: "over http", learnings: ["tokens hold"], actor });
    expect(saved.isError ?? false).toBe(false);
    await w.close();
    const r = await connectWith(readToken!);
    const tools = (await r.listTools()).tools;
    expect(tools.every((t) => t.annotations?.readOnlyHint)).toBe(true);
    expect(tools.map((t) => t.name)).not.toContain("save_checkpoint");
    expect(text(await call(r, "latest_checkpoint", { thread }))).toContain("over http");
    const refused = await r.callTool({ name: "save_checkpoint", arguments: { thread, summary: "s", learnings: ["l"], actor } }).then((x) => x as ToolResult, (e) => e as Error);
    expect(refused instanceof Error || (refused as ToolResult).isError).toBe(true);
    await r.close();
    await expect(connectWith("not a token at all, no")).rejects.toThrow();
  });
});
