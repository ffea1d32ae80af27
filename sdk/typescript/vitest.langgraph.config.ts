import { defineConfig } from "vitest/config";

// LangGraph's validation suite for the checkpointer, against the spl serve
// at SPL_URL. The suite's command-line runner (1.1.1) cannot load an
// initializer; its library entry validate() runs here, with globals.
export default defineConfig({
  test: { include: ["test/langgraph.validation.ts"], globals: true, testTimeout: 60000, hookTimeout: 60000 },
});
