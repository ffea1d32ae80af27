// LangGraph's own validation suite (@langchain/langgraph-checkpoint-validation),
// every suite, against SplSaver on the spl serve at SPL_URL.
import { randomUUID } from "node:crypto";
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { connect, type Client } from "../src/index.js";
import { SplSaver } from "../src/langgraph.js";

let client: Client;

validate({
  checkpointerName: "spl",
  async beforeAll() {
    client = await connect({ actor: "did:sync:agent:langgraph" });
  },
  createCheckpointer() {
    // A prefix per suite: list() across threads sees this suite's threads only.
    return new SplSaver(client, { prefix: `lg-${randomUUID().slice(0, 8)}/` });
  },
});
