"""What a cassette holds, as Python objects: ``Session``, ``Message`` (a large one as a
``StoredMessage`` read in pieces), ``StderrLine``; and the rows they are made from."""

from __future__ import annotations

import collections
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from .store import Cassette

from .._lazy import orjson

from .. import wire
from .._plain import Plain
from .connect import _database_error


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


_SESSION_FIELDS = (
    "id", "name", "transport", "target", "started_at", "ended_at", "status", "exit_code",
    "protocol_version", "client_info", "server_info", "client_capabilities",
    "server_capabilities", "instructions", "tags", "mcprec_version", "message_count",
    "duration_ns", "key_scheme",
)
# the columns stored as JSON texts, parsed when first read: replay reads ``tags`` alone of them,
# and parsing them all at the start was the one use of orjson before replay's first answer
_SESSION_JSON = ("target", "client_info", "server_info", "client_capabilities",
                 "server_capabilities", "tags")


class _Parsed:
    """A JSON column of ``Session``, parsed when first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, session: Session | None, owner: type | None = None) -> Any:
        return self if session is None else session._parsed(self.name)


class Session(Plain):
    """One recorded conversation (a row of ``sessions``). Read-only by convention.

    A plain slotted class rather than a frozen dataclass: importing dataclasses cost replay's
    start-up 11-15 ms, and the JSON columns are parsed only when read (see ``_SESSION_JSON``).
    """

    __slots__ = (*(f"_{f}" if f in _SESSION_JSON else f for f in _SESSION_FIELDS), "_texts")
    _FIELDS = _SESSION_FIELDS

    id: int
    name: str
    transport: str
    started_at: str
    ended_at: str | None
    status: str
    exit_code: int | None
    protocol_version: str | None
    instructions: str | None
    mcprec_version: str
    message_count: int
    duration_ns: int
    key_scheme: str | None
    """Which ``wire.match_key`` made the stored keys (``wire.KEY_SCHEME``); None: unknown."""

    def __init__(self, id: int, name: str, transport: str, target: Any, started_at: str,
                 ended_at: str | None, status: str, exit_code: int | None,
                 protocol_version: str | None, client_info: Any, server_info: Any,
                 client_capabilities: Any, server_capabilities: Any, instructions: str | None,
                 tags: dict[str, str], mcprec_version: str, message_count: int = 0,
                 duration_ns: int = 0, key_scheme: str | None = None) -> None:
        self.id = id
        self.name = name
        self.transport = transport
        self._target = target
        self.started_at = started_at
        self.ended_at = ended_at
        self.status = status
        self.exit_code = exit_code
        self.protocol_version = protocol_version
        self._client_info = client_info
        self._server_info = server_info
        self._client_capabilities = client_capabilities
        self._server_capabilities = server_capabilities
        self.instructions = instructions
        self._tags = tags
        self.mcprec_version = mcprec_version
        self.message_count = message_count
        self.duration_ns = duration_ns
        self.key_scheme = key_scheme
        self._texts: dict[str, str] | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Session:
        """A session from a row of ``_SESSION_COLUMNS`` and its two counts; its JSON texts are
        parsed when first read."""
        (id_, name, transport, target, started, ended, status, exit_code, pv, ci, si, cc, sc,
         instr, tags, version, scheme, count, duration) = row
        session = cls(id_, name, transport, None, started, ended, status, exit_code, pv, None,
                      None, None, None, instr, {}, version, count, duration, scheme)
        if tags == "{}":  # the usual: no tags, known without a parser
            tags = None
        session._texts = {f: text for f, text in zip(_SESSION_JSON, (target, ci, si, cc, sc, tags),
                                                     strict=True) if text is not None}
        return session

    def _parsed(self, field: str) -> Any:
        text = self._texts.get(field) if self._texts else None
        if text is not None:  # parsed before the text is dropped: safe to race in threads
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError as e:
                from ..errors import NotACassetteError

                raise NotACassetteError(
                    f"the cassette is corrupt: session {self.name!r} has a damaged {field} "
                    f"column ({e}); restore it from a good copy") from e
            setattr(self, f"_{field}", value if value is not None or field != "tags" else {})
            self._texts.pop(field, None)  # type: ignore[union-attr]
        return getattr(self, f"_{field}")

    target = _Parsed()
    client_info = _Parsed()
    server_info = _Parsed()
    client_capabilities = _Parsed()
    server_capabilities = _Parsed()
    tags = _Parsed()

    @property
    def server_label(self) -> str:
        info = self.server_info or {}
        name, version = info.get("name"), info.get("version")
        return f"{name} {version}" if name and version else (name or "")

    @property
    def target_label(self) -> str:
        if isinstance(self.target, list):
            return " ".join(str(a) for a in self.target)
        return str(self.target or "")


MESSAGE_FIELDS = (
    "id", "session_id", "seq", "t_ns", "direction", "kind", "rpc_id", "method", "reply_to",
    "context_seq", "follows", "waits_for", "match_key", "raw", "http",
)
"""The ``messages`` columns a ``Message`` carries, in order: the one list the SELECTs, the row
reader and the slots are made from (``size`` is ``len(raw)``)."""


class Message:
    """One message as observed on the wire (a row of ``messages``). Read-only by convention.

    A plain slotted class rather than a frozen dataclass: replay builds these on every
    look-up, and a frozen dataclass costs several times more to construct.
    """

    __slots__ = (*MESSAGE_FIELDS, "_json")

    id: int
    session_id: int
    seq: int
    t_ns: int
    direction: str
    kind: str
    rpc_id: str | None
    method: str | None
    reply_to: int | None
    context_seq: int | None
    follows: int | None
    waits_for: int | None
    match_key: str | None
    raw: bytes
    http: dict[str, Any] | None

    def __init__(self, id: int, session_id: int, seq: int, t_ns: int, direction: str,
                 kind: str, rpc_id: str | None, method: str | None, reply_to: int | None,
                 context_seq: int | None, follows: int | None, match_key: str | None,
                 raw: bytes, http: dict[str, Any] | None = None,
                 waits_for: int | None = None) -> None:
        self.id = id
        self.session_id = session_id
        self.seq = seq
        self.t_ns = t_ns
        self.direction = direction
        self.kind = kind
        self.rpc_id = rpc_id
        self.method = method
        self.reply_to = reply_to
        self.context_seq = context_seq
        self.follows = follows
        self.waits_for = waits_for
        self.match_key = match_key
        self.raw = raw
        self.http = http
        self._json: Any = _UNPARSED

    @property
    def json(self) -> Any:
        """The parsed message (parsed once), or None when ``raw`` is not JSON."""
        if self._json is _UNPARSED:
            try:
                self._json = wire.loads(self.raw)
            except orjson.JSONDecodeError:
                self._json = None
        return self._json

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def truncated(self) -> int | None:
        """The size on the wire of a message recorded truncated (``--max-message-size``)."""
        if self.http is not None and self.http.get("truncated"):
            return int(self.http.get("size") or 0)
        return None

    def __repr__(self) -> str:
        return (f"Message(seq={self.seq}, {self.direction}, {self.kind}, method={self.method!r}, "
                f"id={self.rpc_id}, {self.size} B)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and (self.session_id, self.seq, self.raw) == (
            other.session_id, other.seq, other.raw)

    def __hash__(self) -> int:
        return hash((self.session_id, self.seq))


_UNPARSED = object()
_RAW: Any = Message.raw  # the slot itself, for StoredMessage

STORED_APART = 1024 * 1024
"""Replay's look-ups read a message longer than this (the size from which recording writes one
in pieces, ``writer.LARGE_MESSAGE``) without its text: a ``StoredMessage``, whose text is read
when it is first used, if ever. Read with it, a 100 MB answer cost the replay 684 MiB of peak
RSS in the read-ahead alone (``window``: SQLite sorts the rows it reads, texts and all). An
answer is then sent from the cassette in pieces (``StoredText``), never read whole nor copied
with the client's id. Replaying one recorded 100 MB tools/call result (``mcprec replay``, 5 runs
each, old and new in turn): peak RSS 690 -> 23 MiB (a replay answering 1 KB: 20 MiB), delivered
in 1.25-1.44 -> 0.44-0.83 s; with the asyncio driver (``--mode new_episodes``) 697 -> 31 MiB
(answering 1 KB: 27 MiB), 1.26-1.54 -> 0.48-0.79 s."""
PIECE = 1024 * 1024
"""``StoredText`` reads and gives a message this much at a time: reading 100 MB through one
blob handle took 43 ms in 64 KiB pieces, 42 ms in 1 MiB, 33 ms in 4 MiB. A handle is kept for
the whole message: opened again for each piece, SQLite walks the row's overflow pages from the
start every time (1 MiB pieces: 1.2 s for the 100 MB)."""


class StoredMessage(Message):
    """A message longer than ``STORED_APART`` as replay's look-ups read it: every column but
    its text, which stays in the cassette until ``raw`` is first read (then kept, as a
    ``Message`` keeps it). Replay sends such an answer from the cassette in pieces instead
    (``text``), never holding it whole."""

    __slots__ = ("_cassette", "_size")

    def __init__(self, row: tuple[Any, ...], cassette: Cassette) -> None:
        """``row``: the columns ``MESSAGE_FIELDS`` names, the text's length in place of it."""
        (self.id, self.session_id, self.seq, self.t_ns, self.direction, self.kind, self.rpc_id,
         self.method, self.reply_to, self.context_seq, self.follows, self.waits_for,
         self.match_key, self._size, http) = row
        self.http = _loads(http)
        self._cassette = cassette
        self._json = _UNPARSED

    @property  # type: ignore[override]
    def raw(self) -> bytes:
        try:
            return _RAW.__get__(self)  # type: ignore[no-any-return]
        except AttributeError:
            data = self._cassette.raw_of(self)
            _RAW.__set__(self, data)
            return data

    @raw.setter
    def raw(self, data: bytes) -> None:
        _RAW.__set__(self, data)

    @property
    def size(self) -> int:
        return self._size  # type: ignore[no-any-return]

    def text(self) -> StoredText | None:
        """The text, to be read from the cassette in pieces; None where Python has no
        incremental blob I/O (3.10: ``raw`` reads it whole)."""
        return self._cassette.open_text(self)


