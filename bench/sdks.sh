#!/usr/bin/env bash
# The SDKs over spl serve on loopback, beside Go over the same server in the
# same run (bench/sdkhttp: Go's net/http, verifying as the SDKs do): one
# writer's durable emit p50, 64 concurrent emitters' records/s, the latest
# checkpoint's p50. Writes a markdown table to bench/results/ (or to $OUT).
# Needs sdk/typescript built (npm ci && npm run build).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/spl" ./cmd/spl
go build -o "$tmp/sdkhttp" ./bench/sdkhttp
"$tmp/spl" serve --home "$tmp/home" --listen 127.0.0.1:0 --http 127.0.0.1:0 --http-addr-file "$tmp/addr" --log-level warn 2>"$tmp/log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/addr" ] && break; sleep 0.05; done
export SPL_URL="http://$(cat "$tmp/addr")"
# The write token spl serve created on its first start: it authenticates
# by default, and every client here sends it as a bearer token.
export SPL_TOKEN=$(cat "$tmp/home/token")
go=$("$tmp/sdkhttp")
ts=$(cd sdk/typescript && node bench/bench.mjs)
py=$(cd sdk/python && PYTHONPATH=src python3 bench.py)
out=${OUT:-bench/results/sdks-$(date -u +%Y-%m-%d).md}
python3 - "$go" "$ts" "$py" >"$out" <<'PY'
import json, sys, platform, os
g, t, p = (json.loads(a) for a in sys.argv[1:4])
def row(name, key, unit, higher):
    def r(x):
        ratio = (g[key] / x[key]) if higher else (x[key] / g[key])
        return f"{x[key]:.3g} ({ratio:.2f}× Go's {'time' if not higher else 'time per record'})"
    return f"| {name} | {g[key]:.3g} {unit} | {r(t)} | {r(p)} |"
print("# The SDKs over spl serve (loopback)\n")
print(f"`bench/sdks.sh`, one run, {os.cpu_count()} cores shared with other work; Node {os.popen('node --version').read().strip()}, Python {platform.python_version()}.")
print("Go is `bench/sdkhttp` (net/http, keep-alive) over the same server in the same run: Go over HTTP, not sdk.Connect over NATS, so that the three pay the same HTTP path; it reads the latest checkpoint with `?envelope=true` and verifies it (records.Unmarshal + Verify) as the SDKs do. Ratios are the SDK's time over Go's (records/s: Go's over the SDK's); 1.5× is the target.\n")
print("| figure | Go (HTTP) | TypeScript | Python |\n| --- | --- | --- | --- |")
print(row("one writer's durable emit, p50", "emit_p50_ms", "ms", False))
print(row("64 concurrent emitters, records/s", "concurrent_rps", "rec/s", True))
print(row("latest checkpoint (verified), p50", "latest_p50_ms", "ms", False))
PY
cat "$out"
