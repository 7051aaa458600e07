"""Recording's SQL: a session's rows inserted in batches, its end marked, the WAL checkpointed.

``mcprec.record`` turns messages into rows (redacted, classified, paired); ``RowSink`` writes
them. Every SQLite error leaves here as a ``CassetteWriteError``, which says whether the disk
was full.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from .. import wire
from ..errors import CassetteError
from . import plan, schema
from .connect import connect, write_transaction

_INSERTED = ("session_id", "seq", "t_ns", "direction", "kind", "rpc_id", "method", "reply_to",
             "context_seq", "follows", "waits_for", "match_key", "size", "raw", "http")
RAW = _INSERTED.index("raw")
"""The index of ``raw`` in a row."""
# A row binds no None: sqlite3 (Python 3.11) passes None and bytes through its adapter look-up,
# which raises and clears an AttributeError for each (~2,000 instructions a value, ~5 a row).
# A NULL is bound as a stand-in that NULLIF turns into NULL: 0 for a text column (no text equals
# an integer), '' for an integer column (no integer equals a text); a small raw is bound as a
# bytearray (the same BLOB; a larger one is not copied for it). Executemany of 20,000 ~200 B
# rows: 51,100 -> 37,200 instructions a row (callgrind), CPU 10.2 -> 7.7 µs a row.
NO_TEXT = 0
NO_INT = ""
COPIED_BELOW = 4096
"""A raw up to this size is bound as a bytearray (the same BLOB), a larger one as it is."""
_NULLABLE_TEXT = ("rpc_id", "method", "match_key", "http")
_NULLABLE_INT = ("reply_to", "context_seq", "follows", "waits_for")


def _insert_sql(raw: str) -> str:
    values = (raw if c == "raw" else f"NULLIF(?, {NO_TEXT})" if c in _NULLABLE_TEXT
              else f"NULLIF(?, '{NO_INT}')" if c in _NULLABLE_INT else "?" for c in _INSERTED)
    return f"INSERT INTO messages ({', '.join(_INSERTED)}) VALUES ({', '.join(values)})"


_INSERT_MESSAGE = _insert_sql("?")
_INSERT_LARGE = _insert_sql("zeroblob(?)")
# The CHECK constraints of messages (direction, kind) hold for every row the recorder makes:
# checked here, in Python, and SQLite's own check is skipped while the rows are inserted (the
# "kind IN (...)" of six values built a temporary B-tree, a 16 KiB page cleared, for each row).
# Executemany of 20,000 ~200 B rows: 86,700 -> 51,100 instructions a row (callgrind), CPU
# 12.0 -> 10.2 µs a row. A row that breaks one is inserted with the check, which refuses it.
# Switching the check off and on costs ~40 µs a commit (the pragmas, and the statement prepared
# again): not for a few rows.
_CHECKED = frozenset(m.value for m in (*wire.Direction, *wire.Kind))
_UNCHECKED_FROM = 32

_MARK_ENDED = ("UPDATE sessions SET ended_at = ?, exit_code = ? WHERE id = ? AND "
               "status = 'recording'")
_LOCK_RETRIES = 200
_SQLITE_FULL = 13  # sqlite3.SQLITE_FULL from Python 3.11 on


class CassetteWriteError(CassetteError):
    """A recording could not be written: ``full`` when the disk (or the file's quota) was full."""

    def __init__(self, message: str, *, full: bool = False) -> None:
        super().__init__(message)
        self.full = full


def _write_error(e: sqlite3.Error) -> CassetteWriteError:
    code = getattr(e, "sqlite_errorcode", None)
    full = code == _SQLITE_FULL or "disk is full" in str(e) or \
        "No space left" in str(e)
    return CassetteWriteError("the disk is full" if full else str(e), full=full)


RESERVE_BYTES = 256 * 1024
"""Disk space a recording holds back beside its cassette (``<cassette>-reserve``), given up when
the disk fills, so that the session can still be marked incomplete with what it lost (a few
16 KiB pages in the WAL)."""
_reserved: set[str] = set()


def _reserve_path(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
    except sqlite3.Error:
        return None
    return f"{row[2]}-reserve" if row and row[2] else None


def hold_reserve(conn: sqlite3.Connection) -> None:
    """Write the reserve beside the cassette of ``conn`` (once per process and cassette); a
    place that cannot take it (read-only, already full) goes without."""
    path = _reserve_path(conn)
    if path is None or path in _reserved:
        return
    _reserved.add(path)
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * RESERVE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)


def release_reserve(conn: sqlite3.Connection | None = None, *, path: str | None = None) -> bool:
    """Give the reserve's space back (the end of a recording, or a full disk). Whether there
    was one."""
    if path is None:
        path = _reserve_path(conn) if conn is not None else None
    if path is None:
        return False
    _reserved.discard(path)
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


class Pieces:
    """A large message as the pieces it is stored from: redacted stretches of JSON between its
    base64 payloads, and the payloads as views of the bytes read (never joined)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self.size = sum(len(p) for p in parts)


class RowSink:
    """Writes one session's rows on ``conn`` (autocommit mode), a batch per transaction."""

    def __init__(self, conn: sqlite3.Connection, session_id: int) -> None:
        self._conn = conn
        self.session_id = session_id
        self._unplanned = False  # the session's replay plan dropped (at the first commit)
        hold_reserve(conn)

    def commit(self, rows: list[tuple[Any, ...]], errs: list[tuple[Any, ...]],
               meta: dict[str, Any], faults: list[tuple[Any, ...]] | None = None) -> None:
        """Insert ``rows`` (messages) and ``errs`` (stderr lines), update the session's
        ``meta`` columns and mark ``faults`` (``injected_faults`` rows: session id, seq, rule,
        effect, request id, detail) in one transaction, retrying while another writer holds
        the lock."""
        for attempt in range(_LOCK_RETRIES):
            try:
                with write_transaction(self._conn) as conn:
                    if rows:
                        if not self._unplanned:  # a session continued: its plan is stale
                            plan.drop(conn, self.session_id)
                            self._unplanned = True
                        self._insert(rows)
                    if errs:
                        conn.executemany(
                            "INSERT INTO stderr (session_id, t_ns, line) VALUES (?, ?, ?)", errs
                        )
                    if faults:
                        conn.executemany(
                            "INSERT OR REPLACE INTO injected_faults (session_id, seq, rule, "
                            "effect, request_id, detail) VALUES (?, ?, ?, ?, ?, ?)", faults)
                    if meta:
                        cols = ", ".join(f"{k} = ?" for k in meta)
                        conn.execute(f"UPDATE sessions SET {cols} WHERE id = ?",
                                     (*meta.values(), self.session_id))
                return
            except sqlite3.OperationalError as e:
                if "locked" in str(e) or "busy" in str(e):
                    time.sleep(min(0.01 * (attempt + 1), 0.2))
                    continue
                raise _write_error(e) from e
            except sqlite3.Error as e:
                raise _write_error(e) from e
        raise CassetteWriteError("the database stayed locked")

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
            pieces = row[RAW]
            if type(pieces) is not Pieces:
                continue
            if start < i:
                self._conn.executemany(_INSERT_MESSAGE, rows[start:i])
            start = i + 1
            blobopen = getattr(self._conn, "blobopen", None)  # Python 3.11+
            if blobopen is None:
                self._conn.execute(_INSERT_MESSAGE, (*row[:RAW], b"".join(pieces.parts),
                                                     *row[RAW + 1:]))
                continue
            rowid = self._conn.execute(
                _INSERT_LARGE, (*row[:RAW], pieces.size, *row[RAW + 1:])).lastrowid
            assert rowid is not None
            with blobopen("messages", "raw", rowid) as blob:
                for part in pieces.parts:
                    blob.write(part)
        if start < len(rows):
            self._conn.executemany(_INSERT_MESSAGE, rows[start:] if start else rows)

    def finish(self, *, status: str, exit_code: int | None, build_plan: bool
               ) -> BaseException | None:
        """Mark the session ended with ``status``, with its replay plan built in the same
        transaction when ``build_plan``. Returns why the plan could not be built, if it could
        not."""
        try:
            with write_transaction(self._conn) as conn:
                conn.execute(
                    "UPDATE sessions SET ended_at = ?, status = ?, exit_code = ? WHERE id = ?",
                    (schema.now_iso(), status, exit_code, self.session_id),
                )
                # with its end: a reader that sees the session complete sees its plan
                return plan.build_or_skip(conn, self.session_id) if build_plan else None
        except sqlite3.Error as e:
            raise _write_error(e) from e

    def mark_lost(self, *, exit_code: int | None, lost: int, reason: str) -> bool:
        """After a failed write: mark the session ended ``incomplete``, with how many messages
        were lost and why (once the failed transaction is rolled back, a full disk often has
        room for these two small rows). Whether it could."""
        for attempt in range(2):  # the second after giving up the reserve's space
            try:
                with write_transaction(self._conn) as conn:
                    conn.execute(
                        "UPDATE sessions SET ended_at = coalesce(ended_at, ?), status = "
                        "'incomplete', exit_code = coalesce(?, exit_code) WHERE id = ?",
                        (schema.now_iso(), exit_code, self.session_id))
                    conn.execute(
                        "INSERT INTO session_losses (session_id, lost_messages, reason) "
                        "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                        "lost_messages = excluded.lost_messages, reason = excluded.reason",
                        (self.session_id, lost, reason))
                return True
            except sqlite3.Error:
                if attempt or not release_reserve(self._conn):
                    return False
        return False


def mark_ended(path: Any, session_ids: Iterable[int], exit_code: Any, *,
               conn: sqlite3.Connection | None = None, timeout: float | None = None) -> None:
    """``ended_at`` of sessions still recording: readers then wait until they are complete.
    On ``conn``, or a connection of its own; errors are the writer's to report, not this."""
    own = conn is None
    try:
        if conn is None:
            conn = sqlite3.connect(os.path.abspath(path), timeout=timeout, isolation_level=None) \
                if timeout is not None else connect(path, wait=False)
        try:
            for sid in session_ids:
                conn.execute(_MARK_ENDED, (schema.now_iso(), exit_code, sid))
        finally:
            if own:
                conn.close()
    except sqlite3.Error:
        pass


def open_marker(path: Any) -> sqlite3.Connection | None:
    """A connection of its own to mark ends at once (``mark_ended(conn=...)``), or None."""
    try:
        return connect(path, wait=False)
    except (sqlite3.Error, CassetteError):
        return None


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy committed WAL pages into the database file, without waiting for readers."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def manual_checkpoints(conn: sqlite3.Connection) -> None:
    """No automatic checkpoint on this (writing) connection: a thread of its own runs them."""
    conn.execute("PRAGMA wal_autocheckpoint = 0")


DatabaseError = sqlite3.Error
"""What a connection of this module raises (for callers that only suppress it)."""
