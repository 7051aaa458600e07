"""Default names for cassettes and sessions, from the server command or the target URL.

Used by ``record`` (stdio and HTTP) and by the recording proxy, which names a session for each
MCP session it sees; it imports nothing from mcprec, so every layer may use it.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Sequence
from typing import Any
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

CASSETTE_ENV = "MCPREC_CASSETTE"
SESSION_ENV = "MCPREC_SESSION"
CASSETTE_DIR = "cassettes"

_LAUNCHERS = {
    "python", "python3", "node", "npx", "uv", "uvx", "run", "deno", "bun", "bunx", "pipx",
    "docker", "exec", "tool", "env",
}


def server_slug(argv: Sequence[str]) -> str:
    """A short readable name for a server command: ``npx -y @org/server-x`` -> ``server-x``."""
    for arg in argv:
        base = os.path.basename(arg)
        if not base or arg.startswith("-") or "=" in arg:
            continue
        name = re.sub(r"\.(py|js|mjs|cjs|ts|exe)$", "", base)
        if re.fullmatch(r"python[\d.]*|node[\d.]*", name) or name in _LAUNCHERS:
            continue
        if name in ("__main__", "index", "main", "server", "dist") and len(argv) > 1:
            parent = os.path.basename(os.path.dirname(arg.rstrip("/")))
            name = f"{parent}-{name}" if parent and parent != "." else name
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
        if slug:
            return slug[:48]
    return "session"


def host_slug(url: str) -> str:
    """The host of an HTTP target: ``http://api.example.com/mcp`` -> ``api-example-com``."""
    return (_split(url).hostname or "http").replace(".", "-")


def endpoint_slug(url: str) -> str:
    """Host and path of an HTTP target: ``http://api.example.com/v1/mcp`` ->
    ``api-example-com-v1-mcp`` (``-mcp`` when the path is ``/``)."""
    path = _split(url).path or "/"
    return f"{host_slug(url)}-{path.strip('/').replace('/', '-') or 'mcp'}"


def _split(url: str) -> Any:
    """``urlsplit`` of a target URL as shown (``http://[REDACTED]@host/…``, which urlsplit
    takes for a bad IPv6 literal): its userinfo is dropped first."""
    return urlsplit(re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@", r"\1", url))


def default_cassette(argv: Sequence[str]) -> Path:
    """``$MCPREC_CASSETTE``, or ``cassettes/<server>.db`` under the working directory."""
    env = os.environ.get(CASSETTE_ENV)
    if env:
        return Path(env)
    return Path(CASSETTE_DIR) / f"{server_slug(argv)}.db"


def default_http_cassette(target: str) -> Path:
    """``$MCPREC_CASSETTE``, or ``cassettes/<host>.db`` under the working directory."""
    env = os.environ.get(CASSETTE_ENV)
    if env:
        return Path(env)
    return Path(CASSETTE_DIR) / f"{host_slug(target)}.db"


def default_session_name(argv: Sequence[str] | str) -> str:
    """Unique and readable: ``<server>-20261202-142305-3f9a``."""
    slug = server_slug(argv) if not isinstance(argv, str) else argv
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{slug}-{stamp}-{secrets.token_hex(2)}"


def proxy_session_name(target: str, given: str | None, n: int) -> str:
    """The name of the ``n``-th session (from 1) recorded through a proxy to ``target``:
    ``given``, then ``given-2``, ``given-3``...; without one, a unique default each time."""
    if given:
        return given if n == 1 else f"{given}-{n}"
    return default_session_name(endpoint_slug(target))
