"""The reads behind ``mcprec view`` (its cassette opened ``Cassette.open(read_only=True)``):
the look-ups of a page.

Every read here is bounded, whatever the size of a session: a page of the timeline reads its own
rows by ``(session_id, seq)``, their answers through ``messages_by_reply`` and the number of
messages sent while handling each through ``messages_by_context``; a message's text is read up
to a limit (``substr``); a search scans at most a budget of rows per call and says where to go
on. Only the outline of a session (which rows are top-level entries, in order) reads every
row's small columns once; the view keeps it.
"""

from __future__ import annotations

import array
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import CassetteError, NotACassetteError
from . import schema
from .store import Cassette
from .connect import _database_error
from .models import Session, text_bytes


def format_version(cassette: Cassette) -> int:
    return schema.read_format_version(cassette.connection) or 0


# --- rows -------------------------------------------------------------------------------------

_BRIEF = ("seq, t_ns, direction, kind, rpc_id, method, reply_to, context_seq, size, http, "
          "CASE WHEN size <= ? THEN raw END")


@dataclass
class Brief:
    """A message as a list shows it: its small columns, and its text when that is short."""

    seq: int
    t_ns: int
    direction: str
    kind: str
    rpc_id: str | None
    method: str | None
    reply_to: int | None
    context_seq: int | None
    size: int
    http: dict[str, Any] | None
    raw: bytes | None
    """The whole message when it is at most the caller's ``small`` bytes, else None."""


def _brief(row: tuple[Any, ...]) -> Brief:
    seq, t_ns, direction, kind, rpc_id, method, reply_to, context_seq, size, http, raw = row
    try:
        parsed = orjson.loads(http) if http else None
    except orjson.JSONDecodeError as e:
        raise NotACassetteError(f"the cassette is corrupt: message seq {seq} has a damaged "
                                f"http column ({e})") from e
    return Brief(seq, t_ns, direction, kind, rpc_id, method, reply_to, context_seq, size,
                 parsed, text_bytes(raw) if raw is not None else None)


def _translate(path: Path, e: sqlite3.Error) -> CassetteError:
    return _database_error(path, e)


