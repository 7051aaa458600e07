"""The cassette's SQL schema and its named migrations.

A cassette is one SQLite file. ``meta.format_version`` is the number of migrations it has had;
``migrations`` lists them by name. A cassette whose format version is higher than
``FORMAT_VERSION`` was written by a newer mcprec and is refused with a clear message.
Migrations only ever add: a cassette written by this version opens in every later one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

APPLICATION_ID = 0x6D637072  # "mcpr"
PAGE_SIZE = 16384

_INITIAL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE migrations (
    name       TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
);

-- One recorded conversation between one client and one server.
CREATE TABLE sessions (
    id                  INTEGER PRIMARY KEY,
    name                TEXT NOT NULL UNIQUE,
    transport           TEXT NOT NULL,            -- stdio | http | sse
    target              TEXT,                     -- JSON argv (stdio) or URL (http)
    started_at          TEXT NOT NULL,            -- ISO 8601, UTC
    ended_at            TEXT,
    status              TEXT NOT NULL DEFAULT 'recording'
                        CHECK (status IN ('recording', 'complete', 'incomplete')),
    exit_code           INTEGER,                  -- the server's exit code (stdio)
    protocol_version    TEXT,                     -- as agreed in initialize
    client_info         TEXT,                     -- JSON
    server_info         TEXT,                     -- JSON
    client_capabilities TEXT,                     -- JSON
    server_capabilities TEXT,                     -- JSON
    instructions        TEXT,
    tags                TEXT NOT NULL DEFAULT '{}', -- JSON object of user tags
    mcprec_version      TEXT NOT NULL,
    recorder_pid        INTEGER,                  -- to repair sessions whose recorder died
    recorder_host       TEXT
);

-- Every message, in both directions, in the order it was observed.
CREATE TABLE messages (
    id          INTEGER PRIMARY KEY,
    session_id  INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,                 -- 0, 1, 2 ... within the session
    t_ns        INTEGER NOT NULL,                 -- ns since the session started (monotonic)
    direction   TEXT NOT NULL CHECK (direction IN ('client_to_server', 'server_to_client')),
    kind        TEXT NOT NULL
                CHECK (kind IN ('request', 'notification', 'response', 'error', 'batch', 'invalid')),
    rpc_id      TEXT,                             -- JSON text of the JSON-RPC id
    method      TEXT,                             -- for a response: the method it answers
    reply_to    INTEGER,                          -- seq of the request a response answers
    context_seq INTEGER,                          -- seq of the request being handled when this
                                                  -- was sent (for a response: the one it answers)
    follows     INTEGER,                          -- a server message sent on its own: seq of
                                                  -- the client message it came after (-1: none)
    match_key   TEXT,                             -- hash of method + canonical params (requests)
    size        INTEGER NOT NULL,                 -- bytes on the wire, without framing
    raw         BLOB NOT NULL,                    -- the exact bytes, without the framing newline
    http        TEXT,                             -- JSON: exchange, stream, status, event id, headers
    UNIQUE (session_id, seq)
);
-- partial indexes: each covers only the rows it serves, so recording pays less for them
CREATE INDEX messages_by_match ON messages (session_id, method, match_key)
    WHERE kind = 'request';
CREATE INDEX messages_by_reply ON messages (session_id, reply_to) WHERE reply_to IS NOT NULL;
CREATE INDEX messages_by_context ON messages (session_id, context_seq)
    WHERE context_seq IS NOT NULL;
CREATE INDEX messages_by_follows ON messages (session_id, follows) WHERE follows IS NOT NULL;

-- What the server wrote on stderr, line by line.
CREATE TABLE stderr (
    id         INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    t_ns       INTEGER NOT NULL,
    line       TEXT NOT NULL
);
CREATE INDEX stderr_by_session ON stderr (session_id, t_ns);

-- Each request with its response and latency.
CREATE VIEW exchanges AS
SELECT
    q.session_id            AS session_id,
    s.name                  AS session,
    q.seq                   AS request_seq,
    r.seq                   AS response_seq,
    q.direction             AS direction,
    q.method                AS method,
    q.rpc_id                AS rpc_id,
    r.kind                  AS outcome,
    (r.t_ns - q.t_ns) / 1e6 AS latency_ms,
    q.raw                   AS request,
    r.raw                   AS response
FROM messages q
JOIN sessions s ON s.id = q.session_id
LEFT JOIN messages r
       ON r.session_id = q.session_id AND r.reply_to = q.seq AND r.kind IN ('response', 'error')
WHERE q.kind = 'request';
"""

_WAITS_FOR = """
-- a server message that the recording shows waited for a client message (its seq), beyond the
-- request it handles: a cancellation, the answer to a server-to-client request (causality.py)
ALTER TABLE messages ADD COLUMN waits_for INTEGER;
"""


def _backfill_waits_for(conn: sqlite3.Connection) -> None:
    from .causality import backfill

    backfill(conn)


_REDACTION = """
-- Per session: the redaction rules that cleaned it (packs, rules, pack file hashes; JSON), so
-- that replay, verify, redact and scan apply the same ones without repeating them.
CREATE TABLE session_redaction (
    session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    manifest   TEXT NOT NULL
);
-- The cassette's key for hash pseudonyms (redaction strategy "hash"): outside every redacted
-- table, one row, never printed or exported.
CREATE TABLE redaction_salt (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    salt BLOB NOT NULL
);
"""


