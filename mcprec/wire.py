"""JSON-RPC on the wire: line framing, classification, and the canonical form of a request.

Nothing here raises on garbage: bytes that are not JSON-RPC become a message of kind
``invalid``, forwarded and recorded as they are.
"""

from __future__ import annotations

import collections
import re
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Final, NamedTuple

from ._lazy import orjson

from ._enum import TextEnum


class Direction(TextEnum):
    """Which way a message went (the cassette's ``direction`` column)."""

    CLIENT_TO_SERVER = "client_to_server"
    SERVER_TO_CLIENT = "server_to_client"


class Kind(TextEnum):
    """What a message is, as far as JSON-RPC goes (the cassette's ``kind`` column)."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR = "error"
    BATCH = "batch"
    INVALID = "invalid"
    """Not JSON, or not JSON-RPC: forwarded and recorded as it is."""


# the members under their short names, as most of the code compares them
CLIENT_TO_SERVER: Final = Direction.CLIENT_TO_SERVER
SERVER_TO_CLIENT: Final = Direction.SERVER_TO_CLIENT
DIRECTIONS: Final = tuple(Direction)

REQUEST: Final = Kind.REQUEST
NOTIFICATION: Final = Kind.NOTIFICATION
RESPONSE: Final = Kind.RESPONSE
ERROR: Final = Kind.ERROR
BATCH: Final = Kind.BATCH
INVALID: Final = Kind.INVALID
KINDS: Final = tuple(Kind)

_MISSING: Final = object()


_CLASSIFIED_DOC = """What one message is, as far as JSON-RPC goes: ``kind``; ``rpc_id``, the JSON text
of the id (``1`` and ``"1"`` stay distinct) or None; ``method``; ``obj``, the parsed message, or
None when it is not JSON.

A named tuple, not a frozen dataclass: creating the class at import took 1.5-3 ms of replay's
start-up (a frozen dataclass with slots is built twice), and each instance (one per message
recorded or replayed) 0.50-0.65 µs, the named tuple 0.24 µs. Made with ``collections`` at run
time, so that ``typing`` is not imported."""

if TYPE_CHECKING:
    class Classified(NamedTuple):
        kind: str
        rpc_id: str | None = None
        method: str | None = None
        obj: Any = None
else:
    Classified = collections.namedtuple("Classified", ("kind", "rpc_id", "method", "obj"),
                                        defaults=(None, None, None))
    Classified.__doc__ = _CLASSIFIED_DOC


# every digit becomes "1", anything else "0": a run of 19 digits is a run of 19 "1"s, found by
# translate + find at C speed. Measured against the regex rb"\d{19}" (after a count of digits)
# on this machine: a 100 KB text message holding digits 1,837 -> 154 µs, a ~200 B tools/call
# with digits in its text 4.3 -> 0.85 µs, an initialize 0.47 -> 0.69 µs.
_DIGIT_MASK = bytes(0x31 if 0x30 <= c <= 0x39 else 0x30 for c in range(256))
_DIGIT_RUN = b"1" * 19
_SAMPLED_FROM = 4096
_STRIDE = 6
_MAX_MISSES = 16


def _digit_run(raw: bytes | bytearray) -> bool:
    """Whether ``raw`` holds 19 digits in a row.

    A long message is looked at through every 6th byte first: a run of 19 digits puts three
    samples in a row on digits, so only where three samples are digits is the text itself
    looked at (24 bytes around them). Text with many such places (long numbers) gets the whole
    check after 16 of them. Measured in-process, 100 KB messages, whole check -> sampled: the
    benchmark's alphanumeric text 155 -> 9 µs, README prose 74 -> 9 µs, a list of 15,000
    6-digit numbers 191 -> 200 µs."""
    if len(raw) < _SAMPLED_FROM:
        # too short for a run (a request's id, when replay matches a request by its bytes)
        return len(raw) >= 19 and _DIGIT_RUN in raw.translate(_DIGIT_MASK)
    sampled = raw[::_STRIDE].translate(_DIGIT_MASK)
    i = sampled.find(b"111")
    misses = 0
    while i >= 0:
        # the run of 19 holding samples i, i+1, i+2 starts at most 5 bytes before sample i
        at = i * _STRIDE
        if _DIGIT_RUN in raw[max(0, at - _STRIDE): at + 19].translate(_DIGIT_MASK):
            return True
        misses += 1
        if misses == _MAX_MISSES:
            return _DIGIT_RUN in raw.translate(_DIGIT_MASK)
        i = sampled.find(b"111", i + 1)
    return False


_ROUNDED = float(2**63)
"""orjson keeps an integer exact from -2**63 to 2**64 - 1 and makes a float of one beyond: a float
this large or larger (in magnitude) may be such an integer."""
_TREE_BUDGET = 256
"""Values of a large message's parse looked at for such a float before its bytes are instead."""
_UNPARSED = object()


