import { describe, expect, it } from "vitest";
import { ConflictError, DiskFullError, errorOf, InvalidError, RunCancelledError, SplError, UnavailableError } from "../src/errors.js";

// The error answers of spl serve, as serve/http.go classify writes them,
// become the typed errors a caller tells apart with instanceof.
describe("errorOf", () => {
  it("types each answer by status, and a 409 by its code", () => {
    const disk = errorOf(507, { error: "spl/log: disk full: /srv/spl has 0 B free", code: "disk_full" });
    expect(disk).toBeInstanceOf(DiskFullError);
    expect(disk.message).toContain("disk full");
    expect(errorOf(503, { error: "append outcome unknown" })).toBeInstanceOf(UnavailableError);
    expect(errorOf(503, { error: "x" })).not.toBeInstanceOf(DiskFullError);
    const bad = errorOf(400, { error: "kind: bad", field: "kind", rule: "a dotted name" });
    expect(bad).toBeInstanceOf(InvalidError);
    expect([bad.field, bad.rule]).toEqual(["kind", "a dotted name"]);
    expect(errorOf(409, { error: "cancelled", code: "run_cancelled", cancel: { reason: "r", actor: "a", request: "q", clock: 3 } })).toBeInstanceOf(RunCancelledError);
    expect(errorOf(409, { error: "moved" })).toBeInstanceOf(ConflictError);
    const other = errorOf(418, undefined);
    expect(other).toBeInstanceOf(SplError);
    expect(other).not.toBeInstanceOf(DiskFullError);
  });
});