def _rows(c: Cassette, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
    try:
        return c.connection.execute(sql, args).fetchall()
    except sqlite3.Error as e:
        raise _translate(c.path, e) from e


def _chunks(values: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
    for lo in range(0, len(values), size):
        yield values[lo:lo + size]


def sessions(c: Cassette) -> list[tuple[Session, int, int]]:
    """Every session, oldest first, with its number of messages and the time of its last one:
    index look-ups (``Cassette.sessions`` reads every message for the duration)."""
    found = sorted(c.sessions_latest_first(stats=False), key=lambda s: s.id)
    return [(s, *session_extent(c, s)) for s in found]


def unanswered_counts(c: Cassette) -> dict[int, int]:
    """Session id -> requests (either direction) with no recorded answer; sessions with none
    are absent. One pass over the requests, each answer looked up by ``messages_by_reply``."""
    return {int(sid): int(n) for sid, n in _rows(
        c, "SELECT q.session_id, count(*) FROM messages q INDEXED BY messages_by_match "
        "WHERE q.kind = 'request' AND NOT EXISTS (SELECT 1 FROM messages a INDEXED BY "
        "messages_by_reply WHERE a.session_id = q.session_id AND a.reply_to = q.seq) "
        "GROUP BY q.session_id", ())}


def session_extent(c: Cassette, session: Session) -> tuple[int, int]:
    """(number of messages, time of the last one in ns): two index look-ups."""
    count = _rows(c, "SELECT count(*) FROM messages WHERE session_id = ?", (session.id,))[0][0]
    try:
        c.check_read(session, count, exact=session.status != "recording")
    except sqlite3.Error as e:
        raise _translate(c.path, e) from e
    last = _rows(c, "SELECT t_ns FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                 (session.id,))
    return int(count), int(last[0][0]) if last else 0


# --- the outline: a session's top-level entries ------------------------------------------------


@dataclass
class Outline:
    """A session's timeline as a list: each entry a client message, or a server message sent on
    its own, or a stderr line, in time order. Answers, and what the server sent while handling
    a request, belong to the request's entry. ``entries`` holds a message's ``seq``, or
    ``-1 - id`` for the stderr line of that id."""

    entries: array.array[int]
    stamp: tuple[int, int, int]
    """What the outline was built from (last seq, messages, last stderr id): a recording still
    going on changes it."""
    complete: bool = True
    """False for the head of a session (``outline(limit=...)``): its first entries only."""
    duration_ns: int = 0


# a message with an entry of its own: not an answer to a request, nor a server message sent
# while handling one
_TOP_LEVEL = ("NOT (kind IN ('response', 'error') AND reply_to IS NOT NULL) "
              "AND NOT (direction = 'server_to_client' AND context_seq IS NOT NULL)")


def stderr_count(c: Cassette, session: Session) -> int:
    return int(_rows(c, "SELECT count(*) FROM stderr WHERE session_id = ?", (session.id,))[0][0])


def outline_stamp(c: Cassette, session: Session) -> tuple[int, int, int]:
    last = _rows(c, "SELECT coalesce(max(seq), -1), count(*) FROM messages WHERE session_id = ?",
                 (session.id,))[0]
    err = _rows(c, "SELECT coalesce(max(id), 0) FROM stderr WHERE session_id = ?",
                (session.id,))[0][0]
    return int(last[0]), int(last[1]), int(err)


def outline(c: Cassette, session: Session, *, limit: int | None = None) -> Outline:
    """The session's entries: all of them (one pass over its rows' small columns, the texts
    unread), or the first ``limit`` messages' at least (read in order until there are enough,
    so it costs the same on any session)."""
    stamp = outline_stamp(c, session)
    sql = f"SELECT seq, t_ns FROM messages WHERE session_id = ? AND {_TOP_LEVEL} ORDER BY seq"
    if limit is None:
        rows = _rows(c, sql, (session.id,))
    else:
        rows = _rows(c, sql + " LIMIT ?", (session.id, limit))
    complete = limit is None or len(rows) < limit
    if complete:
        errs = _rows(c, "SELECT id, t_ns FROM stderr WHERE session_id = ? ORDER BY t_ns, id",
                     (session.id,))
    else:  # the lines before the head's last message: the rest come after it
        errs = _rows(c, "SELECT id, t_ns FROM stderr WHERE session_id = ? AND t_ns < ? "
                        "ORDER BY t_ns, id", (session.id, rows[-1][1]))
    entries: array.array[int] = array.array("q")
    err_i = 0
    for seq, t_ns in rows:
        while err_i < len(errs) and errs[err_i][1] < t_ns:
            entries.append(-1 - errs[err_i][0])
            err_i += 1
        entries.append(seq)
    for eid, _ in errs[err_i:]:
        entries.append(-1 - eid)
    _, last_ns = session_extent(c, session)
    duration = max(last_ns, errs[-1][1] if errs and complete else 0)
    return Outline(entries, stamp, complete, duration)


# --- a page of entries ------------------------------------------------------------------------


@dataclass
class Page:
    """The rows behind some entries: messages by seq, their answers by request seq, the number
    of messages sent while handling each request, and stderr lines by id."""

    messages: dict[int, Brief]
    answers: dict[int, Brief]
    children: dict[int, int]
    stderr: dict[int, tuple[int, str]]


def page(c: Cassette, session: Session, entries: Sequence[int], *, small: int) -> Page:
    """What ``entries`` (outline values) show: at most a few indexed reads per 500 entries."""
    seqs = [e for e in entries if e >= 0]
    err_ids = [-1 - e for e in entries if e < 0]
    messages: dict[int, Brief] = {}
    answers: dict[int, Brief] = {}
    children: dict[int, int] = {}
    stderr: dict[int, tuple[int, str]] = {}
    for part in _chunks(seqs):
        marks = ", ".join("?" * len(part))
        for row in _rows(c, f"SELECT {_BRIEF} FROM messages WHERE session_id = ? "
                            f"AND seq IN ({marks})", (small, session.id, *part)):
            b = _brief(row)
            messages[b.seq] = b
        requests = [s for s in part if s in messages and messages[s].kind == "request"]
        answers.update(_answers(c, session, requests, small))
        children.update(_child_counts(c, session, requests))
    for part in _chunks(err_ids):
        for eid, t_ns, line in _rows(
                c, f"SELECT id, t_ns, line FROM stderr WHERE session_id = ? "
                   f"AND id IN ({', '.join('?' * len(part))})", (session.id, *part)):
            stderr[eid] = (t_ns, line)
    return Page(messages, answers, children, stderr)


def _answers(c: Cassette, session: Session, requests: Sequence[int], small: int
             ) -> dict[int, Brief]:
    found: dict[int, Brief] = {}
    for part in _chunks(requests):
        for row in _rows(c, f"SELECT {_BRIEF} FROM messages INDEXED BY messages_by_reply "
                            "WHERE session_id = ? AND kind IN ('response', 'error') "
                            f"AND reply_to IN ({', '.join('?' * len(part))})",
                         (small, session.id, *part)):
            b = _brief(row)
            assert b.reply_to is not None
            if b.reply_to not in found or b.seq < found[b.reply_to].seq:
                found[b.reply_to] = b  # the first answer, as replay takes it
    return found


def _child_counts(c: Cassette, session: Session, requests: Sequence[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    for part in _chunks(requests):
        for ctx, n in _rows(c, "SELECT context_seq, count(*) FROM messages "
                               "INDEXED BY messages_by_context WHERE session_id = ? "
                               "AND direction = 'server_to_client' "
                               "AND kind NOT IN ('response', 'error') "
                               f"AND context_seq IN ({', '.join('?' * len(part))}) "
                               "GROUP BY context_seq", (session.id, *part)):
            found[ctx] = n
    return found


def during(c: Cassette, session: Session, request_seq: int, *, small: int, limit: int
           ) -> tuple[list[Brief], dict[int, Brief], int]:
    """What the server sent while handling a request (its answer aside), in order, at most
    ``limit`` of them; the client's answers to the server's requests among them; and how many
    there are in all."""
    total = _rows(c, "SELECT count(*) FROM messages INDEXED BY messages_by_context "
                     "WHERE session_id = ? AND context_seq = ? AND direction = 'server_to_client' "
                     "AND kind NOT IN ('response', 'error')", (session.id, request_seq))[0][0]
    rows = _rows(c, f"SELECT {_BRIEF} FROM messages INDEXED BY messages_by_context "
                    "WHERE session_id = ? AND context_seq = ? AND direction = 'server_to_client' "
                    "AND kind NOT IN ('response', 'error') ORDER BY seq LIMIT ?",
                 (small, session.id, request_seq, limit))
    found = [_brief(r) for r in rows]
    asked = [b.seq for b in found if b.kind == "request"]
    return found, _answers(c, session, asked, small), int(total)


# --- one message ------------------------------------------------------------------------------


@dataclass
class Full:
    """One message for the detail pane: every column, and its text up to a limit."""

    brief: Brief
    follows: int | None
    waits_for: int | None
    text: bytes
    """The first ``limit`` bytes of the message (all of it when ``len(text) == brief.size``)."""


def message(c: Cassette, session: Session, seq: int, *, limit: int) -> Full | None:
    waits = "waits_for" if format_version(c) >= 2 else "NULL"
    rows = _rows(c, f"SELECT {_BRIEF}, follows, {waits}, substr(raw, 1, ?) FROM messages "
                    "WHERE session_id = ? AND seq = ?", (0, limit, session.id, seq))
    if not rows:
        return None
    row = rows[0]
    return Full(_brief(row[:11]), row[11], row[12], bytes(row[13]))


def answer_seq(c: Cassette, session: Session, request_seq: int) -> int | None:
    rows = _rows(c, "SELECT min(seq) FROM messages INDEXED BY messages_by_reply "
                    "WHERE session_id = ? AND reply_to = ? AND kind IN ('response', 'error')",
                 (session.id, request_seq))
    return rows[0][0] if rows else None


def raw(c: Cassette, session: Session, seq: int) -> bytes | None:
    rows = _rows(c, "SELECT raw FROM messages WHERE session_id = ? AND seq = ?",
                 (session.id, seq))
    return bytes(rows[0][0]) if rows else None


# --- search -----------------------------------------------------------------------------------

SEARCH_FIELDS = ("method", "tool", "kind", "dir", "session")
# a phrase in double quotes, or any run of non-blanks (`"isError":true` is one literal term)
_TERM = re.compile(r'(?:(\w+):)?(?:"((?:[^"\\]|\\.)*)"(?=\s|$)|(\S+))')
_DIRECTIONS = {"c2s": "client_to_server", "client": "client_to_server",
               "client_to_server": "client_to_server", "s2c": "server_to_client",
               "server": "server_to_client", "server_to_client": "server_to_client"}


@dataclass
class Query:
    """A parsed search: text that must all occur in the message (ASCII letters in any case),
    and fields that must match (``method:tools/call``, ``tool:forecast``, ``kind:error``,
    ``dir:s2c``, ``session:NAME``; ``method:notifications/*`` for a prefix)."""

    text: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.text and not self.fields


def parse_query(q: str) -> Query:
    out = Query()
    for m in _TERM.finditer(q):
        name, quoted, bare = m.group(1), m.group(2), m.group(3)
        value = quoted.replace('\\"', '"') if quoted is not None else bare
        if name is not None and name.lower() in SEARCH_FIELDS:
            out.fields[name.lower()] = value
        else:
            out.text.append(m.group(0) if name is not None and quoted is None else value)
    out.text = [t for t in out.text if t]
    return out


@dataclass
class Hit:
    session_id: int
    seq: int
    t_ns: int
    direction: str
    kind: str
    method: str | None
    rpc_id: str | None
    size: int
    snippet: str
    snippet_start: int
    """Where the snippet starts in the message, in characters (0: at the start)."""
    raw: bytes | None
    """The whole message when it is small enough to check for secrets, else None."""


@dataclass
class SearchPage:
    hits: list[Hit]
    next: tuple[int, int] | None
    """(session id, seq) to go on from, or None when the cassette has been searched through."""
    scanned: int


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _where(q: Query) -> tuple[str, list[Any]]:
    sql, args = [], []
    for t in q.text:
        sql.append("CAST(raw AS TEXT) LIKE ? ESCAPE '\\'")
        args.append(_like(t))
    f = q.fields
    if "method" in f:
        if f["method"].endswith("*"):
            sql.append("method LIKE ? ESCAPE '\\'")
            args.append(_like(f["method"][:-1])[1:])
        else:
            sql.append("method = ?")
            args.append(f["method"])
    if "tool" in f:
        # CASE: only a request was parsed as JSON when recorded, so only there may SQLite parse
        sql.append("CASE WHEN method = 'tools/call' AND kind = 'request' "
                   "THEN json_extract(CAST(raw AS TEXT), '$.params.name') END = ?")
        args.append(f["tool"])
    if "kind" in f:
        sql.append("kind = ?")
        args.append(f["kind"])
    if "dir" in f:
        sql.append("direction = ?")
        args.append(_DIRECTIONS.get(f["dir"].lower(), f["dir"]))
    return " AND ".join(sql) or "1", args


def search(c: Cassette, q: Query, *, start: tuple[int, int] = (0, -1), limit: int = 50,
           budget: int = 200_000, small: int = 256 * 1024, context: int = 60) -> SearchPage:
    """Messages that match ``q``, in session and seq order, from ``start`` (session id, after
    seq) on: at most ``limit`` hits, after scanning at most ``budget`` rows (so one call takes a
    bounded time on any cassette). The text is matched as it was recorded."""
    where, args = _where(q)
    hits: list[Hit] = []
    scanned = 0
    sids = [r[0] for r in _rows(c, "SELECT id FROM sessions WHERE id >= ? ORDER BY id",
                                (start[0],))]
    if "session" in q.fields:
        wanted = {r[0] for r in _rows(c, "SELECT id FROM sessions WHERE name = ?",
                                      (q.fields["session"],))}
        sids = [s for s in sids if s in wanted]
    first = q.text[0].lower() if q.text else None
    pos = "instr(lower(CAST(raw AS TEXT)), ?)" if first else "1"
    for sid in sids:
        after = start[1] if sid == start[0] else -1
        last = _rows(c, "SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?",
                     (sid,))[0][0]
        while after < last:
            if scanned >= budget:
                return SearchPage(hits, (sid, after), scanned)
            window = min(20_000, budget - scanned)
            rows = _rows(c, f"SELECT seq, t_ns, direction, kind, method, rpc_id, size, {pos} "
                            "FROM messages WHERE session_id = ? AND seq > ? AND seq <= ? "
                            f"AND {where} ORDER BY seq LIMIT ?",
                         [*([first] if first else []), sid, after, after + window, *args,
                          limit - len(hits)])
            for seq, t_ns, direction, kind, method, rpc_id, size, at in rows:
                hits.append(_hit(c, sid, seq, t_ns, direction, kind, method, rpc_id, size,
                                 int(at), small, context))
            if len(hits) >= limit:
                return SearchPage(hits, (sid, hits[-1].seq), scanned + hits[-1].seq - after)
            scanned += min(window, last - after)
            after += window
    return SearchPage(hits, None, scanned)


def _hit(c: Cassette, sid: int, seq: int, t_ns: int, direction: str, kind: str,
         method: str | None, rpc_id: str | None, size: int, at: int, small: int,
         context: int) -> Hit:
    begin = max(1, at - context)
    rows = _rows(c, "SELECT substr(CAST(raw AS TEXT), ?, ?), CASE WHEN size <= ? THEN raw END "
                    "FROM messages WHERE session_id = ? AND seq = ?",
                 (begin, 2 * context + 40, small, sid, seq))
    snippet, whole = rows[0]
    return Hit(sid, seq, t_ns, direction, kind, method, rpc_id, size, snippet or "", begin - 1,
               bytes(whole) if whole is not None else None)


# --- cancellations, stderr search, the timeline's filter ----------------------------------------


def cancellations(c: Cassette, session: Session) -> list[tuple[int, int]]:
    """Each ``notifications/cancelled`` of the session with the request it cancels:
    ``(cancel seq, request seq)``, the request being the latest one before the cancel that was
    sent the same way with the cancel's ``requestId``."""
    from ..wire import id_text

    out: list[tuple[int, int]] = []
    for seq, direction, raw in _rows(
            c, "SELECT seq, direction, raw FROM messages WHERE session_id = ? "
               "AND method = 'notifications/cancelled' AND kind = 'notification' ORDER BY seq",
            (session.id,)):
        try:
            rid = orjson.loads(text_bytes(raw))["params"]["requestId"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
        found = _rows(c, "SELECT max(seq) FROM messages WHERE session_id = ? AND seq < ? "
                         "AND direction = ? AND kind = 'request' AND rpc_id = ?",
                      (session.id, seq, direction, id_text(rid)))
        if found and found[0][0] is not None:
            out.append((int(seq), int(found[0][0])))
    return out


def search_stderr(c: Cassette, terms: Sequence[str], session_ids: Sequence[int], *,
                  limit: int = 50) -> list[tuple[int, int, int, str]]:
    """stderr lines holding every one of ``terms`` (any case): ``(session id, line id, t_ns,
    line)``, at most ``limit``, in session and time order."""
    if not terms or not session_ids:
        return []
    where = " AND ".join("line LIKE ? ESCAPE '\\'" for _ in terms)
    marks = ", ".join("?" * len(session_ids))
    rows = _rows(c, f"SELECT session_id, id, t_ns, line FROM stderr WHERE session_id IN ({marks}) "
                    f"AND {where} ORDER BY session_id, t_ns, id LIMIT ?",
                 (*session_ids, *(_like(t) for t in terms), limit))
    return [(int(s), int(i), int(t), str(line)) for s, i, t, line in rows]