_BACKPRESSURE = """
-- Per session that had to wait for its recorder: how often forwarding paused until the recorder
-- caught up (back-pressure), for how long in all, and the bound it kept memory within. A session
-- that never paused has no row.
CREATE TABLE session_backpressure (
    session_id  INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    pauses      INTEGER NOT NULL,
    paused_ms   INTEGER NOT NULL,
    bound_bytes INTEGER NOT NULL                -- what the tap held for the recorder, at most
);
"""


def _backfill_client_waits_for(conn: sqlite3.Connection) -> None:
    """A client message's ``waits_for`` (the server message it came after and answered to) for
    the messages recorded before the recorder stored it."""
    from .causality import backfill

    backfill(conn, direction="client_to_server")


_KEY_SCHEME = """
-- Which match_key made the session's stored keys (wire.KEY_SCHEME): replay trusts the keys of
-- its own scheme without making them again. NULL (sessions recorded before): checked.
ALTER TABLE sessions ADD COLUMN key_scheme TEXT;
"""


def _replay_plan(conn: sqlite3.Connection) -> None:
    """The replay plan's tables and triggers (``plan.SCHEMA``), and the plans of the sessions
    recorded before them."""
    from . import plan

    for statement in _statements(plan.SCHEMA):
        conn.execute(statement)
    plan.build_ended(conn)


_LOSSES = """
-- Per session whose recording lost messages (a write failed: the disk was full, the file was
-- removed or made read-only): how many messages were forwarded but not stored, and why. The
-- session is then 'incomplete'. A session that lost nothing has no row.
CREATE TABLE session_losses (
    session_id     INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    lost_messages  INTEGER NOT NULL,
    reason         TEXT NOT NULL
);
"""

_INJECTED_FAULTS = """
-- Faults mcprec record --fault injected into live traffic: each row marks a message the client
-- received in place of (or, for a rug pull's notification, before) what the server sent.
CREATE TABLE injected_faults (
    session_id  INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,                 -- the message, as the client received it
    rule        TEXT NOT NULL,                    -- the rule as given
    effect      TEXT NOT NULL,                    -- poison, rug-pull, error, ...
    request_id  TEXT,                             -- JSON text of the id of the request
    detail      TEXT,                             -- JSON: what (answer | notification), the
                                                  -- size of the server's own answer
    PRIMARY KEY (session_id, seq)
);
"""

MIGRATIONS: list[tuple[str, str | Callable[[sqlite3.Connection], None]]] = [
    ("0001_initial", _INITIAL),
    ("0002_waits_for", _WAITS_FOR),
    ("0003_waits_for_backfill", _backfill_waits_for),
    ("0004_redaction_manifest", _REDACTION),
    ("0005_backpressure", _BACKPRESSURE),
    ("0006_key_scheme", _KEY_SCHEME),
    ("0007_replay_plan", _replay_plan),
    ("0008_session_losses", _LOSSES),
    ("0009_client_waits_for", _backfill_client_waits_for),
    ("0010_injected_faults", _INJECTED_FAULTS),
]

WAITS_FOR_VERSION = 2
"""The first format version whose ``messages`` has ``waits_for``."""
REDACTION_VERSION = 4
"""The first format version with ``session_redaction`` and ``redaction_salt``."""
BACKPRESSURE_VERSION = 5
"""The first format version with ``session_backpressure``."""
KEY_SCHEME_VERSION = 6
"""The first format version whose ``sessions`` has ``key_scheme``."""

PLAN_FORMAT_VERSION = 7
"""The first format version with ``replay_plan`` and ``replay_plans``."""
CLIENT_WAITS_VERSION = 9
"""The first format version whose client messages have ``waits_for``."""

FORMAT_VERSION = len(MIGRATIONS)


def now_iso() -> str:
    from datetime import datetime, timezone  # here: replay never needs it

    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def read_format_version(conn: sqlite3.Connection) -> int | None:
    """The cassette's format version, or None when the file holds no mcprec schema yet."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
    return int(row[0]) if row else None


def migrate(conn: sqlite3.Connection, *, mcprec_version: str) -> None:
    """Apply the migrations this file lacks. Must run inside a write transaction."""
    applied = set()
    if read_format_version(conn) is not None:
        applied = {r[0] for r in conn.execute("SELECT name FROM migrations")}
    for name, step in MIGRATIONS:
        if name in applied:
            continue
        if callable(step):  # a data migration: Python over what the SQL steps made
            step(conn)
        else:
            for statement in _statements(step):
                conn.execute(statement)
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, now_iso()))
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('format_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(FORMAT_VERSION),),
    )
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('created_by', ?) ON CONFLICT (key) DO NOTHING",
        (f"mcprec {mcprec_version}",),
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")


def _statements(sql: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit)."""
    out, buf = [], []
    for line in sql.splitlines(keepends=True):
        buf.append(line)
        candidate = "".join(buf)
        if sqlite3.complete_statement(candidate):
            if candidate.strip():
                out.append(candidate)
            buf = []
    rest = "".join(buf).strip()
    if rest:
        out.append(rest)
    return out
