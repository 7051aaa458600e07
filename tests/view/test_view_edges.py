"""`mcprec view` answers every bad request with a 4xx and one line of JSON: never a 500, never a
traceback on stderr; HEAD is answered as GET is, without a body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import subprocess
import sys

import httpx
import orjson
import pytest

from support.view_helpers import base_of, running_view


WRITE = """
import sys
from mcprec.record.writer import open_session_writer
w = open_session_writer(sys.argv[1], "bad\\r\\nname\\"x", transport="stdio", target=["s"])
w.message("client_to_server", b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1000)
w.message("server_to_client", b'{"jsonrpc":"2.0","id":1,"result":{}}', 2000)
w.close(exit_code=0)
"""


def crlf_cassette(path: Path) -> Path:
    """A cassette whose one session's name holds CR/LF (as `mcprec import` can make), written
    by the cassette writer in a process of its own."""
    subprocess.run([sys.executable, "-c", WRITE, str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    cassette = crlf_cassette(tmp_path_factory.mktemp("view-edges") / "edges.db")
    with running_view(cassette) as url, httpx.Client(base_url=base_of(url), timeout=10) as c:
        yield c


def sid(api: httpx.Client) -> int:
    return int(api.get("/api/sessions").json()["sessions"][0]["id"])


def test_raw_download_of_a_crlf_session_name(api: httpx.Client) -> None:
    """The raw download of a message of a session named with CR/LF and a quote: 200, a
    header without control characters, the exact name in filename*."""
    r = api.get(f"/api/sessions/{sid(api)}/messages/0/raw")
    assert r.status_code == 200, r.text
    disposition = r.headers["content-disposition"]
    assert "\r" not in disposition and "\n" not in disposition
    assert 'filename="bad__name_x-0.json"' in disposition
    assert "filename*=UTF-8''bad%0D%0Aname%22x-0.json" in disposition
    assert orjson.loads(r.content)["method"] == "ping"


@pytest.mark.parametrize("path", [
    "/api/sessions/99999999999999999999999",
    "/api/sessions/1/messages/99999999999999999999999",
    "/api/sessions/1/messages/18446744073709551616/raw",
    "/api/sessions/1/messages/18446744073709551616/during",
    "/api/sessions/1/locate?seq=99999999999999999999999",
    "/api/sessions/1/timeline?start=99999999999999999999999",
    "/api/sessions/1/timeline?count=abc",
    "/api/diff?a=99999999999999999999999&b=1",
    "/api/search?q=ping&cursor=99999999999999999999999:1",
    "/api/search?q=ping&cursor=nonsense",
    "/api/search?q=ping&limit=-99999999999999999999999",
    "/api/sessions/7",
    "/api/nothing",
    "/static/../../etc/passwd",
])
def test_bad_requests_are_4xx(api: httpx.Client, path: str) -> None:
    """A number past 64 bits, a bad cursor, an unknown path: a 4xx with one line of JSON."""
    r = api.get(path)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    error = r.json()["error"]
    assert isinstance(error, str) and "\n" not in error and "Traceback" not in error


def test_head_is_answered(api: httpx.Client) -> None:
    """HEAD gets GET's status and headers, and no body; other methods 405 naming both."""
    for path in ("/", "/api/sessions", f"/api/sessions/{sid(api)}/messages/0/raw"):
        get, head = api.get(path), api.head(path)
        assert head.status_code == get.status_code == 200
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        assert head.headers["content-length"] == str(len(get.content))
    assert api.head("/api/sessions/99999999999999999999999").status_code == 404
    r = api.post("/api/sessions")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
