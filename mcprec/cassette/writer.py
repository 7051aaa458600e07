"""The batched background writer that records one session.

The forwarding path only calls ``message()`` / ``stderr_line()``, which put a tuple on a queue
(no parsing, no SQL). A writer thread drains the queue, classifies and pairs messages, and commits
them in transactions capped by count and by bytes. Batches form by themselves: while one commits,
the next accumulates, so an idle tap commits each message at once and a busy one commits in bulk.
``close()`` flushes everything on every exit path.
"""

from __future__ import annotations

import collections
import os
import queue
import sqlite3
import threading
import time
from typing import Any, Generic, Protocol, TypeVar

import orjson

from .. import _log, wire
from . import plan, schema
from .causality import Causality
from .store import Cassette, Session, write_transaction

MAX_BATCH_MESSAGES = 2000
MAX_BATCH_BYTES = 8 * 1024 * 1024
LARGE_MESSAGE = 1024 * 1024
"""Messages longer than this are redacted and classified around their base64 payloads and
written into their row in pieces (SQLite incremental blob I/O): for a 100 MB message,
inserting it whole took 0.79-0.91 s and 315 MB of peak memory (the bound copy and the record
SQLite builds), in pieces 0.43-0.46 s and nothing beyond the message itself."""

_IO = "io.modelcontextprotocol"

AUTO = "auto"
"""``context=AUTO``: infer the request a server message belongs to (progress token, else the
latest request awaiting an answer). HTTP knows better and passes the id text, or None."""

_MESSAGE = 0
_STDERR = 1
_STOP = 2
_SYNC = 3

_INSERTED = ("session_id", "seq", "t_ns", "direction", "kind", "rpc_id", "method", "reply_to",
             "context_seq", "follows", "waits_for", "match_key", "size", "raw", "http")
# A row binds no None: sqlite3 (Python 3.11) passes None and bytes through its adapter look-up,
# which raises and clears an AttributeError for each (~2,000 instructions a value, ~5 a row).
# A NULL is bound as a stand-in that NULLIF turns into NULL: 0 for a text column (no text equals
# an integer), '' for an integer column (no integer equals a text); a small raw is bound as a
# bytearray (the same BLOB; a larger one is not copied for it). Executemany of 20,000 ~200 B
# rows: 51,100 -> 37,200 instructions a row (callgrind), CPU 10.2 -> 7.7 µs a row.
_NO_TEXT = 0
_NO_INT = ""
_COPIED_BELOW = 4096
_NULLABLE_TEXT = ("rpc_id", "method", "match_key", "http")
_NULLABLE_INT = ("reply_to", "context_seq", "follows", "waits_for")


def _insert_sql(raw: str) -> str:
    values = (raw if c == "raw" else f"NULLIF(?, {_NO_TEXT})" if c in _NULLABLE_TEXT
              else f"NULLIF(?, '{_NO_INT}')" if c in _NULLABLE_INT else "?" for c in _INSERTED)
    return f"INSERT INTO messages ({', '.join(_INSERTED)}) VALUES ({', '.join(values)})"


_INSERT_MESSAGE = _insert_sql("?")
_INSERT_LARGE = _insert_sql("zeroblob(?)")
_RAW = _INSERTED.index("raw")
# The CHECK constraints of messages (direction, kind) hold for every row the recorder makes:
# checked here, in Python, and SQLite's own check is skipped while the rows are inserted (the
# "kind IN (...)" of six values built a temporary B-tree, a 16 KiB page cleared, for each row).
# Executemany of 20,000 ~200 B rows: 86,700 -> 51,100 instructions a row (callgrind), CPU
# 12.0 -> 10.2 µs a row. A row that breaks one is inserted with the check, which refuses it.
# Switching the check off and on costs ~40 µs a commit (the pragmas, and the statement prepared
# again): not for a few rows.
_CHECKED = frozenset(m.value for m in (*wire.Direction, *wire.Kind))
_UNCHECKED_FROM = 32