def _exact(obj: Any) -> bool | None:
    """Whether orjson's parse ``obj`` holds no float that may be a rounded integer; None: it
    holds too many values to tell at less than a look at its bytes (``_digit_run``)."""
    todo = [obj]
    budget = _TREE_BUDGET
    while todo:
        v = todo.pop()
        t = type(v)
        if t is dict:
            budget -= len(v)
            todo.extend(v.values())
        elif t is list:
            budget -= len(v)
            todo.extend(v)
        elif t is float and (v >= _ROUNDED or v <= -_ROUNDED):
            return False
        if budget < 0:
            return None
    return True


def loads(raw: bytes) -> Any:
    """Parse JSON exactly: integers beyond 64 bits stay integers (orjson would round them).

    A long message is parsed by orjson first, and its values are looked at for a float that may
    be such an integer: a message of a few values (a tool's 100 KB text) no longer has its every
    byte looked at for 19 digits in a row (bench_record's large load, in-process: 36-44 -> ~1
    µs). Where one may be, where there are many values, or where orjson fails, the digits
    decide as before (tests/core/test_properties.py: the values and types ``json`` gives)."""
    obj: Any = _UNPARSED
    failed: orjson.JSONDecodeError | None = None
    if len(raw) >= _SAMPLED_FROM:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            failed = e  # json may take what orjson does not (NaN, 1e400) after 19 digits in a row
        else:
            if _exact(obj):
                return obj
    if _digit_run(raw):  # 19 digits in a row: perhaps such an integer
        import json  # here, not at the top: the first answer needs no parser (``id_json``)

        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise orjson.JSONDecodeError(str(e), "", 0) from None
    if failed is not None:  # not parsed again to fail again (a 256 MiB truncated message)
        raise failed
    return orjson.loads(raw) if obj is _UNPARSED else obj


