"""A message turned into a row: redacted, classified, paired with its request, its context and
causality noted, its match key computed. ``Recorder`` is the synchronous core of recording one
session; ``mcprec.cassette.rows`` writes its rows."""

from __future__ import annotations

import collections
from typing import Any, Generic, Protocol, TypeVar

import orjson

from .. import _log, wire
from ..cassette.causality import Causality
from ..cassette.rows import COPIED_BELOW, NO_INT, NO_TEXT, CassetteWriteError, Pieces, RowSink
from ..cassette.models import Session

LARGE_MESSAGE = 1024 * 1024
"""Messages longer than this are redacted and classified around their base64 payloads and
written into their row in pieces (SQLite incremental blob I/O): for a 100 MB message,
inserting it whole took 0.79-0.91 s and 315 MB of peak memory (the bound copy and the record
SQLite builds), in pieces 0.43-0.46 s and nothing beyond the message itself."""

_IO = "io.modelcontextprotocol"

BURST_NS = 50_000_000
"""Requests sent within this of each other (50 ms) are sent together (``_context_of``)."""
AUTO = "auto"
"""``context=AUTO``: infer the request a server message belongs to (progress token, else the
latest request awaiting an answer). HTTP knows better and passes the id text, or None."""

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

    def __init__(self, conn: Any, session: Session, *, path: Any = None,
                 redact: Redactor | None = None, first_seq: int = 0) -> None:
        self.session = session
        self.path = path
        self.error: BaseException | None = None
        self.count = 0
        self._sink = RowSink(conn, session.id)
        self.lost = 0
        """Messages made into rows that could not be written (after a write error)."""
        self.marked = False
        """Whether the loss could be stored in the cassette (``session_losses``)."""
        self.on_fail: Any = None
        """Called once when a write fails (the recorder process tells the tap)."""
        self._redact = redact
        self._seq = first_seq
        self._bytes = 0
        self._added: list[_Added] = []  # made into rows a batch at a time (prepare, commit)
        self._added_bytes = 0
        self._rows: list[tuple[Any, ...]] = []
        self._errs: list[tuple[Any, ...]] = []
        self._faults: list[tuple[Any, ...]] = []  # injected_faults rows (record --fault)
        # (direction of the request, id text) -> (seq, method) of requests awaiting an answer
        self._pending: dict[tuple[str, str], tuple[int, str]] = {}
        # per direction: seqs of requests awaiting an answer, oldest first (dicts keep order),
        # with the time each was sent
        self._open: dict[str, dict[int, int]] = {d: {} for d in wire.DIRECTIONS}
        # per direction of the requests: the request the latest message was attributed to
        self._attributed: dict[str, int] = {}
        # (direction, id text) -> seq of recent requests, answered or not
        self._seq_of: _Recent[tuple[str, str], int] = _Recent(10_000)
        # progress token (JSON text) -> seq of the request that carried it (progress after a
        # response is rare; stay bounded)
        self._tokens: _Recent[str, int] = _Recent(10_000)
        self._meta: dict[str, Any] = {}
        self._last_client = -1  # seq of the client's latest message
        self._causality = Causality()
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

    def fault(self, mark: dict[str, Any]) -> None:
        """Mark the message added last as one a fault made (``mcprec record --fault``)."""
        import orjson

        detail = {k: v for k, v in mark.items() if k not in ("rule", "effect", "request_id")}
        self._faults.append((self.session.id, self._seq + len(self._added) - 1,
                             str(mark.get("rule")), str(mark.get("effect")),
                             mark.get("request_id"), orjson.dumps(detail).decode()))

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

    def add_stderr(self, t_ns: int, line: bytes) -> None:
        text = line.decode("utf-8", "replace")
        if self._redact is not None:
            text = self._redact.redact_text(text)
        self._errs.append((self.session.id, t_ns, text))

    def commit(self) -> None:
        """Write what is pending in one transaction (retrying while another writer holds the
        lock). Errors are reported once and recording stops; forwarding is never affected."""
        if self.error is not None:  # recording stopped: what comes is counted, not kept
            self.lost += len(self._added) + len(self._rows)
            self._added, self._added_bytes, self._rows, self._errs = [], 0, [], []
            return
        self._make_rows()
        rows, self._rows = self._rows, []
        errs, self._errs = self._errs, []
        if not rows and not errs and not self._meta:
            return
        meta, self._meta = self._meta, {}
        faults, self._faults = self._faults, []
        self._bytes = 0
        try:
            if faults:
                self._sink.commit(rows, errs, meta, faults)
            else:
                self._sink.commit(rows, errs, meta)
        except CassetteWriteError as e:
            self.lost += len(rows)
            self._fail(e)
            return
        self.count += len(rows)

    def finish(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """Commit what is pending and mark the session ended: ``incomplete``, with why and how
        many messages were lost, when a write failed."""
        self.commit()
        if self.error is not None:
            self.marked = self._sink.mark_lost(exit_code=exit_code, lost=self.lost,
                                               reason=self.reason or "a write failed")
            where = "the session is marked incomplete" if self.marked else \
                "the session could not be marked (it reads as incomplete)"
            _log.warning("record", f"session {self.session.name!r} of {self.path} lost "
                         f"{self.lost} message(s) ({self.reason}); {where}")
            return
        try:
            failed = self._sink.finish(status=status, exit_code=exit_code, build_plan=True)
        except CassetteWriteError as e:
            self.error = e
            return
        if failed is not None:
            _log.warning("record", f"no replay plan for session {self.session.name!r}: "
                         f"{failed!r} (it replays without one)")

    @property
    def reason(self) -> str | None:
        """Why recording stopped, if it did: one line."""
        if self.error is None:
            return None
        return "the disk is full" if getattr(self.error, "full", False) else str(self.error)

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
            if self.on_fail is not None:
                self.on_fail()
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
            context = self._context_of(other, None, hint, t_ns)
            self._open[direction][seq] = t_ns
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
            context = self._context_of(other, token, hint, t_ns)
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
        if type(stored) is Pieces:
            size = stored.size
        else:
            size = len(stored)
            if size <= COPIED_BELOW:
                stored = bytearray(stored)
        rpc_id = c.rpc_id
        return (sid, seq, t_ns, _TEXT.get(direction, direction), _TEXT.get(c.kind, c.kind),
                NO_TEXT if rpc_id is None else rpc_id, NO_TEXT if method is None else method,
                NO_INT if reply_to is None else reply_to, NO_INT if context is None else context,
                NO_INT if follows is None else follows,
                NO_INT if waits_for is None else waits_for, NO_TEXT if key is None else key,
                size, stored, NO_TEXT if http_text is None else http_text)

    def _large(self, raw: bytes | bytearray, requester: str
               ) -> tuple[Any, bytes | bytearray, wire.Classified]:
        """Redact and classify a large message without copying its base64 payloads: what to
        store (bytes, or ``Pieces``), the message to read the rest from, and its class.

        It is classified with each payload string replaced by a short one: the same JSON
        structure, as a payload string holds no quote or backslash. It is parsed whole instead
        when that cannot tell all: a request (its match key hashes every param), an id that
        was a payload, an answer whose result goes into the session row."""
        parts = redacted_pieces(self._redact, raw)
        if len(parts) == 1:  # no payloads: one piece, still written by blob I/O
            whole = parts[0]
            return Pieces(parts), whole, wire.classify(whole)
        c = wire.classify(_HOLE.join(parts[::2]))
        if c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id is not None \
                and _HOLE_TEXT not in c.rpc_id:
            found = self._pending.get((requester, c.rpc_id))
            result = c.obj.get("result") if c.kind == wire.RESPONSE else None
            needs_result = c.kind == wire.RESPONSE and (
                (found is not None and found[1] in ("initialize", "server/discover"))
                or (not self._server_noted and isinstance(result, dict) and "_meta" in result))
            if not needs_result:
                return Pieces(parts), raw, c
        elif c.kind == wire.INVALID and c.obj is None:  # not JSON, and so not the whole either
            return Pieces(parts), raw, c
        whole = b"".join(parts)
        return Pieces([whole]), whole, wire.classify(whole)

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

    def _context_of(self, requester: str, token: str | None, hint: str | None,
                    t_ns: int = 0) -> int | None:
        """The request (sent by ``requester``) being handled when a message was sent.

        The transport may know (``hint``: the request's id text, or None for none); a progress
        token names it exactly. Otherwise, with one request awaiting its answer, that one. With
        several, what the recording shows by timing: the requests sent together with the latest
        one (each within ``BURST_NS`` of it) arrive together when replayed too, and their
        scripts play one after the other in the order they were sent; so a message goes to the
        earliest of them not before the request the previous message went to (the order of the
        server's messages is kept: a log written while three calls were pending is not played
        after another call's answer). A request sent apart from the others takes what comes
        after it. None when no request is awaiting its answer.
        """
        if hint != AUTO:
            return None if hint is None else self._seq_of.map.get((requester, hint))
        if token is not None and token in self._tokens.map:
            named = self._tokens.map[token]
            self._attributed[requester] = max(named, self._attributed.get(requester, -1))
            return named
        open_ = self._open[requester]
        if not open_:
            return None
        latest = next(reversed(open_))
        if len(open_) == 1:
            self._attributed[requester] = latest
            return latest
        since = open_[latest] - BURST_NS
        floor = self._attributed.get(requester, -1)
        chosen = next((s for s, sent in open_.items() if sent >= since and s >= floor), latest)
        self._attributed[requester] = chosen
        return chosen

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


def redacted_pieces(redactor: Any, raw: bytes | bytearray) -> list[Any]:
    """``redactor.redact(raw)`` as pieces whose concatenation it equals: one piece, or the
    stretches around the message's base64 payloads (even indexes, redacted) and the payloads
    (odd indexes: views of ``raw``; redaction leaves payloads as they are).

    The steps ``mcprec.redact.Redactor.redact`` takes for a message holding payloads, without
    splitting and joining them: patterns run on the stretches between payloads; a secret-named
    key in those stretches, or a path rule, has the whole message rewritten as ``redact`` does.
    """
    from ..redact import patterns as tables

    if len(raw) <= tables._BLOB_MIN:
        return [raw if redactor is None else redactor.redact(bytes(raw))]
    spans = payload_spans(raw, tables._BLOB)
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