# direction and kind as plain text for SQLite: it binds a str subclass (the wire.Direction and
# wire.Kind members) through its adapter look-up, 0.7 µs a value (executemany of 20,000 4-column
# rows: 3.0 -> 1.6 µs a row with two of them), a str at once. Recording ~200 B messages: SQLite
# 8.9-9.2 -> 8.2-8.7 µs a row
_TEXT: dict[str, str] = {m: m.value for m in (*wire.Direction, *wire.Kind)}


class Redactor(Protocol):
    """What the writer needs of ``mcprec.redact.Redactor``."""

    def redact(self, raw: bytes) -> bytes: ...

    def redact_text(self, text: str) -> str: ...


def _whole(raw: bytes | bytearray, http: dict[str, Any] | None) -> bool:
    """Whether a message is redacted and classified whole: all but a large one (not recorded
    truncated), which is so around its payloads (``Recorder._large``)."""
    return len(raw) <= LARGE_MESSAGE or bool(http and http.get("truncated"))


_Added = tuple[str, int, "bytes | bytearray", "dict[str, Any] | None", "str | None"]
"""A message as ``Recorder.add`` got it: direction, time, bytes, HTTP details, context."""


_K = TypeVar("_K")
_V = TypeVar("_V")


class _Recent(Generic[_K, _V]):
    """A mapping (``map``) of the latest ``limit`` keys set: past that, the key first set
    longest ago is forgotten, as a dict forgets its first key, but found at once. A dict that
    keys come and go through, asked for its first key (``next(iter(d))``), scans the holes the
    gone ones left: 40,000 keys set past a limit of 10,000, 4.8 µs a key; with the order kept
    in a deque, 0.47 µs."""

    __slots__ = ("map", "_order", "_limit")

    def __init__(self, limit: int) -> None:
        self.map: dict[_K, _V] = {}
        self._order: collections.deque[_K] = collections.deque()
        self._limit = limit

    def set(self, key: _K, value: _V) -> None:
        """``map[key] = value``: a key set again keeps its place, as in a dict."""
        if key not in self.map:
            self._order.append(key)
        self.map[key] = value
        if len(self.map) > self._limit:
            del self.map[self._order.popleft()]


