"""The replay plan: what replay would work out for each recorded request, worked out once.

Replaying a request sent as it was recorded used to read two 15-column rows, the request and
the server's answer (the answer through an index), and to search both for their ids with a
regular expression, every time. The plan holds one row of integers per client request of an
ended session:

- the request's ``messages.id``, and where its id's value lies in its text: its text without
  the id (``wire.id_cut``) is then two slices;
- when the server's whole handling of it is one plain answer (nothing before it, nothing it
  waited for, no HTTP, not ``initialize``): that answer's ``messages.id``, and where its id
  lies. Replay answers with the text around it and the client's id between.

Replay reads the plan a window at a time, joined to the two texts by their row ids.

A row without an answer is a request replay plays the full way (``Matcher.handling``). Texts
longer than ``PLAN_BYTES`` are left out: what a plan saves a request is a fixed cost, nothing
next to copying a large text. The plan holds no text of its own: nothing in it to redact.

The plan is derived data:
- built when a recording ends (``Recorder.finish``), by ``import`` and ``redact`` for the
  sessions they write, for a session whose recorder died when a reader marks it incomplete,
  and for every ended session by the migration that adds it;
- dropped by triggers whenever a message of a session is updated or deleted, by whatever
  writes it, mcprec or not, and by a recorder that continues a session (``replay --mode
  new_episodes``) at its first commit. No trigger watches INSERTs: any trigger on them, even
  one whose WHEN is false, cost the recorder ~4 µs a row (40,000 rows in batches of 500,
  medians of 7: 4.8 -> 8.9 µs);
- read by replay only at ``PLAN_VERSION``: a session without one is replayed the full way, with
  the same result.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .. import wire

PLAN_VERSION = 1
"""What a plan's rows mean; a plan of another version is not read (nor trusted)."""
PLAN_BYTES = 16 * 1024
"""The longest request or answer text a plan points to."""
CHUNK = 20_000
"""A plan is worked out this many seqs at a time."""

SCHEMA = """
-- Per client request of an ended session: what replay needs to answer it (cassette/plan.py).
CREATE TABLE replay_plan (
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,                  -- the request's seq
    request    INTEGER NOT NULL,                  -- its messages.id
    id_at      INTEGER,                           -- where its id's value starts in its text
    id_end     INTEGER,                           -- ... and ends (NULL: none found, too long)
    answer     INTEGER,                           -- messages.id of its plain answer (or NULL)
    answer_id_at  INTEGER,                        -- where that answer's id's value starts
    answer_id_end INTEGER,                        -- ... and ends
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
-- The sessions that have a plan, and its version.
CREATE TABLE replay_plans (
    session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    version    INTEGER NOT NULL
);
CREATE TRIGGER replay_plan_stale_on_update AFTER UPDATE ON messages
WHEN EXISTS (SELECT 1 FROM replay_plans WHERE session_id IN (OLD.session_id, NEW.session_id))
BEGIN
    DELETE FROM replay_plans WHERE session_id IN (OLD.session_id, NEW.session_id);
    DELETE FROM replay_plan WHERE session_id IN (OLD.session_id, NEW.session_id);
END;
CREATE TRIGGER replay_plan_stale_on_delete AFTER DELETE ON messages
WHEN EXISTS (SELECT 1 FROM replay_plans WHERE session_id = OLD.session_id)
BEGIN
    DELETE FROM replay_plans WHERE session_id = OLD.session_id;
    DELETE FROM replay_plan WHERE session_id = OLD.session_id;
END;
"""

_PLAIN_KINDS = (wire.RESPONSE, wire.ERROR)


def rows(conn: sqlite3.Connection, session_id: int, lo: int, hi: int) -> list[tuple[Any, ...]]:
    """The plan rows of one session's client requests at seqs ``lo`` to ``hi - 1``, worked
    out from its messages."""
    requests = conn.execute(
        "SELECT seq, id, method, CASE WHEN length(raw) > ? THEN NULL ELSE raw END "
        "FROM messages WHERE session_id = ? AND seq >= ? AND seq < ? AND kind = 'request' "
        "AND direction = 'client_to_server' ORDER BY seq",
        (PLAN_BYTES, session_id, lo, hi)).fetchall()
    # per request handled: (how many messages, the first one's columns)
    handled: dict[int, list[Any]] = {}
    for row in conn.execute(
            "SELECT context_seq, id, reply_to, kind, waits_for, http IS NOT NULL, "
            "CASE WHEN length(raw) > ? THEN NULL ELSE raw END "
            "FROM messages INDEXED BY messages_by_context "
            "WHERE session_id = ? AND context_seq >= ? AND context_seq < ? "
            "AND direction = 'server_to_client'", (PLAN_BYTES, session_id, lo, hi)):
        seen = handled.get(row[0])
        if seen is None:
            handled[row[0]] = [1, row]
        else:
            seen[0] += 1
    out: list[tuple[Any, ...]] = []
    for seq, mid, method, raw in requests:
        # a text stored as TEXT, not BLOB (by hand): matched the full way
        span = wire.own_id(raw) if type(raw) is bytes else None
        answer = answer_span = None
        seen = handled.get(seq)
        if seen is not None and seen[0] == 1 and method != "initialize":
            _, aid, reply_to, kind, waits_for, http, text = seen[1]
            if reply_to == seq and kind in _PLAIN_KINDS and waits_for is None and not http \
                    and type(text) is bytes:
                answer_span = wire.own_id(text)
                if answer_span is not None:
                    answer = aid
        out.append((session_id, seq, mid, *(span or (None, None)), answer,
                    *(answer_span or (None, None))))
    return out


def build(conn: sqlite3.Connection, session_id: int) -> None:
    """Work out and store one session's plan, in place of any it had (in the caller's
    transaction, if any)."""
    conn.execute("DELETE FROM replay_plan WHERE session_id = ?", (session_id,))
    last = conn.execute("SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?",
                        (session_id,)).fetchone()[0]
    for lo in range(0, last + 1, CHUNK):  # memory stays flat, however long the session
        conn.executemany("INSERT INTO replay_plan VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         rows(conn, session_id, lo, lo + CHUNK))
    conn.execute("INSERT OR REPLACE INTO replay_plans VALUES (?, ?)", (session_id, PLAN_VERSION))


def build_or_skip(conn: sqlite3.Connection, session_id: int) -> Exception | None:
    """``build`` in a savepoint of the caller's transaction; what it raised, if it failed (the
    session then has no plan, and replays the full way)."""
    conn.execute("SAVEPOINT plan")
    try:
        build(conn, session_id)
    except Exception as e:  # noqa: BLE001 - a session stands without its plan
        conn.execute("ROLLBACK TO plan")
        return e
    finally:
        conn.execute("RELEASE plan")
    return None


def drop(conn: sqlite3.Connection, session_id: int) -> None:
    """Drop one session's plan (in the caller's transaction)."""
    conn.execute("DELETE FROM replay_plans WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM replay_plan WHERE session_id = ?", (session_id,))


def build_ended(conn: sqlite3.Connection) -> None:
    """Build the plan of every ended session that has none (in the caller's transaction)."""
    for (sid,) in conn.execute(
            "SELECT id FROM sessions WHERE status != 'recording' AND id NOT IN "
            "(SELECT session_id FROM replay_plans)").fetchall():
        build_or_skip(conn, sid)
