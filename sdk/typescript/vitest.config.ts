import { defineConfig } from "vitest/config";

// The SDK's tests; they need SPL_URL (an spl serve; .ci/run starts one).
export default defineConfig({
  test: { include: ["test/**/*.test.ts"], testTimeout: 30000 },
});