def dumps(obj: Any, *, sort_keys: bool = False) -> bytes:
    """Compact JSON; integers beyond 64 bits kept exact."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:
        import json

        return json.dumps(obj, sort_keys=sort_keys, separators=(",", ":"),
                          ensure_ascii=False).encode()


def classify(raw: bytes) -> Classified:
    """Classify one framed message; never raises."""
    try:
        obj = loads(raw)
    except orjson.JSONDecodeError:
        return Classified(INVALID)
    return classify_obj(obj)


def classify_obj(obj: Any) -> Classified:
    """Classify an already-parsed message."""
    if isinstance(obj, list):
        return Classified(BATCH, obj=obj) if obj else Classified(INVALID, obj=obj)
    if not isinstance(obj, dict):
        return Classified(INVALID, obj=obj)
    method = obj.get("method")
    rid = obj.get("id", _MISSING)
    rpc_id = None if rid is _MISSING else id_text(rid)
    if isinstance(method, str):
        if rid is _MISSING:
            return Classified(NOTIFICATION, None, method, obj)
        return Classified(REQUEST, rpc_id, method, obj)
    if "result" in obj and rid is not _MISSING:
        return Classified(RESPONSE, rpc_id, None, obj)
    if "error" in obj and rid is not _MISSING:
        return Classified(ERROR, rpc_id, None, obj)
    return Classified(INVALID, rpc_id, None, obj)


# the first keys of a message cut short: {"jsonrpc":"2.0","id":7,"result": ... (key order varies);
# compiled at first use (only messages recorded truncated need them), not at import
_HEAD: list[Any] = []


def _head_patterns() -> list[Any]:
    if not _HEAD:
        _HEAD.extend((re.compile(rb'\s*[{,]\s*"(jsonrpc|id|result|error|method)"\s*:\s*'),
                      re.compile(rb'-?\d+|"(?:[^"\\]|\\.)*"|null')))
    return _HEAD


def classify_head(head: bytes) -> Classified:
    """What a message recorded truncated (its first bytes only) was, from its leading keys:
    a response or error (with its id when the id came before the result), a request or a
    notification (with its method when it came first); ``INVALID`` when the head does not say."""
    head_key, head_value = _head_patterns()
    pos, rpc_id, method = 0, None, None
    kind = INVALID
    while (m := head_key.match(head, pos)) is not None:
        key, pos = m.group(1), m.end()
        if key in (b"result", b"error"):
            kind = RESPONSE if key == b"result" else ERROR
            break
        value = head_value.match(head, pos)
        if value is None:
            break
        pos = value.end()
        if key == b"id":
            rpc_id = value.group(0).decode("utf-8", "replace")
        elif key == b"method" and value.group(0).startswith(b'"'):
            method = orjson.loads(value.group(0))
    if kind == INVALID and method is not None:
        kind = REQUEST if rpc_id is not None else NOTIFICATION
    return Classified(kind, rpc_id, method, None)


# a notification without params, as the SDKs write one (compact, either member first), whose
# method holds no escape: read without a parser (see ``id_json``), and without a regular
# expression (compiling one was 0.6-0.9 ms of start-up)
_BARE_FORMS = ((b'{"jsonrpc":"2.0","method":"', b'"}'), (b'{"method":"', b'","jsonrpc":"2.0"}'))
_METHOD_BYTES = b"".join(bytes([c]) for c in range(128)
                         if chr(c).isalnum() or chr(c) in "_/.$-")


def bare_notification(raw: bytes) -> str | None:
    """The method of ``raw`` when it is a notification with no other member than ``jsonrpc``
    (``{"jsonrpc":"2.0","method":"notifications/initialized"}``), else None."""
    for head, tail in _BARE_FORMS:
        if raw.startswith(head) and raw.endswith(tail):
            method = raw[len(head):len(raw) - len(tail)]
            if method and not method.translate(None, _METHOD_BYTES):
                return method.decode()
    return None


# where a message's own id can be found without parsing it: among its first members, or as its
# last (a bare `,"id":` can only be an object's key: inside a string a quote is escaped); compiled
# at first use
_ID_AT: list[Any] = []
_TAIL = 256


def _id_patterns() -> list[Any]:
    if not _ID_AT:
        value = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
        _ID_AT.extend((
            re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + value
                       + rb'\s*,'),
            re.compile(rb',\s*"id"\s*:\s*' + value
                       + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z'),
        ))
    return _ID_AT


def with_id(raw: bytes, rid: Any) -> bytes | None:
    """``raw``, a JSON-RPC message, with ``rid`` as its id and every other byte as recorded:
    no parse, no re-serialising (a 100 MB answer is copied once, not parsed and rebuilt).
    None when the id is not where a look without parsing can be sure it is the message's own:
    right after the opening brace (after ``"jsonrpc"`` at most), or as the last member (before
    ``"jsonrpc"`` at most); the SDKs write it at one of the two."""
    span = own_id(raw)
    if span is None:
        return None
    start, end = span
    if len(raw) <= _TAIL * 4:
        return raw[:start] + id_json(rid) + raw[end:]
    return b"".join((raw[:start], id_json(rid), memoryview(raw)[end:]))


def own_id(raw: bytes) -> tuple[int, int] | None:
    """The span of ``raw``'s own id value where a look without parsing can be sure of it (see
    ``with_id``), or None."""
    at_head, at_tail = _ID_AT or _id_patterns()
    found = at_head.match(raw)
    if found is None:
        found = at_tail.search(raw, max(0, len(raw) - _TAIL))
        if found is None:
            return None
    return found.span(1)


def id_cut(raw: bytes) -> tuple[bytes, bytes] | None:
    """``raw`` without its own id's value (the bytes before and after it, joined) and that
    value's text, found where ``with_id`` finds it; None where it finds none. Two messages with
    the same cut differ in their id alone."""
    span = own_id(raw)
    if span is None:
        return None
    start, end = span
    return raw[:start] + raw[end:], raw[start:end]


ID_HEAD = 64 * 1024
"""The first bytes of a message not held in memory that are read to find its id (``id_span``):
in the messages the SDKs write, it lies within the first hundred."""
_HEAD_CUT: list[Any] = []


def _head_cut() -> Any:
    """What ``with_id``'s head pattern matches the start of: its text cut anywhere (a literal
    mid-way, a run of blanks, the id itself), then the end of the text. Built from the same
    parts, each literal byte matched or cut before."""
    if not _HEAD_CUT:
        def cut(parts: list[tuple[bytes, bytes]], rest: bytes) -> bytes:
            # parts: (the part, the part cut short at the end); rest: what may follow whole
            for part, short in reversed(parts):
                rest = b"(?:" + short + b"|" + part + rest + b")"
            return rest

        def literal(text: bytes) -> list[tuple[bytes, bytes]]:
            return [(re.escape(bytes([c])), rb"\Z") for c in text]

        blank = [(rb"\s*", rb"\s*\Z")]
        jsonrpc = literal(b'"jsonrpc"') + blank + literal(b":") + blank + literal(b'"2.0"') \
            + blank + literal(b",") + blank
        value = (rb'(?:-?\d+|"(?:[^"\\]|\\.)*")', rb'(?:-?\d*|"(?:[^"\\]|\\.)*\\?)\Z')
        after = cut(literal(b'"id"') + blank + literal(b":") + blank + [value] + blank, rb"\Z")
        _HEAD_CUT.append(re.compile(
            cut(blank + literal(b"{") + blank,
                b"(?:" + cut(jsonrpc, rb"\Z") + b"|(?:" + b"".join(p for p, _ in jsonrpc)
                + b")?" + after + b")")))
    return _HEAD_CUT[0]


def id_span(head: bytes, size: int, tail: Callable[[int], bytes]) -> tuple[int, int] | None:
    """Where ``with_id`` puts the new id in a message of ``size`` bytes not held in memory:
    the span of the recorded id, found in ``head`` (its first bytes, ``ID_HEAD`` of them or
    all) or else in ``tail(n)`` (its last ``n`` bytes), the very span ``with_id`` finds in the
    whole. None when ``with_id`` would not splice, and when the head read is too short to say
    (the id runs on past it, after some 64 KiB of blanks or a 64 KiB id): the caller then
    reads the message whole, as ``with_id`` does."""
    at_head, at_tail = _id_patterns()
    found = at_head.match(head)
    if found is not None:
        return found.span(1)
    if len(head) < size and _head_cut().match(head) is not None:
        return None
    last = tail(min(size, _TAIL))
    found = at_tail.search(last)
    if found is None:
        return None
    start, end = found.span(1)
    return start + size - len(last), end + size - len(last)


INVALID_ID = "Invalid Request: a request's id must be a string or an integer"
"""The error message replay answers a request whose id MCP does not allow (every revision's
``RequestId``); JSON-RPC calls for Invalid Request (-32600), with a null id."""


def valid_request_id(rid: Any) -> bool:
    """Whether MCP allows ``rid`` as a request's id: a string or an integer (``1e2`` and
    ``1.0`` are integers as JSON Schema counts them; ``true``, ``null``, ``1.5``, objects and
    arrays are not)."""
    kind = type(rid)
    return kind is int or kind is str or (kind is float and rid.is_integer())


def id_text(rid: Any) -> str:
    """The canonical JSON text of a JSON-RPC id."""
    try:
        return id_json(rid).decode()
    except TypeError:  # pragma: no cover - orjson parses only serialisable values
        return repr(rid)


# An id's JSON text and value, for the usual ids (integers, and strings of printable characters
# without quotes or backslashes), without orjson: a replay matching the client's requests by
# their bytes then answers without importing it (15-19 ms of its start-up). Anything else goes
# through orjson, so every id reads and writes exactly as orjson would.


def id_json(rid: Any) -> bytes:
    """The JSON text of an id, as ``dumps`` writes it."""
    if type(rid) is int:
        return str(rid).encode()
    if type(rid) is str and rid.isprintable() and '"' not in rid and "\\" not in rid:
        return b'"' + rid.encode() + b'"'
    return dumps(rid)


def id_value(text: bytes) -> Any:
    """The id whose JSON text is ``text`` (as ``id_cut`` gives it), as ``loads`` reads it."""
    digits = text[1:] if text[:1] == b"-" else text
    if digits.isdigit() and len(digits) < 19 and (digits[:1] != b"0" or len(digits) == 1):
        return int(text)
    if len(text) >= 2 and text[:1] == b'"' and text[-1:] == b'"' and b"\\" not in text \
            and b'"' not in text[1:-1]:
        try:
            value = text[1:-1].decode()
        except UnicodeDecodeError:
            pass
        else:
            if value.isprintable():
                return value
    return loads(text)


class LineFramer:
    """Splits a byte stream into newline-delimited messages.

    ``emit(line, terminated)`` gets every line without its ``\\n``; a last line with no newline
    is emitted by ``close()`` with ``terminated=False``. Kept minimal: it is on the hot path.
    """

    __slots__ = ("_emit", "_partial", "_size", "_limit", "_oversize")

    def __init__(self, emit: Callable[[bytes, bool], None], *, limit: int | None = None,
                 oversize: Callable[[bytes, int], None] | None = None) -> None:
        """``limit``: lines longer than this are not kept whole: ``oversize(first_bytes,
        full_size)`` gets their first ``limit`` bytes instead of ``emit``."""
        self._emit = emit
        self._partial: list[bytes] = []
        self._size = 0
        self._limit = limit
        self._oversize = oversize

    def feed(self, data: bytes) -> None:
        nl = data.find(b"\n")
        if nl < 0:
            if data:
                self._keep(data)
            return
        if self._partial:
            self._keep(data[:nl])
            self._line(True)
        else:
            self._out(data[:nl], len(data[:nl]) if self._limit is not None else 0, True)
        emit = self._emit
        start = nl + 1
        nl = data.find(b"\n", start)
        limit = self._limit
        while nl >= 0:
            if limit is not None and nl - start > limit:
                self._out(data[start:nl], nl - start, True)
            else:
                emit(data[start:nl], True)
            start = nl + 1
            nl = data.find(b"\n", start)
        if start < len(data):
            self._keep(data[start:])

    def _keep(self, part: bytes) -> None:
        """Hold part of an unfinished line, but never more than the limit of it."""
        if self._limit is not None:
            room = self._limit - sum(len(p) for p in self._partial) if self._size < \
                self._limit else 0
            self._size += len(part)
            if room <= 0:
                return
            part = part[:room]
        self._partial.append(part)

    def _line(self, terminated: bool) -> None:
        line = b"".join(self._partial)
        size = self._size
        self._partial.clear()
        self._size = 0
        self._out(line, size, terminated)

    def _out(self, line: bytes, size: int, terminated: bool) -> None:
        if self._limit is not None and size > self._limit and self._oversize is not None:
            self._oversize(line[: self._limit], size)
        else:
            self._emit(line, terminated)

    def close(self) -> None:
        if self._partial or self._size:
            self._line(False)


def progress_token_value(params: Any, key: str | None = None) -> Any:
    """The progress token as sent: ``params._meta.progressToken`` of a request, or
    ``params.progressToken`` of a progress notification (``key="progressToken"``); or None."""
    if not isinstance(params, dict):
        return None
    if key is not None:
        return params.get(key)
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None


def progress_token(params: Any, key: str | None = None) -> str | None:
    """The JSON text of a progress token (see ``progress_token_value``), to compare by."""
    token = progress_token_value(params, key)
    return None if token is None else id_text(token)


def error_message(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response, as bytes: the one builder every part of mcprec uses."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return dumps({"jsonrpc": "2.0", "id": rid, "error": err})


# --- canonical form -------------------------------------------------------------------------


def strip_meta(value: Any) -> Any:
    """``value`` without any ``_meta`` keys (at any depth); ``_meta`` carries volatile data."""
    if isinstance(value, dict):
        return {k: strip_meta(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [strip_meta(v) for v in value]
    return value


def holds_meta(raw: bytes | bytearray) -> bool:
    """Whether a message's bytes may hold a ``_meta`` key (``match_key``'s ``has_meta``): looked
    for only when they hold an underscore at all, found at memchr speed (a 100 KB message
    without one, in-process: 44 -> 1 µs)."""
    return b"_" in raw and b'"_meta"' in raw


def canonical_params(params: Any, *, has_meta: bool = True) -> bytes:
    """The canonical bytes of request params: ``_meta`` dropped, keys sorted, compact.

    ``has_meta=False`` (the raw message holds no ``"_meta"``) skips looking for it.
    """
    if params is None:
        params = {}
    return dumps(strip_meta(params) if has_meta else params, sort_keys=True)


_sha256: Any = None

KEY_SCHEME = "1"
"""Which ``match_key`` made a session's stored keys (``sessions.key_scheme``). Replay trusts
stored keys of this scheme without making one itself, which needs orjson (15-19 ms of a
replay's start): a client sending what it sent when recording is answered with no JSON parser
at all. Change it whenever ``match_key``'s output changes (tests/cassette/test_key_scheme.py holds a
few outputs, and fails then)."""


def match_key(method: str, params: Any, *, has_meta: bool = True) -> str:
    """A short stable hash of method + canonical params, indexed in the cassette.

    SHA-256 because CPUs hash it in hardware: large params (base64 payloads) cost little.
    """
    global _sha256
    if _sha256 is None:  # imported at first use: the first answer (initialize) never needs it
        from hashlib import sha256 as _sha256  # (3 ms); an import statement at every call cost
        # 0.9-1.1 µs of each key (every request recorded or replayed)
    h = _sha256(method.encode())
    h.update(b"\0")
    h.update(canonical_params(params, has_meta=has_meta))
    return h.hexdigest()[:20]