class Recorder:
    """The synchronous core of recording one session: turns messages into rows (redacted,
    classified, paired, indexed) and commits them. Used from one thread at a time."""

    def __init__(self, conn: sqlite3.Connection, session: Session, *, path: Any = None,
                 redact: Redactor | None = None, first_seq: int = 0) -> None:
        self.session = session
        self.path = path
        self.error: BaseException | None = None
        self.count = 0
        self._conn = conn
        self._redact = redact
        self._seq = first_seq
        self._bytes = 0
        self._added: list[_Added] = []  # made into rows a batch at a time (prepare, commit)
        self._added_bytes = 0
        self._rows: list[tuple[Any, ...]] = []
        self._errs: list[tuple[Any, ...]] = []
        # (direction of the request, id text) -> (seq, method) of requests awaiting an answer
        self._pending: dict[tuple[str, str], tuple[int, str]] = {}
        # per direction: seqs of requests awaiting an answer, oldest first (dicts keep order)
        self._open: dict[str, dict[int, None]] = {d: {} for d in wire.DIRECTIONS}
        # (direction, id text) -> seq of recent requests, answered or not
        self._seq_of: _Recent[tuple[str, str], int] = _Recent(10_000)
        # progress token (JSON text) -> seq of the request that carried it (progress after a
        # response is rare; stay bounded)
        self._tokens: _Recent[str, int] = _Recent(10_000)
        self._meta: dict[str, Any] = {}
        self._last_client = -1  # seq of the client's latest message
        self._causality = Causality()
        self._unplanned = False  # the session's replay plan dropped (at the first commit)
        self._client_noted = False
        self._server_noted = False

    @property
    def pending(self) -> int:
        """Rows waiting for ``commit``."""
        return len(self._added) + len(self._rows) + len(self._errs)

    @property
    def pending_bytes(self) -> int:
        """Message bytes waiting for ``commit``."""
        return self._bytes

    def add(self, direction: str, t_ns: int, raw: bytes | bytearray,
            http: dict[str, Any] | None = None, context: str | None = AUTO) -> None:
        self._bytes += len(raw)
        self._added_bytes += len(raw)
        self._added.append((direction, t_ns, raw, http, context))

    @property
    def unprepared(self) -> tuple[int, int]:
        """Messages added since the last ``prepare`` (or commit), and their bytes."""
        return len(self._added), self._added_bytes

    def prepare(self) -> None:
        """Make the rows of the messages added so far (redacted, classified, paired), ahead of
        ``commit``, which then only writes them: the recorder process prepares each take from
        its reader, so that the reader (and the tap behind it) waits for one take's work, not
        for a whole commit's."""
        if self.error is None:
            self._make_rows()

    def _make_rows(self) -> None:
        """The rows of the messages added since the last prepare or commit, in order.
        Redaction looks at the batch once (``redact_many``): only messages holding something it
        looks for are redacted one by one."""
        added, self._added = self._added, []
        self._added_bytes = 0
        if not added:
            return
        sid = self.session.id
        many = getattr(self._redact, "redact_many", None)
        if many is None:
            self._rows += [self._row(sid, d, t, raw, http, hint, False)
                           for d, t, raw, http, hint in added]
            return
        # the messages _row redacts whole, as bytes; a large one is redacted around its payloads
        clean = iter(many([bytes(raw) for _, _, raw, http, _ in added if _whole(raw, http)]))
        for d, t, raw, http, hint in added:
            whole = _whole(raw, http)
            self._rows.append(self._row(sid, d, t, next(clean) if whole else raw, http, hint,
                                        whole))

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        """Small rows in one ``executemany``; a large message's row is created with a zeroblob
        of its size and its pieces written into it, never joined in memory."""
        unchecked = len(rows) >= _UNCHECKED_FROM and _CHECKED.issuperset([r[3] for r in rows]) \
            and _CHECKED.issuperset([r[4] for r in rows])
        if unchecked:
            self._conn.execute("PRAGMA ignore_check_constraints = ON")
        try:
            self._insert_rows(rows)
        finally:
            if unchecked:
                self._conn.execute("PRAGMA ignore_check_constraints = OFF")

    def _insert_rows(self, rows: list[tuple[Any, ...]]) -> None:
        start = 0
        for i, row in enumerate(rows):
            pieces = row[_RAW]
            if type(pieces) is not _Pieces:
                continue
            if start < i:
                self._conn.executemany(_INSERT_MESSAGE, rows[start:i])
            start = i + 1
            blobopen = getattr(self._conn, "blobopen", None)  # Python 3.11+
            if blobopen is None:
                self._conn.execute(_INSERT_MESSAGE, (*row[:_RAW], b"".join(pieces.parts),
                                                     *row[_RAW + 1:]))
                continue
            rowid = self._conn.execute(
                _INSERT_LARGE, (*row[:_RAW], pieces.size, *row[_RAW + 1:])).lastrowid
            assert rowid is not None
            with blobopen("messages", "raw", rowid) as blob:
                for part in pieces.parts:
                    blob.write(part)
        if start < len(rows):
            self._conn.executemany(_INSERT_MESSAGE, rows[start:] if start else rows)

    def add_stderr(self, t_ns: int, line: bytes) -> None:
        text = line.decode("utf-8", "replace")
        if self._redact is not None:
            text = self._redact.redact_text(text)
        self._errs.append((self.session.id, t_ns, text))

    def commit(self) -> None:
        """Write what is pending in one transaction (retrying while another writer holds the
        lock). Errors are reported once and recording stops; forwarding is never affected."""
        if self.error is None:
            self._make_rows()
        else:
            self._added, self._added_bytes = [], 0
        rows, self._rows = self._rows, []
        errs, self._errs = self._errs, []
        if (not rows and not errs and not self._meta) or self.error is not None:
            return
        meta, self._meta = self._meta, {}
        self._bytes = 0
        for attempt in range(200):
            try:
                with write_transaction(self._conn) as conn:
                    if rows:
                        if not self._unplanned:  # a session continued: its plan is stale
                            plan.drop(conn, self.session.id)
                            self._unplanned = True
                        self._insert(rows)
                    if errs:
                        conn.executemany(
                            "INSERT INTO stderr (session_id, t_ns, line) VALUES (?, ?, ?)", errs
                        )
                    if meta:
                        cols = ", ".join(f"{k} = ?" for k in meta)
                        conn.execute(
                            f"UPDATE sessions SET {cols} WHERE id = ?",
                            (*meta.values(), self.session.id),
                        )
                self.count += len(rows)
                return
            except sqlite3.OperationalError as e:
                if "locked" in str(e) or "busy" in str(e):
                    time.sleep(min(0.01 * (attempt + 1), 0.2))
                    continue
                self._fail(e)
                return
            except sqlite3.Error as e:
                self._fail(e)
                return
        self._fail(sqlite3.OperationalError("database stayed locked"))

    def finish(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """Commit what is pending and mark the session ended."""
        self.commit()
        try:
            with write_transaction(self._conn) as conn:
                conn.execute(
                    "UPDATE sessions SET ended_at = ?, status = ?, exit_code = ? WHERE id = ?",
                    (schema.now_iso(), status, exit_code, self.session.id),
                )
                # with its end: a reader that sees the session complete sees its plan
                failed = plan.build_or_skip(conn, self.session.id) if self.error is None \
                    else None
        except sqlite3.Error as e:
            self.error = self.error or e
            return
        if failed is not None:
            _log.warning("record", f"no replay plan for session {self.session.name!r}: "
                         f"{failed!r} (it replays without one)")

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
            _log.warning("record", f"cannot write to cassette {self.path}: {e}; traffic is still "
                         "forwarded but no longer recorded")

    def _row(
        self, sid: int, direction: str, t_ns: int, raw: bytes | bytearray,
        http: dict[str, Any] | None, hint: str | None, redacted: bool,
    ) -> tuple[Any, ...]:
        """A message's row; ``redacted``: its bytes are redacted already."""
        seq = self._seq
        self._seq += 1
        other = (
            wire.SERVER_TO_CLIENT if direction == wire.CLIENT_TO_SERVER else wire.CLIENT_TO_SERVER
        )
        stored: Any
        if not _whole(raw, http):
            # redacted before anything else, as below
            stored, raw, c = self._large(raw, other)
        else:
            if type(raw) is not bytes:
                raw = bytes(raw)
            if self._redact is not None and not redacted:
                # before anything else: keys are of redacted params
                raw = self._redact.redact(raw)
            c = wire.classify(raw)
            stored = raw
        if c.kind == wire.INVALID and http is not None and http.get("truncated"):
            c = self._truncated(bytes(raw), other)  # bytes already: no copy
        method, reply_to, key, context = c.method, None, None, None
        if c.kind == wire.REQUEST and c.rpc_id is not None and method is not None:
            self._pending[(direction, c.rpc_id)] = (seq, method)
            self._seq_of.set((direction, c.rpc_id), seq)
            params = c.obj.get("params")
            key = wire.match_key(method, params, has_meta=wire.holds_meta(raw))
            context = self._context_of(other, None, hint)
            self._open[direction][seq] = None
            token = wire.progress_token(params)
            if token is not None:
                self._tokens.set(token, seq)
            if direction == wire.CLIENT_TO_SERVER:
                if method == "initialize":
                    self._note_initialize(params)
                elif not self._client_noted and isinstance(params, dict):
                    self._note_envelope(params.get("_meta"))
        elif c.kind == wire.NOTIFICATION:
            token = None
            if method == "notifications/progress":
                token = wire.progress_token(c.obj.get("params"), key="progressToken")
            context = self._context_of(other, token, hint)
        elif c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id is not None:
            found = self._pending.pop((other, c.rpc_id), None)
            if found is not None:
                reply_to, method = found
                context = reply_to
                self._open[other].pop(reply_to, None)
                if method in ("initialize", "server/discover") and c.kind == wire.RESPONSE:
                    self._note_server(c.obj.get("result"))
                elif not self._server_noted and c.kind == wire.RESPONSE:
                    result = c.obj.get("result")
                    if isinstance(result, dict) and isinstance(result.get("_meta"), dict):
                        self._note_server_stamp(result["_meta"])
        follows = None
        if direction == wire.CLIENT_TO_SERVER:
            self._last_client = seq
        elif context is None:
            follows = self._last_client
        waits_for = self._causality.observe(seq, direction, c.kind, method, c.rpc_id, reply_to,
                                            context, c.obj)
        http_text: str | None
        if http and self._redact is not None:
            # headers by the header rules (a WWW-Authenticate challenge is not a credential),
            # the rest by the message rules
            redact_http = getattr(self._redact, "redact_http", None)
            http_text = orjson.dumps(redact_http(http)).decode() if redact_http is not None \
                else self._redact.redact_text(orjson.dumps(http).decode())
        else:
            http_text = orjson.dumps(http).decode() if http else None
        if type(stored) is _Pieces:
            size = stored.size
        else:
            size = len(stored)
            if size <= _COPIED_BELOW:
                stored = bytearray(stored)
        rpc_id = c.rpc_id
        return (sid, seq, t_ns, _TEXT.get(direction, direction), _TEXT.get(c.kind, c.kind),
                _NO_TEXT if rpc_id is None else rpc_id, _NO_TEXT if method is None else method,
                _NO_INT if reply_to is None else reply_to, _NO_INT if context is None else context,
                _NO_INT if follows is None else follows,
                _NO_INT if waits_for is None else waits_for, _NO_TEXT if key is None else key,
                size, stored, _NO_TEXT if http_text is None else http_text)

    def _large(self, raw: bytes | bytearray, requester: str
               ) -> tuple[Any, bytes | bytearray, wire.Classified]:
        """Redact and classify a large message without copying its base64 payloads: what to
        store (bytes, or ``_Pieces``), the message to read the rest from, and its class.

        It is classified with each payload string replaced by a short one: the same JSON
        structure, as a payload string holds no quote or backslash. It is parsed whole instead
        when that cannot tell all: a request (its match key hashes every param), an id that
        was a payload, an answer whose result goes into the session row."""
        parts = redacted_pieces(self._redact, raw)
        if len(parts) == 1:  # no payloads: one piece, still written by blob I/O
            whole = parts[0]
            return _Pieces(parts), whole, wire.classify(whole)
        c = wire.classify(_HOLE.join(parts[::2]))
        if c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id is not None \
                and _HOLE_TEXT not in c.rpc_id:
            found = self._pending.get((requester, c.rpc_id))
            result = c.obj.get("result") if c.kind == wire.RESPONSE else None
            needs_result = c.kind == wire.RESPONSE and (
                (found is not None and found[1] in ("initialize", "server/discover"))
                or (not self._server_noted and isinstance(result, dict) and "_meta" in result))
            if not needs_result:
                return _Pieces(parts), raw, c
        elif c.kind == wire.INVALID and c.obj is None:  # not JSON, and so not the whole either
            return _Pieces(parts), raw, c
        whole = b"".join(parts)
        return _Pieces([whole]), whole, wire.classify(whole)

    def _truncated(self, head: bytes, requester: str) -> wire.Classified:
        """A message recorded cut short, classified from its head so that it still pairs with
        its request: an answer whose id was past the cut answers the one request awaiting an
        answer, when there is just one."""
        c = wire.classify_head(head)
        rpc_id = c.rpc_id
        if c.kind in (wire.RESPONSE, wire.ERROR) and rpc_id is None:
            waiting = [i for (d, i) in self._pending if d == requester]
            rpc_id = waiting[0] if len(waiting) == 1 else None
        if c.kind == wire.INVALID or (c.kind in (wire.RESPONSE, wire.ERROR) and rpc_id is None):
            return wire.Classified(wire.INVALID)
        return wire.Classified(c.kind, rpc_id, c.method, {})

    def _context_of(self, requester: str, token: str | None, hint: str | None) -> int | None:
        """The request (sent by ``requester``) being handled when a message was sent.

        The transport may know (``hint``: the request's id text, or None for none); a progress
        token names it exactly; otherwise it is the most recent request still awaiting its
        answer, or None when none is.
        """
        if hint != AUTO:
            return None if hint is None else self._seq_of.map.get((requester, hint))
        if token is not None and token in self._tokens.map:
            return self._tokens.map[token]
        open_ = self._open[requester]
        return next(reversed(open_)) if open_ else None

    def _note_envelope(self, meta: Any) -> None:
        """2026-07-28: no initialize; each request carries the client's details in ``_meta``."""
        if not isinstance(meta, dict) or f"{_IO}/protocolVersion" not in meta:
            return
        self._client_noted = True
        self._set_meta("protocol_version", meta.get(f"{_IO}/protocolVersion"), json=False)
        self._set_meta("client_info", meta.get(f"{_IO}/clientInfo"))
        self._set_meta("client_capabilities", meta.get(f"{_IO}/clientCapabilities"))

    def _note_server_stamp(self, meta: dict[str, Any]) -> None:
        """2026-07-28: results carry the server's details in ``_meta``."""
        info = meta.get(f"{_IO}/serverInfo")
        if info is not None:
            self._server_noted = True
            self._set_meta("server_info", info)

    def _note_initialize(self, params: Any) -> None:
        self._client_noted = True
        if not isinstance(params, dict):
            return
        self._set_meta("protocol_version", params.get("protocolVersion"), json=False)
        self._set_meta("client_info", params.get("clientInfo"))
        self._set_meta("client_capabilities", params.get("capabilities"))

    def _note_server(self, result: Any) -> None:
        if not isinstance(result, dict):
            return
        if isinstance(result.get("_meta"), dict):
            self._note_server_stamp(result["_meta"])
        pv = result.get("protocolVersion")
        if pv is None and isinstance(result.get("supportedVersions"), list):
            pv = ",".join(str(v) for v in result["supportedVersions"])
        self._set_meta("protocol_version", pv, json=False)
        if result.get("serverInfo") is not None:
            self._server_noted = True
            self._set_meta("server_info", result.get("serverInfo"))
        self._set_meta("server_capabilities", result.get("capabilities"))
        self._set_meta("instructions", result.get("instructions"), json=False)

    def _set_meta(self, column: str, value: Any, *, json: bool = True) -> None:
        if value is None:
            return
        self._meta[column] = orjson.dumps(value).decode() if json else str(value)




_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_B64_RUN = 1024  # as in redact._BLOB: a quoted run of at least this many base64 characters
_NOT_B64 = bytes(0x61 if c in _B64_CHARS else 0x21 for c in range(256))  # "a" or "!"
_SCAN_WINDOW = 1024 * 1024


def payload_spans(raw: bytes | bytearray, blob: Any,
                  window: int = _SCAN_WINDOW) -> list[tuple[int, int]]:
    """The spans ``blob.finditer(raw)`` gives (``redact._BLOB``: a quoted run of base64), found a
    window at a time: the regular expression runs on each window, and a run crossing a window's
    end is followed with ``translate`` and ``find`` (C speed). On a 100 MB payload the expression alone held the
    interpreter 0.5 s at a stretch; windows leave the recorder's reader thread its turns."""
    n = len(raw)
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < n:
        end = min(n, pos + window)
        for m in blob.finditer(raw, pos, end):
            spans.append(m.span())
        if end == n:
            break
        nxt = end
        lo = max(pos, spans[-1][1]) if spans else pos
        q = raw.rfind(b'"', lo, end)
        if q >= 0 and raw[q + 1:end].translate(_NOT_B64).find(b"!") < 0:
            # the last quote's run reaches the window's end: where does it stop?
            e = end
            while e < n:
                part = raw[e:e + window].translate(_NOT_B64)
                stop = part.find(b"!")
                if stop >= 0:
                    e += stop
                    break
                e += len(part)
            if e - q - 1 >= _B64_RUN and e < n and raw[e] == 0x22:
                spans.append((q, e + 1))
                nxt = e + 1
            else:
                nxt = e  # no quote inside a run: the next candidate is at or after its end
        pos = nxt
    return spans


_HOLE = b'"\\u0000mcprec"'
"""What stands for a payload string when a large message is classified around its payloads."""
_HOLE_TEXT = _HOLE[1:-1].decode()


class _Pieces:
    """A large message as the pieces it is stored from: redacted stretches of JSON between its
    base64 payloads, and the payloads as views of the bytes read (never joined)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self.size = sum(len(p) for p in parts)


def redacted_pieces(redactor: Any, raw: bytes | bytearray) -> list[Any]:
    """``redactor.redact(raw)`` as pieces whose concatenation it equals: one piece, or the
    stretches around the message's base64 payloads (even indexes, redacted) and the payloads
    (odd indexes: views of ``raw``; redaction leaves payloads as they are).

    The steps ``mcprec.redact.Redactor.redact`` takes for a message holding payloads, without
    splitting and joining them: patterns run on the stretches between payloads; a secret-named
    key in those stretches, or a path rule, has the whole message rewritten as ``redact`` does.
    """
    from .. import redact

    if len(raw) <= redact._BLOB_MIN:
        return [raw if redactor is None else redactor.redact(bytes(raw))]
    spans = payload_spans(raw, redact._BLOB)
    if not spans:
        return [raw if redactor is None else redactor.redact(bytes(raw))]
    view = memoryview(raw)
    ends = [0, *(b for _, b in spans)]
    starts = [*(a for a, _ in spans), len(raw)]
    gaps = [bytes(view[a:b]) for a, b in zip(ends, starts)]
    if redactor is not None:
        patterns = getattr(redactor, "_redact_patterns", None)
        if patterns is None or redactor._paths or any(redactor._has_secret_key(g) for g in gaps):
            return [redactor.redact(bytes(raw))]  # rare: the whole message is rewritten
        gaps = [patterns(g) for g in gaps]
    out: list[Any] = []
    for gap, (a, b) in zip(gaps, spans):
        out += (gap, view[a:b])
    out.append(gaps[-1])
    return out


class SessionWriter:
    """Records one session into a cassette from a background thread.

    Thread-safe producers: ``message`` and ``stderr_line`` may be called from any thread.
    (``mcprec record`` uses a recorder process instead: see ``recorder_process.py``.)
    """

    def __init__(
        self,
        cassette: Cassette,
        session: Session,
        *,
        redact: Redactor | None = None,
        clock_start_ns: int | None = None,
        first_seq: int = 0,
        own_cassette: bool = True,
    ) -> None:
        self.cassette = cassette
        self.session = session
        self.start_ns = clock_start_ns if clock_start_ns is not None else time.monotonic_ns()
        self._recorder = Recorder(cassette.connection, session, path=cassette.path, redact=redact,
                                  first_seq=first_seq)
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._framers: dict[str, TimedFramer] = {}
        self._closed = False
        self._own_cassette = own_cassette
        self._thread = threading.Thread(target=self._run, name="mcprec-writer", daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._recorder.error

    @property
    def count(self) -> int:
        return self._recorder.count

    # --- producers (hot path) ---------------------------------------------------------------

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def message(
        self, direction: str, raw: bytes, t_ns: int | None = None,
        http: dict[str, Any] | None = None, context: str | None = AUTO,
    ) -> None:
        self._queue.put(
            (_MESSAGE, direction, time.monotonic_ns() - self.start_ns if t_ns is None else t_ns,
             raw, http, context)
        )

    def stderr_line(self, line: bytes, t_ns: int | None = None) -> None:
        self._queue.put((_STDERR, t_ns if t_ns is not None else self.now(), line))

    # the chunk interface of a stdio tap: streams cut into lines here, on the caller's thread

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None:
        self._framer(direction).feed_at(data, t_ns)

    def stream_end(self, direction: str) -> None:
        self._framer(direction).close()

    def stderr_chunk(self, data: bytes, t_ns: int) -> None:
        self._framer("stderr").feed_at(data, t_ns)

    def _framer(self, stream: str) -> TimedFramer:
        f = self._framers.get(stream)
        if f is None:
            if stream == "stderr":
                f = TimedFramer(lambda line, t: self.stderr_line(line, t))
            else:
                f = TimedFramer(lambda line, t, d=stream: self.message(d, line, t))
            self._framers[stream] = f
        return f

    def sync(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed."""
        done = threading.Event()
        self._queue.put((_SYNC, done))
        return done.wait(timeout)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """Flush every queued message and mark the session ended. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put((_STOP,))
        self._thread.join()
        self._recorder.finish(exit_code=exit_code, status=status)
        if self._own_cassette:
            self.cassette.close()

    # --- writer thread ----------------------------------------------------------------------

    def _run(self) -> None:
        q = self._queue
        rec = self._recorder
        while True:
            item = q.get()
            size = 0
            stop = False
            while True:
                tag = item[0]
                if tag == _MESSAGE:
                    rec.add(item[1], item[2], item[3], item[4], item[5])
                    size += len(item[3])
                elif tag == _STDERR:
                    rec.add_stderr(item[1], item[2])
                elif tag == _SYNC:
                    rec.commit()
                    item[1].set()
                elif tag == _STOP:
                    stop = True
                    break
                if rec.pending >= MAX_BATCH_MESSAGES or size >= MAX_BATCH_BYTES:
                    break
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
            rec.commit()
            if stop:
                return


class TimedFramer:
    """A ``LineFramer`` whose lines carry the time of the chunk that completed them.

    With ``limit``, a longer line reaches ``oversize(first_bytes, full_size, t_ns)`` instead.
    """

    def __init__(self, emit: Any, limit: int | None = None, oversize: Any = None) -> None:
        self._t = 0
        self._framer = wire.LineFramer(
            lambda line, term: emit(line, self._t), limit=limit,
            oversize=(lambda head, size: oversize(head, size, self._t)) if oversize else None)

    def feed_at(self, data: bytes, t_ns: int) -> None:
        self._t = t_ns
        self._framer.feed(data)

    def close(self) -> None:
        self._framer.close()


def redacted_head(redact: Any, target: Any, tags: dict[str, str] | None
                  ) -> tuple[Any, dict[str, str] | None]:
    """A session's target (argv or URL) and tags with secrets replaced, for its row."""
    if redact is None or not hasattr(redact, "redact_value"):
        return target, tags
    return redact.redact_value(target), redact.redact_value(tags) if tags else tags


def open_session_writer(
    path: str | os.PathLike[str],
    name: str,
    *,
    transport: str,
    target: Any,
    tags: dict[str, str] | None = None,
    redact: Redactor | None = None,
    started_at: str | None = None,
) -> SessionWriter:
    """Create (or open) the cassette, add a session and start its writer."""
    from ..redact_manifest import for_recording

    cassette = Cassette.open(path, create=True)
    try:
        redact, manifest = for_recording(redact, cassette)
        target, tags = redacted_head(redact, target, tags)
        session = cassette.create_session(
            name, transport=transport, target=target, tags=tags, recorder_pid=os.getpid(),
            started_at=started_at,
        )
        if manifest is not None:
            cassette.set_redaction_manifest(session, manifest)
    except BaseException:
        cassette.close()
        raise
    return SessionWriter(cassette, session, redact=redact)
