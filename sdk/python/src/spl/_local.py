"""Starting or joining the local spl: with no URL given, the SDK uses the
spl serve of the default data directory ($SPL_HOME, else ~/.spl), starting
one through the spl binary when none answers. spl serve writes its bound
HTTP address to <home>/serve-http.addr (--http-addr-file).

That file outlives a server killed with -9, and another user's process may
then hold the port. So the SDK trusts a listener only once it has proved
it holds the directory's write token: /healthz answers a fresh random
challenge (Spl-Challenge) with HMAC-SHA256 of it keyed by the token
(Spl-Proof, see the server's serve/proof.go); the probe itself carries no
credentials. And it returns only once the server has opened its log, so
the first request is not refused as "starting"."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets
import subprocess
import time

from ._http import HTTP

ADDR_FILE = "serve-http.addr"
# The server the SDK starts exits once nobody used it this long
# (spl serve --idle-exit): it serves the next session, not the night.
def _idle_exit() -> str:
    return os.environ.get("SPL_IDLE_EXIT") or "10m"
PROOF_CONTEXT = b"spl healthz proof v1\n"


def _home(home: str | None) -> str:
    return home or os.environ.get("SPL_HOME") or os.path.join(os.path.expanduser("~"), ".spl")


def _read_addr(home: str) -> str | None:
    try:
        with open(os.path.join(home, ADDR_FILE)) as f:
            a = f.read().strip()
        return f"http://{a}" if a else None
    except OSError:
        return None


def proof(token: str, challenge: str) -> str:
    """The proof a server holding token gives of challenge (hex):
    HMAC-SHA256(token, "spl healthz proof v1\\n" + challenge)."""
    return hmac.new(token.encode(), PROOF_CONTEXT + challenge.encode(), hashlib.sha256).hexdigest()


async def _probe(url: str, token: str | None) -> str | None:
    """The health status of the spl serve at url when it is the one of the
    token's directory (it proved it holds token; any spl answer when there
    is no token to prove), else None: nothing answers, or a stranger."""
    h = HTTP(url)
    challenge = secrets.token_hex(32)
    try:
        r = await asyncio.wait_for(h.request("GET", "/healthz", headers={"Spl-Challenge": challenge}), 2)
        if r.status not in (200, 503):
            return None
        if token is not None and not hmac.compare_digest(r.headers.get("spl-proof", ""), proof(token, challenge)):
            return None
        body = r.json()
        return body.get("status") if isinstance(body, dict) else None
    except (OSError, asyncio.TimeoutError, ConnectionError, ValueError):
        return None
    finally:
        await h.close()


def local_token(home: str | None = None) -> str | None:
    """The write token the local spl serve created in its data directory
    (<home>/token, mode 0600: readable by the directory's owner only);
    None when there is none."""
    try:
        with open(os.path.join(_home(home), "token")) as f:
            return f.read().strip() or None
    except OSError:
        return None


async def _ready(home: str, deadline: float) -> str | None:
    """The URL of home's own server once its log is open; None when no
    server of home answers. A server of home still starting is waited for
    until deadline."""
    while True:
        url = _read_addr(home)
        status = await _probe(url, local_token(home)) if url else None
        if status is None:
            return None
        if status != "starting" or time.monotonic() >= deadline:
            return url
        await asyncio.sleep(0.05)


async def local_url(home: str | None = None, binary: str | None = None, timeout: float = 15) -> str:
    """The URL of the local spl serve of home, started (detached, so it
    outlives this process for the next session to join) when none answers."""
    home = _home(home)
    deadline = time.monotonic() + timeout
    url = await _ready(home, deadline)
    if url:
        return url
    binary = binary or os.environ.get("SPL_BIN") or "spl"
    # spl serve makes the directory itself (0700) and refuses one that
    # others can change: nothing is made here.
    try:
        p = subprocess.Popen([binary, "serve", "--home", home, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                              "--http-addr-file", os.path.join(home, ADDR_FILE), "--idle-exit", _idle_exit()],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    except OSError as e:
        raise RuntimeError(f"start {binary} serve: {e} (install it from a clone of spl: go install ./cmd/spl, or set SPL_BIN)") from e
    while time.monotonic() < deadline:
        url = await _ready(home, deadline)
        if url:
            return url
        if p.poll() is not None:
            # Another process may have started it first; look again once.
            url = await _ready(home, deadline)
            if url:
                return url
            raise RuntimeError(f"{binary} serve exited with code {p.returncode} (is {home} in use by an spl process without serve?)")
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{binary} serve did not report its address within {timeout}s")
