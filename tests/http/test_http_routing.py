"""The proxy's session routing, without sockets: which cassette session each exchange goes to."""

from __future__ import annotations

from typing import Any

from mcprec.transports.http_routing import SessionRouter


class FakeWriter:
    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.closed: str | None = None

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        self.closed = status


def router() -> tuple[SessionRouter, list[FakeWriter]]:
    opened: list[FakeWriter] = []

    def open_session(transport: str) -> Any:
        opened.append(FakeWriter(transport))
        return opened[-1]

    return SessionRouter(open_session), opened


def test_initialize_opens_a_session_that_its_session_id_names() -> None:
    """An initialize opens a session; the id in its answer routes later requests to it."""
    r, opened = router()
    w, fresh = r.request("POST", None, "/mcp", is_init=True)
    assert fresh and opened == [w]
    r.answered(w, fresh, "abc", 200)
    r.settle(w, fresh)
    assert w.closed is None
    assert r.request("POST", "abc", "/mcp", is_init=False) == (w, False)
    r.deleted("abc", 200)
    assert w.closed == "complete"


def test_failed_initialize_is_ended() -> None:
    """An initialize answered with an error, and no session id, ends the session it opened."""
    r, _ = router()
    w, fresh = r.request("POST", None, "/mcp", is_init=True)
    r.answered(w, fresh, None, 500)
    r.settle(w, fresh)
    assert w is not None and w.closed == "complete"


def test_stateless_server_gets_one_sessionless_session() -> None:
    """A 2xx initialize without a session id: later sessionless traffic joins that session."""
    r, opened = router()
    w, fresh = r.request("POST", None, "/mcp", is_init=True)
    r.answered(w, fresh, None, 200)
    r.settle(w, fresh)
    assert w is not None and w.closed is None
    assert r.request("POST", None, "/mcp", is_init=False) == (w, False)
    assert r.sessionless() is w and len(opened) == 1


def test_unknown_session_id_opens_a_session_but_delete_does_not() -> None:
    """A session id the proxy has not seen gets a session, except on DELETE."""
    r, opened = router()
    assert r.request("DELETE", "zzz", "/mcp", is_init=False) == (None, False)
    w, _ = r.request("GET", "zzz", "/mcp", is_init=False)
    assert w is not None and opened == [w]


def test_legacy_stream_owns_its_endpoint() -> None:
    """A legacy SSE stream's endpoint routes the POSTs to it to its ``sse`` session."""
    r, _ = router()
    assert r.request("GET", None, "/sse", is_init=False) == (None, False)
    w = r.legacy_stream("/messages?session_id=1")
    assert w.transport == "sse"  # type: ignore[attr-defined]
    assert r.request("POST", None, "/messages?session_id=1", is_init=True) == (w, False)
