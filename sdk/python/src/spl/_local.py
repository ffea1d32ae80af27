"""Starting or joining the local spl: with no URL given, the SDK uses the
spl serve of the default data directory ($SPL_HOME, else ~/.spl), starting
one through the spl binary when none answers. spl serve writes its bound
HTTP address to <home>/serve-http.addr (--http-addr-file)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

from ._http import HTTP

ADDR_FILE = "serve-http.addr"


def _read_addr(home: str) -> str | None:
    try:
        with open(os.path.join(home, ADDR_FILE)) as f:
            a = f.read().strip()
        return f"http://{a}" if a else None
    except OSError:
        return None


async def _answers(url: str) -> bool:
    h = HTTP(url)
    try:
        r = await asyncio.wait_for(h.request("GET", "/healthz"), 2)
        return r.status in (200, 401, 503)
    except (OSError, asyncio.TimeoutError, ConnectionError, ValueError):
        return False
    finally:
        await h.close()


def local_token(home: str | None = None) -> str | None:
    """The write token the local spl serve created in its data directory
    (<home>/token, mode 0600: readable by the directory's owner only);
    None when there is none."""
    home = home or os.environ.get("SPL_HOME") or os.path.join(os.path.expanduser("~"), ".spl")
    try:
        with open(os.path.join(home, "token")) as f:
            return f.read().strip() or None
    except OSError:
        return None


async def local_url(home: str | None = None, binary: str | None = None, timeout: float = 15) -> str:
    """The URL of the local spl serve of home, started (detached, so it
    outlives this process for the next session to join) when none answers."""
    home = home or os.environ.get("SPL_HOME") or os.path.join(os.path.expanduser("~"), ".spl")
    url = _read_addr(home)
    if url and await _answers(url):
        return url
    binary = binary or os.environ.get("SPL_BIN") or "spl"
    # spl serve makes the directory itself (0700) and refuses one that
    # others can change: nothing is made here.
    try:
        p = subprocess.Popen([binary, "serve", "--home", home, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                              "--http-addr-file", os.path.join(home, ADDR_FILE)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    except OSError as e:
        raise RuntimeError(f"start {binary} serve: {e} (install it from a clone of spl: go install ./cmd/spl, or set SPL_BIN)") from e
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        url = _read_addr(home)
        if url and await _answers(url):
            return url
        if p.poll() is not None:
            url = _read_addr(home)
            if url and await _answers(url):
                return url
            raise RuntimeError(f"{binary} serve exited with code {p.returncode} (is {home} in use by an spl process without serve?)")
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{binary} serve did not report its address within {timeout}s")
