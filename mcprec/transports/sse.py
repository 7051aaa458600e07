"""Server-Sent Events: an incremental parser for recording, and the framing for replay.

The parser never changes what is forwarded: the proxy passes the upstream's bytes on untouched
and feeds a copy here to cut out each event as soon as its blank line arrives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    data: bytes
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Feed bytes, get complete events (per the WHATWG EventSource parsing rules)."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_retry", "_has_data")

    def __init__(self) -> None:
        self._buf = b""
        self._reset()

    def _reset(self) -> None:
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_data = False

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._buf + chunk if self._buf else chunk
        events: list[Event] = []
        start = 0
        n = len(buf)
        while start < n:
            found = _line_end(buf, start)
            if found is None:
                break
            end, nxt = found
            line = buf[start:end]
            start = nxt
            if not line:
                if self._has_data or self._event or self._id is not None:
                    events.append(Event(b"\n".join(self._data), self._event or "message",
                                        self._id, self._retry))
                self._reset()
                continue
            if line[:1] == b":":
                continue  # comment / keep-alive
            name, sep, value = line.partition(b":")
            if sep and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
                self._has_data = True
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            elif name == b"id":
                if b"\0" not in value:
                    self._id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit():
                self._retry = int(value)
        self._buf = buf[start:]
        return events


def _line_end(buf: bytes, start: int) -> tuple[int, int] | None:
    """(end of line, start of next) for the first line ending at or after ``start``, or None.

    A lone ``\\r`` at the very end of the buffer may be half of ``\\r\\n``: wait for more.
    """
    lf = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))
    if cr >= 0:
        if cr + 1 < len(buf):
            return (cr, cr + 2) if buf[cr + 1:cr + 2] == b"\n" else (cr, cr + 1)
        return None
    if lf >= 0:
        return (lf, lf + 1)
    return None


def format_event(data: bytes, *, event: str | None = "message", id: str | None = None) -> bytes:
    """One SSE event carrying ``data``. A compact JSON-RPC message has no line break; one written
    with blanks between its tokens may (JSON allows CR and LF there): SSE ends a line at CR LF,
    CR or LF alike, so each becomes a line of its own (the client joins them with LF: the same
    JSON). A lone CR left in a line would end it early at the client, cutting the message."""
    out = []
    if event:
        out.append(b"event: " + event.encode() + b"\n")
    if id is not None:
        out.append(b"id: " + id.encode() + b"\n")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    for line in data.split(b"\n"):
        out.append(b"data: " + line + b"\n")
    out.append(b"\n")
    return b"".join(out)


def format_event_pieces(pieces: Iterable[bytes], *, event: str | None = "message",
                        id: str | None = None) -> Iterator[bytes]:
    """``format_event(b"".join(pieces), ...)`` a piece at a time, never joined (a large answer
    as it is read from the cassette). ``format_event`` cuts the data into lines at each CR LF,
    CR or LF: each piece is framed by itself, its line breaks becoming ``\\ndata: ``, but for a
    CR LF cut between two pieces (the LF that begins a piece after a CR is dropped). The
    event's head goes out with the first piece, its end with the last."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    if id is not None:
        head += b"id: " + id.encode() + b"\n"
    head += b"data: "
    out: bytes | None = None
    after_cr = False
    for piece in pieces:
        if not piece:
            continue
        if after_cr and piece[:1] == b"\n":
            piece = piece[1:]
        after_cr = piece[-1:] == b"\r"
        if b"\r" in piece:
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        framed = piece.replace(b"\n", b"\ndata: ")
        if out is None:
            out = head + framed
        else:
            yield out
            out = framed
    yield (head if out is None else out) + b"\n\n"
