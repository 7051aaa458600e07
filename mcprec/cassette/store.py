"""``Cassette``: an open cassette, read session by session and message by message, and
``open_cassette``.

This package is the only code in mcprec that knows SQL.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .._lazy import orjson

from .. import __version__, wire
from ..errors import CassetteError, SessionNotFoundError
from . import schema
from .connect import (
    _database_error, _hostname, _translated, _translated_iter, abandoned, connect,
    sidecars_absent, write_transaction,
)
from .connect import tidy as _tidy
from .models import MESSAGE_FIELDS, Message, STORED_APART, Session, StderrLine, StoredText, message_from_row


DEFAULT_REDACTION_MANIFEST = (
    '{"env":true,"env_names":[],"keys":[],"packs":["credentials"],"paths":[],"patterns":[],'
    '"salt":null,"strategy":"replace","user_packs":[],"version":1}')
"""The manifest of a session recorded with the default rules alone, as stored (JSON, sorted
keys): ``mcprec.redact.Rules().manifest()``."""



_SESSION_COLUMNS = (
    "s.id, s.name, s.transport, s.target, s.started_at, s.ended_at, s.status, s.exit_code, "
    "s.protocol_version, s.client_info, s.server_info, s.client_capabilities, "
    "s.server_capabilities, s.instructions, s.tags, s.mcprec_version, s.key_scheme"
)
# a cassette of format 5 or older opened read-only cannot be migrated: read it without the column
_SESSION_COLUMNS_V5 = _SESSION_COLUMNS.replace("s.key_scheme", "NULL AS key_scheme")
_SESSION_STATS = (
    "(SELECT count(*) FROM messages m WHERE m.session_id = s.id), "
    "(SELECT coalesce(max(m.t_ns), 0) FROM messages m WHERE m.session_id = s.id)"
)
_MESSAGE_COLUMNS = ", ".join(MESSAGE_FIELDS)
# a cassette of format 1 opened read-only cannot be migrated: read it without the new column
_MESSAGE_COLUMNS_V1 = _MESSAGE_COLUMNS.replace("waits_for", "NULL AS waits_for")
# replay's look-ups: the text of a large message is left in the cassette, its length read in its
# place (SQLite reads a blob's length from the row's header, not its overflow pages). Reading
# 20,000 small rows so: 3.62 -> 3.63 µs of CPU a row (medians of 40 reads)
_LOOKUP_RAW = f"CASE WHEN length(raw) > {STORED_APART} THEN length(raw) ELSE raw END"


# ISO 8601 UTC texts of one format sort as times do
_LATEST = ("coalesce(s.ended_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) DESC, s.id DESC")


class Cassette:
    """An open cassette: ``with Cassette.open(path) as c: for s in c.sessions(): ...``."""

    def __init__(self, path: Path, conn: sqlite3.Connection, *, read_only: bool = False) -> None:
        self.path = path
        self._conn = conn
        self.read_only = read_only
        """Opened so that nothing is written (``connect(read_only=True)``)."""
        try:
            version = schema.read_format_version(conn) or 0
            # read-only, a session whose recorder died is reported incomplete, not repaired
            self._abandoned = abandoned(conn) if read_only else set()
        except (sqlite3.Error, ValueError) as e:
            raise _database_error(path, e if isinstance(e, sqlite3.Error)
                                  else sqlite3.DatabaseError(str(e))) from e
        self._stored: dict[int, int] | None = None
        self._tidy = False
        self._cols = _MESSAGE_COLUMNS if version >= schema.WAITS_FOR_VERSION \
            else _MESSAGE_COLUMNS_V1
        self._session_cols = _SESSION_COLUMNS if version >= schema.KEY_SCHEME_VERSION \
            else _SESSION_COLUMNS_V5
        self._lookup = self._cols.replace(", raw, ", f", {_LOOKUP_RAW}, ")
        self.planned = version >= schema.PLAN_FORMAT_VERSION
        """Whether the cassette has the replay plan's tables (``plan.py``)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False,
             wait: bool = True, read_only: bool = False) -> Cassette:
        """Open a cassette (``wait``: for sessions whose recording is being finished;
        ``read_only``: never writing to it, on a read-only filesystem too; see ``connect``)."""
        tidy = read_only and sidecars_absent(path)
        try:
            conn = connect(path, create=create, wait=wait, read_only=read_only)
        except BaseException:
            if tidy:  # refused (damaged, another format): nothing left beside it either
                _tidy(path)
            raise
        try:
            c = cls(Path(path), conn, read_only=read_only)
        except BaseException:
            conn.close()
            if tidy:
                _tidy(path)
            raise
        c._tidy = tidy
        return c

    def close(self) -> None:
        self._conn.close()
        if self._tidy:  # read-only left a -wal and -shm beside a cassette that had none
            self._tidy = False
            _tidy(self.path)

    def __enter__(self) -> Cassette:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    # --- sessions ---------------------------------------------------------------------------

    @_translated
    def sessions(self) -> list[Session]:
        """All sessions, oldest first."""
        rows = self._conn.execute(
            f"SELECT {self._session_cols}, {_SESSION_STATS} FROM sessions s ORDER BY s.id"
        ).fetchall()
        return self._checked([self._session(r) for r in rows])

    @_translated
    def session(self, name: str | None = None, *, stats: bool = True) -> Session:
        """The session called ``name``, or the latest one when ``name`` is None.

        The latest session is the one whose recording ended last (one still recording counts
        as ending now); among equals, the one created last. A long session started before a
        short one but ending after it is the latest: it holds the most recent traffic.
        """
        counts = _SESSION_STATS if stats else "0, 0"
        if name is None:
            row = self._conn.execute(
                f"SELECT {self._session_cols}, {counts} FROM sessions s "
                f"ORDER BY {_LATEST} LIMIT 1"
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(f"cassette {self.path} holds no sessions yet")
            return self._checked([self._session(row)])[0] if stats else self._session(row)
        row = self._conn.execute(
            f"SELECT {self._session_cols}, {counts} FROM sessions s WHERE s.name = ?",
            (name,),
        ).fetchone()
        if row is None:
            names = [r[0] for r in self._conn.execute("SELECT name FROM sessions ORDER BY id")]
            hint = ", ".join(names[-5:]) if names else "none"
            if len(names) > 5:
                hint = f"{len(names)} in all, the last five: ..., {hint}"
            raise SessionNotFoundError(
                f"cassette {self.path} has no session {name!r} (sessions: {hint}); "
                f"see `mcprec sessions {self.path}`"
            )
        return self._checked([self._session(row)])[0] if stats else self._session(row)

    @_translated
    def sessions_latest_first(self, *, stats: bool = True) -> list[Session]:
        """All sessions, the latest first (see ``session``). Without ``stats`` (message count
        and duration, which read every message), they cost one index look-up each."""
        counts = _SESSION_STATS if stats else "0, 0"
        rows = self._conn.execute(
            f"SELECT {self._session_cols}, {counts} FROM sessions s ORDER BY {_LATEST}"
        ).fetchall()
        found = [self._session(r) for r in rows]
        return self._checked(found) if stats else found

    @_translated
    def session_by_id(self, session_id: int) -> Session:
        row = self._conn.execute(
            f"SELECT {self._session_cols}, 0, 0 FROM sessions s WHERE s.id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(f"cassette {self.path} has no session #{session_id}")
        return self._session(row)

    def _session(self, row: tuple[Any, ...]) -> Session:
        s = Session.from_row(row)
        if s.id in self._abandoned and s.status == "recording":
            s.status = "incomplete"
        return s

    # --- damage: a read that comes up short is an error, never a success -------------------
    # SQLite finds most damage itself (SQLITE_CORRUPT, translated by ``_translated``). What it
    # cannot see is a b-tree page that lost cells: an index that lists fewer rows than the
    # table holds reads short, silently. Each session's messages are counted once through the
    # table's own b-tree (NOT INDEXED: the table's leaf pages, never a large message's
    # overflow pages) and a whole read is held to it. On a 100 MB cassette: 9 ms for every
    # session, against 65 ms for ``PRAGMA quick_check`` (bench/bench_damage.py).

    def stored_counts(self) -> dict[int, int]:
        """Session id -> how many messages the table holds (read once, then kept)."""
        if self._stored is None:
            self._stored = dict(self._conn.execute(
                "SELECT session_id, count(*) FROM messages NOT INDEXED GROUP BY session_id"
            ).fetchall())
        return self._stored

    def check_read(self, session: Session, read: int, *, exact: bool = False) -> None:
        """Raise ``NotACassetteError`` when a whole read of ``session`` got fewer messages
        than the table holds (a damaged index); ``exact`` (a session no longer recording):
        more is damage too."""
        try:
            stored = self.stored_counts().get(session.id, 0)
        except sqlite3.Error as e:
            raise _database_error(self.path, e) from e
        if read < stored or (exact and read > stored):
            raise _damaged(self.path, session, read, stored)

    def _checked(self, sessions: list[Session]) -> list[Session]:
        """``sessions`` (read with their counts), once each count is the table's."""
        for s in sessions:
            self.check_read(s, s.message_count, exact=s.status != "recording")
        return sessions

    def create_session(
        self,
        name: str,
        *,
        transport: str,
        target: Any,
        tags: dict[str, str] | None = None,
        started_at: str | None = None,
        recorder_pid: int | None = None,
    ) -> Session:
        """Insert a new session row (status ``recording``) and return it."""
        try:
            self._conn.execute(
                "INSERT INTO sessions (name, transport, target, started_at, tags, mcprec_version, "
                "recorder_pid, recorder_host, key_scheme) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    name, transport, orjson.dumps(target).decode(), started_at or schema.now_iso(),
                    orjson.dumps(tags or {}).decode(), __version__, recorder_pid,
                    _hostname() if recorder_pid else None, wire.KEY_SCHEME,
                ),
            )
        except sqlite3.IntegrityError as e:
            raise CassetteError(
                f"cassette {self.path} already has a session named {name!r}; choose another "
                "--session name"
            ) from e
        except sqlite3.OperationalError as e:
            raise CassetteError(f"cannot write to cassette {self.path}: {e}") from e
        return self.session(name)

    # --- redaction: the manifest of each session, and the cassette's salt ---------------------

    def redaction_manifests(self, sessions: Any = None) -> dict[int, dict[str, Any]]:
        """Session id -> the redaction manifest it was recorded (or redacted) with; sessions
        without one (recorded before manifests existed) are absent. ``sessions``: only these."""
        try:
            if sessions is None:
                rows = self._conn.execute(
                    "SELECT session_id, manifest FROM session_redaction").fetchall()
            else:
                ids = [s.id if isinstance(s, Session) else int(s) for s in sessions]
                rows = self._conn.execute(
                    "SELECT session_id, manifest FROM session_redaction WHERE session_id IN "
                    f"({', '.join('?' * len(ids))})", ids).fetchall() if ids else []
        except sqlite3.OperationalError:  # a cassette of an older format, read as it is
            return {}
        out: dict[int, dict[str, Any]] = {}
        for sid, text in rows:
            try:
                found = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue
            if isinstance(found, dict):
                out[sid] = found
        return out

    def redaction_beyond_defaults(self, sessions: Any) -> bool:
        """Whether a manifest of these sessions names more than the default rules (one that is
        not ``DEFAULT_REDACTION_MANIFEST``): only then does replay load the manifest's rules,
        so that replaying a cassette recorded with the defaults starts as fast as before."""
        ids = [s.id if isinstance(s, Session) else int(s) for s in sessions]
        if not ids:
            return False
        try:
            return self._conn.execute(
                "SELECT 1 FROM session_redaction WHERE manifest != ? AND session_id IN "
                f"({', '.join('?' * len(ids))}) LIMIT 1",
                (DEFAULT_REDACTION_MANIFEST, *ids)).fetchone() is not None
        except sqlite3.OperationalError:  # a cassette of an older format: no manifests
            return False

    @_translated
    def set_redaction_manifest(self, session: Session | int, manifest: dict[str, Any]) -> None:
        """Store (or replace) a session's redaction manifest."""
        sid = session.id if isinstance(session, Session) else session
        self._conn.execute(
            "INSERT INTO session_redaction (session_id, manifest) VALUES (?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET manifest = excluded.manifest",
            (sid, orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS).decode()))

    def redaction_salt(self, *, create: bool = False, salt: bytes | None = None
                       ) -> bytes | None:
        """The cassette's key for hash pseudonyms; with ``create``, made when the cassette has
        none yet: ``salt`` (another file of the same recording's), else 32 random bytes. Never
        printed: it stays in its own table."""
        try:
            if create:
                self._conn.execute("INSERT INTO redaction_salt (id, salt) VALUES (1, ?) "
                                   "ON CONFLICT (id) DO NOTHING", (salt or os.urandom(32),))
            row = self._conn.execute("SELECT salt FROM redaction_salt WHERE id = 1").fetchone()
        except sqlite3.OperationalError:  # a cassette of an older format, read as it is
            if create:
                raise
            return None
        return None if row is None else bytes(row[0])

    # --- back-pressure: how long forwarding waited for the recorder -------------------------

    def backpressure(self, sessions: Any = None) -> dict[int, dict[str, int]]:
        """Session id -> ``{pauses, paused_ms, bound_bytes}``: how often forwarding paused for
        the recorder to catch up, for how long in all, and the bound it kept memory within.
        Sessions that never paused (or recorded before this was kept) are absent."""
        rows = self._per_session(
            "SELECT session_id, pauses, paused_ms, bound_bytes FROM session_backpressure",
            sessions)
        return {sid: {"pauses": n, "paused_ms": ms, "bound_bytes": bound}
                for sid, n, ms, bound in rows}

    def _per_session(self, sql: str, sessions: Any) -> list[Any]:
        """The rows of ``sql`` (a table keyed by ``session_id``) for ``sessions`` (None: all);
        none where a cassette of an older format has no such table."""
        try:
            if sessions is None:
                return self._conn.execute(sql).fetchall()
            ids = [s.id if isinstance(s, Session) else int(s) for s in sessions]
            return self._conn.execute(
                f"{sql} WHERE session_id IN ({', '.join('?' * len(ids))})",
                ids).fetchall() if ids else []
        except sqlite3.OperationalError:  # a cassette of an older format, read as it is
            return []

    @_translated
    def set_backpressure(self, session: Session | int, *, pauses: int, paused_ms: int,
                         bound_bytes: int) -> None:
        """Store (or replace) how often and how long forwarding paused for the recorder."""
        sid = session.id if isinstance(session, Session) else session
        self._conn.execute(
            "INSERT INTO session_backpressure (session_id, pauses, paused_ms, bound_bytes) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET pauses = "
            "excluded.pauses, paused_ms = excluded.paused_ms, bound_bytes = excluded.bound_bytes",
            (sid, pauses, paused_ms, bound_bytes))

    def losses(self, sessions: Any = None) -> dict[int, dict[str, Any]]:
        """Session id -> ``{lost_messages, reason}`` for sessions whose recording lost messages
        (a write failed). Sessions that lost nothing (or recorded before this was kept) are
        absent."""
        rows = self._per_session(
            "SELECT session_id, lost_messages, reason FROM session_losses", sessions)
        return {sid: {"lost_messages": n, "reason": reason} for sid, n, reason in rows}

    _UPDATABLE = frozenset({
        "ended_at", "status", "exit_code", "protocol_version", "client_info", "server_info",
        "client_capabilities", "server_capabilities", "instructions", "tags", "mcprec_version",
        "recorder_pid",
    })

    @_translated
    def update_session(self, session: Session, **fields: Any) -> None:
        """Set session columns; JSON-valued ones may be given as Python values."""
        unknown = set(fields) - self._UPDATABLE
        if unknown:
            raise ValueError(f"not updatable session fields: {sorted(unknown)}")
        items = [(k, v) for k, v in fields.items() if v is not None]
        if not items:
            return
        if "recorder_pid" in fields:  # the repair on open matches a dead recorder by host too
            items.append(("recorder_host", _hostname()))
        cols = ", ".join(f"{k} = ?" for k, _ in items)
        args = [v if isinstance(v, (str, int)) else orjson.dumps(v).decode() for _, v in items]
        self._conn.execute(f"UPDATE sessions SET {cols} WHERE id = ?", (*args, session.id))
        self._stored = None

    @_translated
    def rename_session(self, old: str, new: str) -> None:
        session = self.session(old)
        try:
            self._conn.execute("UPDATE sessions SET name = ? WHERE id = ?", (new, session.id))
        except sqlite3.IntegrityError as e:
            raise CassetteError(f"cassette {self.path} already has a session named {new!r}") from e

    @_translated
    def delete_session(self, name: str) -> None:
        session = self.session(name)
        with write_transaction(self._conn) as conn:
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session.id,))
            conn.execute("DELETE FROM stderr WHERE session_id = ?", (session.id,))
            with contextlib.suppress(sqlite3.OperationalError):  # an older format: no table
                conn.execute("DELETE FROM injected_faults WHERE session_id = ?", (session.id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session.id,))
        self._stored = None

    # --- messages ---------------------------------------------------------------------------

    @_translated_iter
    def messages(
        self,
        session: Session | str | None = None,
        *,
        kinds: tuple[str, ...] | None = None,
        after_seq: int = -1,
        lookup: bool = False,
    ) -> Iterator[Message]:
        """The session's messages in the order they were observed; ``lookup``: a message longer
        than ``STORED_APART`` without its text, read only if used (a ``StoredMessage``)."""
        s = session if isinstance(session, Session) else self.session(session)
        cols = self._lookup if lookup else self._cols
        sql = f"SELECT {cols} FROM messages WHERE session_id = ? AND seq > ?"
        args: list[Any] = [s.id, after_seq]
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args.extend(kinds)
        sql += " ORDER BY seq"
        whole = after_seq < 0 and not kinds
        if whole:
            self.stored_counts()  # before the read: a session still recording only grows
        read = 0
        for row in self._conn.execute(sql, args):
            read += 1
            yield message_from_row(row, self)
        if whole:
            self.check_read(s, read)

    @_translated
    def message(self, session: Session, seq: int) -> Message | None:
        row = self._conn.execute(
            f"SELECT {self._cols} FROM messages WHERE session_id = ? AND seq = ?",
            (session.id, seq),
        ).fetchone()
        return message_from_row(row) if row else None

    @_translated
    def raw_of(self, message: Message) -> bytes:
        """A message's text, read whole (what ``StoredMessage.raw`` reads at first use)."""
        row = self._conn.execute("SELECT raw FROM messages WHERE id = ?",
                                 (message.id,)).fetchone()
        if row is None:
            raise CassetteError(f"cassette {self.path} no longer holds message seq {message.seq} "
                                f"of session #{message.session_id}")
        return bytes(row[0])

    @_translated
    def open_text(self, message: Message) -> StoredText | None:
        """A message's text to read in pieces (SQLite incremental blob I/O); None where Python
        has none (3.10)."""
        blobopen = getattr(self._conn, "blobopen", None)  # Python 3.11+
        if blobopen is None:
            return None
        return StoredText(blobopen("messages", "raw", message.id, readonly=True), self.path,
                          message.size)

    # --- replay look-ups (all indexed) -------------------------------------------------------
    # They read a message longer than STORED_APART without its text: a StoredMessage (rows of
    # ``window`` become one through ``message_from_row(row, cassette)``).

    @_translated
    def exchanges_by_key(self, session: Session, method: str, match_key: str
                         ) -> tuple[list[Message], dict[int, list[Message]]]:
        """The client's recorded requests with this method and match key, in order, and what
        the server sent while handling each (its answer last). Two indexed reads: measured
        24 µs against 38 µs for one UNION with a sub-select."""
        requests = [message_from_row(r, self) for r in self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_match "
            "WHERE session_id = ? AND method = ? AND match_key = ? AND kind = 'request' "
            "AND direction = 'client_to_server'",
            (session.id, method, match_key),
        )]
        requests.sort(key=lambda m: m.seq)
        handling: dict[int, list[Message]] = {m.seq: [] for m in requests}
        if not requests:
            return requests, handling
        seqs = list(handling)
        for lo in range(0, len(seqs), 500):  # SQLite's limit on parameters is far above 500
            part = seqs[lo:lo + 500]
            for row in self._conn.execute(
                f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_context "
                "WHERE session_id = ? AND direction = 'server_to_client' "
                f"AND context_seq IN ({', '.join('?' * len(part))}) ORDER BY seq",
                (session.id, *part),
            ):
                m = message_from_row(row, self)
                handling[m.context_seq].append(m)  # type: ignore[index]
        return requests, handling

    @_translated
    def window(self, session: Session, lo: int, hi: int
               ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The client's requests recorded at seqs ``lo`` to ``hi - 1``, and what the server sent
        while handling them (whenever it sent it): two indexed range reads. Rows come in
        ``MESSAGE_FIELDS`` order, to become ``Message``s only when used."""
        requests = self._conn.execute(
            f"SELECT {self._lookup} FROM messages WHERE session_id = ? AND seq >= ? AND seq < ? "
            "AND kind = 'request' AND direction = 'client_to_server' ORDER BY seq",
            (session.id, lo, hi),
        ).fetchall()
        handling = self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_context "
            "WHERE session_id = ? AND context_seq >= ? AND context_seq < ? "
            "AND direction = 'server_to_client' ORDER BY seq",
            (session.id, lo, hi),
        ).fetchall()
        return requests, handling

    @_translated
    def plan_window(self, session: Session, lo: int, hi: int) -> list[tuple[Any, ...]] | None:
        """The replay plan's rows (``plan.py``) of the client's requests recorded at seqs
        ``lo`` to ``hi - 1``, in order: (seq, method, match_key, request text or None, its
        id's span (2), plain answer's text or None, its id's span (2), its time); None when the
        session has no plan this mcprec reads. One range read of the plan, with the two texts
        by their row ids, where ``window`` reads two ranges of whole rows, one of them through
        an index (2,000 small requests: 3.6 -> 1.8 µs a request). The rows and the plan's
        version are read in one snapshot: a plan dropped meanwhile (its messages changed) is
        never read in part."""
        if not self.planned:
            return None
        from .plan import PLAN_VERSION

        conn = self._conn
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            rows = conn.execute(
                "SELECT p.seq, r.method, r.match_key, "
                "CASE WHEN p.id_at IS NULL THEN NULL ELSE r.raw END, p.id_at, p.id_end, "
                "a.raw, p.answer_id_at, p.answer_id_end, a.t_ns FROM replay_plan p "
                "JOIN messages r ON r.id = p.request LEFT JOIN messages a ON a.id = p.answer "
                "WHERE p.session_id = ? AND p.seq >= ? AND p.seq < ? ORDER BY p.seq",
                (session.id, lo, hi)).fetchall()
            version = conn.execute("SELECT version FROM replay_plans WHERE session_id = ?",
                                   (session.id,)).fetchone()
        finally:
            if own:
                conn.execute("COMMIT")
        return rows if version is not None and version[0] == PLAN_VERSION else None

    @_translated
    def requests(self, session: Session, method: str) -> list[Message]:
        """The client's recorded requests of one method, in order."""
        found = [message_from_row(r, self) for r in self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_match "
            "WHERE session_id = ? AND method = ? AND kind = 'request' "
            "AND direction = 'client_to_server'",
            (session.id, method),
        )]
        found.sort(key=lambda m: m.seq)
        return found

    @_translated
    def next_request(self, session: Session, after_seq: int) -> Message | None:
        """The client's first recorded request after ``after_seq``."""
        row = self._conn.execute(
            f"SELECT {self._lookup} FROM messages WHERE session_id = ? AND seq > ? "
            "AND kind = 'request' AND direction = 'client_to_server' ORDER BY seq LIMIT 1",
            (session.id, after_seq),
        ).fetchone()
        return message_from_row(row, self) if row else None

    @_translated
    def has_requests(self, session: Session) -> bool:
        """Whether the client sent any request in this session (one index look-up)."""
        return self._conn.execute(
            "SELECT 1 FROM messages INDEXED BY messages_by_match WHERE session_id = ? "
            "AND kind = 'request' AND direction = 'client_to_server' LIMIT 1", (session.id,),
        ).fetchone() is not None

    @_translated
    def has_messages(self, session: Session) -> bool:
        return self._conn.execute(
            "SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session.id,),
        ).fetchone() is not None

    @_translated
    def count_requests(self, session: Session) -> int:
        return int(self._conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = ? AND kind = 'request' "
            "AND direction = 'client_to_server'", (session.id,),
        ).fetchone()[0])

    @_translated
    def request_methods(self, session: Session) -> list[str]:
        return [r[0] for r in self._conn.execute(
            "SELECT DISTINCT method FROM messages WHERE session_id = ? AND kind = 'request' "
            "AND direction = 'client_to_server' ORDER BY method", (session.id,),
        )]

    @_translated
    def handling(self, session: Session, request_seq: int) -> list[Message]:
        """What the server sent while handling a request, its answer last: notifications and
        requests sent in its context, and the response or error to it, in recorded order."""
        found = [message_from_row(r, self) for r in self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_context "
            "WHERE session_id = ? AND context_seq = ? AND direction = 'server_to_client'",
            (session.id, request_seq),
        )]
        found.sort(key=lambda m: m.seq)
        return found

    @_translated
    def followers(self, session: Session, client_seq: int) -> list[Message]:
        """Server messages sent on their own (no request being handled) after the client's
        message ``client_seq`` and before its next one; ``-1`` for the very start."""
        found = [message_from_row(r, self) for r in self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_follows "
            "WHERE session_id = ? AND follows = ?", (session.id, client_seq),
        )]
        found.sort(key=lambda m: m.seq)
        return found

    @_translated
    def has_followers(self, session: Session) -> bool:
        """Whether the server sent anything on its own in this session (cheap)."""
        return self._conn.execute(
            "SELECT 1 FROM messages INDEXED BY messages_by_follows WHERE session_id = ? "
            "AND follows IS NOT NULL LIMIT 1", (session.id,),
        ).fetchone() is not None

    @_translated
    def last_seq(self, session: Session) -> int:
        """The last seq of a session (-1 when it is empty): from the (session, seq) index alone.
        ``last_position``'s latest time reads every row of the session: 40 ms at the first
        look-up of a 120,000-message session, this 0.04 ms."""
        row = self._conn.execute(
            "SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?", (session.id,),
        ).fetchone()
        return int(row[0])

    @_translated
    def last_position(self, session: Session) -> tuple[int, int]:
        """(last seq, last t_ns) of a session; (-1, 0) when it is empty."""
        row = self._conn.execute(
            "SELECT coalesce(max(seq), -1), coalesce(max(t_ns), 0) FROM messages "
            "WHERE session_id = ?", (session.id,),
        ).fetchone()
        return int(row[0]), int(row[1])

    @_translated
    def answer(self, session: Session, request_seq: int) -> Message | None:
        """The recorded response or error to the request ``request_seq`` (either direction)."""
        rows = self._conn.execute(
            f"SELECT {self._lookup} FROM messages INDEXED BY messages_by_reply "
            "WHERE session_id = ? AND reply_to = ? AND kind IN ('response', 'error')",
            (session.id, request_seq),
        ).fetchall()
        return message_from_row(min(rows, key=lambda r: r[2]), self) if rows else None

    @_translated
    def client_messages(self, session: Session, kind: str, method: str | None) -> list[Message]:
        """The client's recorded messages of one kind (and method), in order."""
        sql = (f"SELECT {self._lookup} FROM messages WHERE session_id = ? "
               "AND direction = 'client_to_server' AND kind = ?")
        args: list[Any] = [session.id, kind]
        if method is not None:
            sql += " AND method = ?"
            args.append(method)
        return [message_from_row(r, self) for r in self._conn.execute(sql + " ORDER BY seq", args)]

    @_translated_iter
    def stderr(self, session: Session | str | None = None) -> Iterator[StderrLine]:
        s = session if isinstance(session, Session) else self.session(session)
        for t_ns, line in self._conn.execute(
            "SELECT t_ns, line FROM stderr WHERE session_id = ? ORDER BY id", (s.id,)
        ):
            yield StderrLine(t_ns, line)


def _damaged(path: Path, session: Session, read: int, stored: int) -> CassetteError:
    from ..errors import NotACassetteError

    return NotACassetteError(
        f"{path} is corrupt: session {session.name!r} holds {stored} messages but only {read} "
        "could be read (a damaged page); restore it from a good copy")


def open_cassette(path: str | os.PathLike[str], *, create: bool = False,
                  read_only: bool | None = None) -> Cassette:
    """Open a cassette for reading, read-only: nothing is written to it, on a read-only
    filesystem too (with ``create=True``, writable and made if missing)."""
    return Cassette.open(path, create=create, read_only=not create if read_only is None
                         else read_only)
