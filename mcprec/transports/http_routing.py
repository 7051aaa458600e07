"""Which cassette session an HTTP exchange through the recording proxy belongs to.

Streamable HTTP names its MCP session in the ``Mcp-Session-Id`` header, which the server hands
out in its answer to ``initialize``; a stateless server hands out none, and all its sessionless
traffic goes to one session. The legacy HTTP+SSE transport has one session per SSE stream, whose
first event names the endpoint the client then POSTs to. The router only decides; the proxy
relays, and ``open_session`` creates sessions.
"""

from __future__ import annotations

from collections.abc import Callable

from .recording import SessionRecording


class SessionRouter:
    """The cassette sessions of one proxy by MCP session id, legacy endpoint, or none."""

    def __init__(self, open_session: Callable[[str], SessionRecording],
                 close_session: Callable[[SessionRecording], None] | None = None,
                 renew: Callable[[SessionRecording], bool] | None = None) -> None:
        """``renew(writer)``: whether the sessionless session should give way to a new one for
        the requests that begin now (a rotating cassette began a new file); it is ended once
        the requests it has in flight are done."""
        self._open = open_session
        self._close = close_session if close_session is not None else _close
        self._renew = renew
        self._in_flight: dict[SessionRecording, int] = {}  # sessionless requests, per session
        self._by_id: dict[str, SessionRecording] = {}
        self._sid_of: dict[SessionRecording, str] = {}
        self._legacy: dict[str, SessionRecording] = {}
        self._sessionless: SessionRecording | None = None
        self._probed = False  # the sessionless session holds a server/discover probe alone

    def request(self, method: str, sid: str | None, target_path: str, is_init: bool,
                probe: bool = False) -> tuple[SessionRecording | None, bool]:
        """The session a request belongs to (None: decided by the response), and whether it
        is a new one this request (an ``initialize`` without a session id) opens. A client that
        probed with ``server/discover`` (2026-07-28) and then initializes was talking to an
        ``initialize``-era server: its probe and its session are one recorded session."""
        legacy = self._legacy.get(target_path)
        if legacy is not None:
            return legacy, False
        if sid is not None:
            writer = self._by_id.get(sid)
            if writer is None and method != "DELETE":
                writer = self._by_id[sid] = self._open("http")
                self._sid_of[writer] = sid
            return writer, False
        if method == "GET":
            return None, False  # legacy SSE, or a sessionless GET: per the response
        if is_init:
            if self._probed and self._sessionless is not None:
                probed, self._sessionless, self._probed = self._sessionless, None, False
                return probed, True
            return self._open("http"), True
        self._probed = probe and self._sessionless is None
        writer = self.sessionless()
        self._in_flight[writer] = self._in_flight.get(writer, 0) + 1
        return writer, False

    def answered(self, writer: SessionRecording | None, fresh: bool, new_sid: str | None,
                 status: int) -> None:
        """The answer to a request has begun: a new session id names the session the request
        opened; a 2xx answer to an opening request without one comes from a stateless server."""
        if new_sid and writer is not None and new_sid not in self._by_id:
            self._by_id[new_sid] = writer
            self._sid_of[writer] = new_sid
        elif fresh and writer is not None and 200 <= status < 300:
            self._sessionless = writer  # a stateless server: see settle

    def settle(self, writer: SessionRecording | None, fresh: bool) -> None:
        """After the exchange that opened a session (an ``initialize`` without a session id):
        a session id in the answer made it that MCP session's; a 2xx answer without one comes
        from a stateless server, whose later requests carry no session id either, so they are
        recorded in it (it became the sessionless session); an error answer, or none, ends it
        here rather than leaving it open and incomplete."""
        if not fresh and writer is not None and writer in self._in_flight:
            left = self._in_flight[writer] - 1
            if left:
                self._in_flight[writer] = left
            else:
                del self._in_flight[writer]
                if writer is not self._sessionless:  # renewed meanwhile: its last request
                    self._close(writer)
        if not fresh or writer is None or writer is self._sessionless:
            return
        if self._by_id.get(self._sid_of.get(writer, "")) is writer:
            return
        self._close(writer)

    def deleted(self, sid: str | None, status: int) -> None:
        """A DELETE was answered: a 2xx answer ends the session."""
        w = self._by_id.pop(sid, None) if sid else None
        if w is not None:
            self._sid_of.pop(w, None)
            if 200 <= status < 300:
                self._close(w)
            else:  # the server kept it: still its session (e.g. 405, DELETE not allowed)
                self._by_id[sid] = w  # type: ignore[index]
                self._sid_of[w] = sid  # type: ignore[assignment]

    def ended(self, sid: str) -> None:
        """The session ``sid`` went idle for good (``--session-idle``): end its recording;
        should the client come back with it, its requests open a new session."""
        w = self._by_id.pop(sid, None)
        if w is not None:
            self._sid_of.pop(w, None)
            self._close(w)

    @property
    def open_sessions(self) -> int:
        """How many MCP sessions (by id) the router holds."""
        return len(self._by_id)

    def sessionless(self) -> SessionRecording:
        """The session of traffic that names none (opened when first needed)."""
        if self._sessionless is not None and self._renew is not None and \
                self._renew(self._sessionless):
            old, self._sessionless = self._sessionless, None
            if old not in self._in_flight:  # else ended by the last of its requests
                self._close(old)
        if self._sessionless is None:
            self._sessionless = self._open("http")
        return self._sessionless

    def legacy_stream(self, endpoint: str) -> SessionRecording:
        """A new legacy SSE stream named ``endpoint`` (path and query) for its POSTs."""
        writer = self._legacy[endpoint] = self._open("sse")
        return writer

    def clear(self) -> None:
        self._by_id.clear()
        self._sid_of.clear()
        self._legacy.clear()
        self._sessionless = None
        self._probed = False
        self._in_flight.clear()


def _close(writer: SessionRecording) -> None:
    writer.close(status="complete")
