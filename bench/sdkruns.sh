#!/usr/bin/env bash
# Durable runs through each SDK against one spl serve on loopback, in one
# run: the Go SDK over the NATS door (bench/sdkruns), the TypeScript and
# Python SDKs over HTTP. Per SDK: a durable effect's p50, a write-behind
# checkpoint's p50 (the call), 64 concurrent runs' steps/s (a step: a
# checkpoint, an effect, a checkpoint). Writes a markdown table to
# bench/results/ (or to $OUT). Needs sdk/typescript built (npm ci && npm
# run build).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/spl" ./cmd/spl
go build -o "$tmp/sdkruns" ./bench/sdkruns
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/spl" serve --home "$tmp/home" --listen "127.0.0.1:$port" --http 127.0.0.1:0 --http-addr-file "$tmp/addr" --log-level warn 2>"$tmp/log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/addr" ] && break; sleep 0.05; done
export SPL_URL="http://$(cat "$tmp/addr")"
# The write token spl serve created on its first start: NATS and HTTP.
export SPL_TOKEN=$(cat "$tmp/home/token")
go=$(SPL_SERVER="nats://127.0.0.1:$port" "$tmp/sdkruns")
ts=$(cd sdk/typescript && node bench/runs.mjs)
py=$(cd sdk/python && PYTHONPATH=src python3 bench_runs.py)
out=${OUT:-bench/results/sdk-runs-$(date -u +%Y-%m-%d).md}
python3 - "$go" "$ts" "$py" >"$out" <<'PY'
import json, sys, platform, os
g, t, p = (json.loads(a) for a in sys.argv[1:4])
def row(name, key, unit, higher):
    def r(x):
        ratio = (g[key] / x[key]) if higher else (x[key] / g[key])
        return f"{x[key]:.3g} ({ratio:.2f}× Go's {'time' if not higher else 'time per step'})"
    return f"| {name} | {g[key]:.3g} {unit} | {r(t)} | {r(p)} |"
print("# Durable runs through the SDKs on spl serve (loopback)\n")
print(f"`bench/sdkruns.sh`, one run, {os.cpu_count()} cores shared with other work; Node {os.popen('node --version').read().strip()}, Python {platform.python_version()}.")
print("Go is the Go SDK over spl serve's NATS door (`bench/sdkruns`), TypeScript and Python their SDKs over the HTTP run routes, against the same server in the same run. Ratios are the SDK's time over Go's (steps/s: Go's over the SDK's); the targets are 1.5×, and a write-behind checkpoint under 50 µs.\n")
print("| figure | Go | TypeScript | Python |\n| --- | --- | --- | --- |")
print(row("a durable effect, p50", "effect_p50_ms", "ms", False))
print(row("a write-behind checkpoint (the call), p50", "checkpoint_p50_us", "µs", False))
print(row("64 concurrent runs, steps/s", "concurrent_steps_per_s", "steps/s", True))
PY
cat "$out"
