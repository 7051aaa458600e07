"""The seam between a transport and the cassette: what a transport reports what it relays to.

A transport is a byte pump plus reports to a ``SessionRecording``, one per recorded session:
a stream transport (stdio) reports raw chunks as read, and the recording cuts them into
messages; a message transport (HTTP) reports whole messages with their HTTP details. Both
cassette writers fit (``record.process.ProcessSessionWriter``, which ``mcprec record`` uses,
and ``record.writer.SessionWriter``), so a new transport is a module reporting to this plus a
driver in ``record``. This module imports nothing at run time: replay imports the transports
and must start quickly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..cassette.models import Session


class SessionRecording(Protocol):
    """One session being recorded. Times are ns since ``start_ns`` (``time.monotonic_ns``)."""

    start_ns: int
    session: Session
    """The session's row in the cassette (its ``transport`` says how it was recorded)."""

    def now(self) -> int:
        """The time now, in ns since the session started."""
        ...

    # a stream transport: the bytes of each direction as read

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None: ...

    def stream_end(self, direction: str) -> None:
        """The stream ended: its last line, if unterminated, is a message too."""
        ...

    def stderr_chunk(self, data: bytes, t_ns: int) -> None: ...

    # a message transport: whole messages

    def message(self, direction: str, raw: bytes, t_ns: int | None = None,
                http: dict[str, Any] | None = None, context: str | None = ...,
                fault: dict[str, Any] | None = None) -> None:
        """One message as it was on the wire. ``http``: how it travelled (exchange, status,
        headers, SSE event id...). ``context``: the id text of the request it belongs to, None
        for none; left out, the recorder infers it (``record.recorder.AUTO``). ``fault``: a
        fault made it (``mcprec record --fault``): the mark kept in ``injected_faults``."""
        ...

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """End the session (idempotent)."""
        ...


class NullRecording:
    """Records nothing: a transport run without a cassette."""

    session: Any = None

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None:
        pass

    def stream_end(self, direction: str) -> None:
        pass

    def stderr_chunk(self, data: bytes, t_ns: int) -> None:
        pass

    def message(self, direction: str, raw: bytes, t_ns: int | None = None,
                http: dict[str, Any] | None = None, context: str | None = None,
                fault: dict[str, Any] | None = None) -> None:
        pass

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        pass
