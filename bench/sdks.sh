#!/usr/bin/env bash
# The SDKs over spl serve on loopback, beside Go over the same server in the
# same run, in two tables:
#  - records (bench/sdkhttp: Go's net/http, verifying as the SDKs do): one
#    writer's durable emit p50, 64 concurrent emitters' records/s, the
#    latest checkpoint's p50;
#  - durable runs (bench/sdkruns: the Go SDK over the NATS door; the SDKs
#    over the HTTP run routes): a durable effect's p50, a write-behind
#    checkpoint's p50 (the call), 64 concurrent runs' steps/s (a step: a
#    checkpoint, an effect, a checkpoint).
# Writes a markdown report to bench/results/ (or to $OUT). Needs
# sdk/typescript built (npm ci && npm run build).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/spl" ./cmd/spl
go build -o "$tmp/sdkhttp" ./bench/sdkhttp
go build -o "$tmp/sdkruns" ./bench/sdkruns
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/spl" serve --home "$tmp/home" --listen "127.0.0.1:$port" --http 127.0.0.1:0 --http-addr-file "$tmp/addr" --log-level warn 2>"$tmp/log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/addr" ] && break; sleep 0.05; done
export SPL_URL="http://$(cat "$tmp/addr")"
# The write token spl serve created on its first start: it authenticates
# by default, and every client here sends it (NATS and HTTP).
export SPL_TOKEN=$(cat "$tmp/home/token")
go=$("$tmp/sdkhttp")
ts=$(cd sdk/typescript && node bench/bench.mjs)
py=$(cd sdk/python && PYTHONPATH=src python3 bench.py)
goruns=$(SPL_SERVER="nats://127.0.0.1:$port" "$tmp/sdkruns")
tsruns=$(cd sdk/typescript && node bench/runs.mjs)
pyruns=$(cd sdk/python && PYTHONPATH=src python3 bench_runs.py)
out=${OUT:-bench/results/sdks-$(date -u +%Y-%m-%d).md}
python3 - "$go" "$ts" "$py" "$goruns" "$tsruns" "$pyruns" >"$out" <<'PY'
import json, sys, platform, os
g, t, p, gr, tr, pr = (json.loads(a) for a in sys.argv[1:7])
def row(base, name, key, unit, higher, per):
    def r(x):
        ratio = (base[key] / x[key]) if higher else (x[key] / base[key])
        return f"{x[key]:.3g} ({ratio:.2f}× Go's {per if higher else 'time'})"
    return lambda x, y: f"| {name} | {base[key]:.3g} {unit} | {r(x)} | {r(y)} |"
print("# The SDKs over spl serve (loopback)\n")
print(f"`bench/sdks.sh`, one run, {os.cpu_count()} cores shared with other work; Node {os.popen('node --version').read().strip()}, Python {platform.python_version()}. Ratios are the SDK's time over Go's (a rate: Go's over the SDK's); 1.5× is the target.\n")
print("## Records\n")
print("Go is `bench/sdkhttp` (net/http, keep-alive) over the same server in the same run: Go over HTTP, not sdk.Connect over NATS, so that the three pay the same HTTP path; it reads the latest checkpoint with `?envelope=true` and verifies it (records.Unmarshal + Verify) as the SDKs do.\n")
print("| figure | Go (HTTP) | TypeScript | Python |\n| --- | --- | --- | --- |")
print(row(g, "one writer's durable emit, p50", "emit_p50_ms", "ms", False, "")(t, p))
print(row(g, "64 concurrent emitters, records/s", "concurrent_rps", "rec/s", True, "time per record")(t, p))
print(row(g, "latest checkpoint (verified), p50", "latest_p50_ms", "ms", False, "")(t, p))
print("\n## Durable runs\n")
print("Go is the Go SDK over spl serve's NATS door (`bench/sdkruns`); TypeScript and Python their SDKs over the HTTP run routes. A write-behind checkpoint also has an absolute target: under 50 µs.\n")
print("| figure | Go | TypeScript | Python |\n| --- | --- | --- | --- |")
print(row(gr, "a durable effect, p50", "effect_p50_ms", "ms", False, "")(tr, pr))
print(row(gr, "a write-behind checkpoint (the call), p50", "checkpoint_p50_us", "µs", False, "")(tr, pr))
print(row(gr, "64 concurrent runs, steps/s", "concurrent_steps_per_s", "steps/s", True, "time per step")(tr, pr))
PY
cat "$out"