class StoredText:
    """A ``StoredMessage``'s text read from the cassette as it is sent, in ``PIECE``s, with at
    most one span replaced (replay: the recorded id by the client's). Read through once: it
    holds the row open (an ``sqlite3.Blob``) until then, or until closed."""

    __slots__ = ("_blob", "_path", "_size", "_edit")

    def __init__(self, blob: Any, path: Path, size: int) -> None:
        self._blob = blob
        self._path = path
        self._size = size
        self._edit: tuple[int, int, bytes] | None = None

    def read(self, offset: int, n: int) -> bytes:
        """``n`` bytes of the stored text from ``offset`` (as recorded, whatever is replaced)."""
        try:
            self._blob.seek(offset)
            return self._blob.read(n)  # type: ignore[no-any-return]
        except sqlite3.Error as e:
            raise _database_error(self._path, e) from e

    def replace(self, start: int, end: int, text: bytes) -> StoredText:
        """What this gives becomes the stored text with ``[start, end)`` replaced by ``text``."""
        self._edit = (start, end, text)
        return self

    @property
    def inserted(self) -> bytes | None:
        """What replaces the span (replay: the client's id, as JSON), None when nothing does."""
        return None if self._edit is None else self._edit[2]

    def __len__(self) -> int:
        if self._edit is None:
            return self._size
        start, end, text = self._edit
        return self._size - (end - start) + len(text)

    def pieces(self, after: bytes = b"") -> Iterator[bytes]:
        """The text (as replaced), at most ``PIECE`` bytes at a time, then ``after`` (a driver's
        framing); closed once read."""
        start, end, text = self._edit or (self._size, self._size, b"")
        try:
            for lo, hi, insert in ((0, start, text), (end, self._size, after)):
                while lo < hi:
                    n = min(PIECE, hi - lo)
                    yield self.read(lo, n)
                    lo += n
                if insert:
                    yield insert
        finally:
            self.close()

    def __bytes__(self) -> bytes:
        """The whole text (as replaced), for a driver that sends a message whole."""
        return b"".join(self.pieces())

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._blob.close()


