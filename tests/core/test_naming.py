"""Default cassette and session names, and the transports' independence from ``record``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcprec.naming import (
    default_http_cassette, endpoint_slug, host_slug, proxy_session_name, server_slug,
)


@pytest.mark.parametrize(("argv", "slug"), [
    (["python", "examples/weather_server.py"], "weather_server"),
    (["npx", "-y", "@org/server-x"], "server-x"),
    (["node", "pkg/dist/index.js"], "dist-index"),
    (["python", "-m"], "session"),
])
def test_server_slug(argv: list[str], slug: str) -> None:
    """A server command gives a short readable name, skipping launchers and flags."""
    assert server_slug(argv) == slug


@pytest.mark.parametrize(("url", "host", "endpoint"), [
    ("http://api.example.com:8000/mcp", "api-example-com", "api-example-com-mcp"),
    ("http://127.0.0.1:9000/v1/mcp/", "127-0-0-1", "127-0-0-1-v1-mcp"),
    ("http://localhost:9000", "localhost", "localhost-mcp"),
])
def test_url_slugs(url: str, host: str, endpoint: str) -> None:
    """An HTTP target names its cassette by host and its sessions by host and path."""
    assert host_slug(url) == host
    assert endpoint_slug(url) == endpoint


def test_proxy_session_names_number_a_given_name() -> None:
    """A given name is the first session's; later ones are numbered from 2."""
    names = [proxy_session_name("http://h/mcp", "run", n) for n in (1, 2, 3)]
    assert names == ["run", "run-2", "run-3"]


def test_proxy_session_names_default_unique() -> None:
    """Without a name, each session gets the endpoint, a time stamp and a random suffix."""
    a = proxy_session_name("http://h.example/mcp", None, 1)
    assert re.fullmatch(r"h-example-mcp-\d{8}-\d{6}-[0-9a-f]{4}", a)


def test_default_http_cassette(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$MCPREC_CASSETTE`` wins; else ``cassettes/<host>.db``."""
    monkeypatch.delenv("MCPREC_CASSETTE", raising=False)
    assert default_http_cassette("http://a.b/mcp") == Path("cassettes/a-b.db")
    monkeypatch.setenv("MCPREC_CASSETTE", "/tmp/x.db")
    assert default_http_cassette("http://a.b/mcp") == Path("/tmp/x.db")


def test_transports_do_not_import_record() -> None:
    """The transports sit below ``record``: importing them never imports it (no cycle)."""
    code = ("import sys, mcprec.transports.http_proxy, mcprec.transports.stdio; "
            "assert 'mcprec.record.api' not in sys.modules, 'a transport imported mcprec.record.api'")
    subprocess.run([sys.executable, "-c", code], check=True)