if TYPE_CHECKING:
    class StderrLine(NamedTuple):
        t_ns: int
        line: str
else:  # made with collections: typing is not imported at run time
    StderrLine = collections.namedtuple("StderrLine", ("t_ns", "line"))
    StderrLine.__doc__ = """One line of the server's stderr. A named tuple, not a frozen
    dataclass: building that was 0.6-0.8 ms of CPU at every replay's start-up."""



def text_bytes(raw: Any) -> bytes:
    """A message's stored text as bytes: a BLOB, as mcprec writes it, or a TEXT, as a hand
    edit with the ``sqlite3`` shell writes it (``UPDATE messages SET raw = '...'``)."""
    return raw.encode() if type(raw) is str else bytes(raw)


def message_from_row(row: tuple[Any, ...], cassette: Cassette | None = None) -> Message:
    """A ``Message`` from a row of the columns ``MESSAGE_FIELDS`` names, in that order; a
    ``StoredMessage`` of ``cassette`` when the row holds the text's length instead of the text
    (replay's look-ups read large messages so)."""
    (id_, sid, seq, t_ns, direction, kind, rpc_id, method, reply_to, context_seq, follows,
     waits_for, key, raw, http) = row
    if direction not in _DIRECTIONS or kind not in _KINDS:
        # the schema's CHECKs forbid it: only a damaged page reads so (translated with the path)
        raise sqlite3.DatabaseError(
            f"malformed: message seq {seq} has direction {direction!r}, kind {kind!r}")
    if type(raw) is int:
        assert cassette is not None, "a row without its text needs the cassette it came from"
        return StoredMessage(row, cassette)
    try:
        parsed = None if http is None else orjson.loads(http)
    except orjson.JSONDecodeError as e:
        raise sqlite3.DatabaseError(
            f"malformed: message seq {seq} has a damaged http column ({e})") from e
    return Message(id_, sid, seq, t_ns, direction, kind, rpc_id, method, reply_to, context_seq,
                   follows, key, raw if type(raw) is bytes else text_bytes(raw), parsed,
                   waits_for)


_DIRECTIONS = frozenset(("client_to_server", "server_to_client"))
_KINDS = frozenset(("request", "notification", "response", "error", "batch", "invalid"))
