"""The recorder's inserts (NULLs bound as stand-ins that NULLIF turns back, small raws bound as
bytearrays, the messages' CHECK constraints checked in Python) store exactly the rows that a
plain insert of the same values stores, and refuse what the schema refuses."""

from __future__ import annotations

import base64
import random
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcprec.cassette import rows as row_sql
from mcprec.record import recorder as writer
from mcprec.cassette.store import Cassette
from mcprec.record.recorder import Recorder
from mcprec.redact import Redactor, Rules

C, S = "client_to_server", "server_to_client"
_PLAIN = (f"INSERT INTO messages ({', '.join(row_sql._INSERTED)}) "
          f"VALUES ({', '.join('?' * len(row_sql._INSERTED))})")
_TEXTS = {row_sql._INSERTED.index(c) for c in row_sql._NULLABLE_TEXT}
_INTS = {row_sql._INSERTED.index(c) for c in row_sql._NULLABLE_INT}


class PlainSink(row_sql.RowSink):
    """Inserts each row as it is, None as None and raw as bytes, with every CHECK: the
    reference."""

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            values = [None if (i in _TEXTS and v == row_sql.NO_TEXT and type(v) is int)
                      or (i in _INTS and v == row_sql.NO_INT) else v for i, v in enumerate(row)]
            raw = values[row_sql.RAW]
            if isinstance(raw, row_sql.Pieces):
                raw = b"".join(raw.parts)
            values[row_sql.RAW] = bytes(raw)
            self._conn.execute(_PLAIN, values)


class PlainRecorder(Recorder):
    """A recorder that writes through ``PlainSink``."""

    def __init__(self, conn: Any, session: Any, **kwargs: Any) -> None:
        super().__init__(conn, session, **kwargs)
        self._sink = PlainSink(conn, session.id)


def corpus() -> list[tuple[str, bytes | bytearray, dict[str, Any] | None, str | None]]:
    """Every kind of message and row: requests both ways with answers and errors, progress,
    cancellations, batches, garbage, HTTP details, a truncated one, a large payload, secrets."""
    def j(o: Any) -> bytes:
        return orjson.dumps(o)

    out: list[tuple[str, bytes | bytearray, dict[str, Any] | None, str | None]] = [
        (C, j({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}), None, writer.AUTO),
        (S, j({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "instructions": "hi",
            "serverInfo": {"name": "s", "version": "2"}}}), None, writer.AUTO),
    ]
    rnd = random.Random(18)
    for i in range(1, 120):
        k = i % 9
        if k == 0:
            out += [(C, j({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "arguments": {"password": "hunter2", "q": "Bearer abcdefgh12345678"},
                "_meta": {"progressToken": i}}}), None, writer.AUTO),
                (S, j({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": i, "progress": 1}}), None, writer.AUTO),
                (S, j({"jsonrpc": "2.0", "id": i, "result": {"content": []}}), None, writer.AUTO)]
        elif k == 1:
            out += [(S, j({"jsonrpc": "2.0", "id": f"s{i}", "method": "sampling/createMessage"}),
                     None, writer.AUTO),
                    (C, j({"jsonrpc": "2.0", "id": f"s{i}", "error": {"code": -1}}), None,
                     writer.AUTO)]
        elif k == 2:
            out += [(C, b"not json %d" % i, None, writer.AUTO),
                    (C, j([{"jsonrpc": "2.0", "id": i, "method": "ping"}]), None, writer.AUTO)]
        elif k == 3:
            out += [(C, j({"jsonrpc": "2.0", "id": i, "method": ""}), None, writer.AUTO),
                    (C, j({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": i}}), None, writer.AUTO),
                    (S, j({"jsonrpc": "2.0", "id": i, "error": {"code": 0}}), None, writer.AUTO)]
        elif k == 4:
            out += [(C, j({"jsonrpc": "2.0", "id": i, "method": "tools/list"}),
                     {"exchange": i, "headers": {"authorization": "Bearer zzzzzzzzzz"}}, str(i)),
                    (S, j({"jsonrpc": "2.0", "id": i, "result": {}}), {"status": 200}, None)]
        elif k == 5:
            out += [(S, b'{"jsonrpc":"2.0","id":%d,"result":{"x":"cut' % i,
                     {"truncated": True, "size": 99999}, writer.AUTO)]
        elif k == 6:
            out += [(C, bytearray(j({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                     "params": {"text": "x" * 5000}})), None, writer.AUTO),
                    (C, j({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
                     None, writer.AUTO)]
        elif k == 7 and i < 20:
            data = base64.b64encode(rnd.randbytes(800_000)).decode()
            out += [(S, j({"jsonrpc": "2.0", "id": i, "result": {"content": [
                {"type": "image", "data": data}]}}), None, writer.AUTO)]
        else:
            out += [(C, j({"jsonrpc": "2.0", "id": None, "method": "x"}), None, writer.AUTO)]
    return out


def record(path: Path, cls: type[Recorder], prepare_every: int = 0) -> list[Any]:
    """The corpus recorded by ``cls``: every column of every row, with its SQLite type;
    ``prepare_every``: rows made every this many messages, ahead of the commits."""
    with Cassette.open(path, create=True) as c:
        session = c.create_session("s", transport="stdio", target=["x"])
        rec = cls(c.connection, session, redact=Redactor(Rules(env=False)))
        for n, (direction, raw, http, context) in enumerate(corpus()):
            rec.add(direction, n, raw, http, context)
            if prepare_every and n % prepare_every == 0:
                assert rec.unprepared[0] > 0
                rec.prepare()
                assert rec.unprepared == (0, 0)
            if n % 53 in (0, 7, 52):  # commits of 1, 7 and 45 rows: checked by SQLite or not
                rec.commit()
        rec.finish(exit_code=0)
        assert rec.error is None
        cols = [r[1] for r in c.connection.execute("PRAGMA table_info(messages)")]
        return c.connection.execute(
            f"SELECT {', '.join(f'typeof({x}), {x}' for x in cols)} FROM messages ORDER BY id"
        ).fetchall()


def test_rows_are_stored_as_a_plain_insert_stores_them(tmp_path: Path) -> None:
    """Same values and same SQLite types (NULL, integer, text, blob) in every column."""
    rows = record(tmp_path / "fast.mcpr", Recorder)
    assert rows == record(tmp_path / "plain.mcpr", PlainRecorder)
    types = {t for row in rows for t in row[::2]}
    assert types == {"null", "integer", "text", "blob"}


@pytest.mark.parametrize("every", [1, 3, 20])
def test_rows_made_in_steps_ahead_of_the_commit_are_the_same(tmp_path: Path, every: int) -> None:
    """``prepare`` (the recorder process's, after each take) changes when rows are made, not
    what they hold: redaction, pairing and keys see the messages in the same order."""
    assert record(tmp_path / "steps.mcpr", Recorder, every) == \
        record(tmp_path / "whole.mcpr", Recorder)


@pytest.mark.parametrize("rows", [2, 100])
@pytest.mark.parametrize("direction", ["sideways", "Client_To_Server"])
def test_a_row_the_schema_refuses_is_refused_still(tmp_path: Path, direction: str,
                                                   rows: int) -> None:
    """A direction outside the CHECK fails the commit as before: nothing of it is stored."""
    with Cassette.open(tmp_path / "c.mcpr", create=True) as c:
        session = c.create_session("s", transport="stdio", target=["x"])
        rec = Recorder(c.connection, session)
        for n in range(rows - 1):
            rec.add(C, n, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        rec.add(direction, rows, b'{"jsonrpc":"2.0","id":1,"result":{}}')
        rec.commit()
        assert isinstance(rec.error.__cause__, sqlite3.IntegrityError)
        assert "CHECK constraint failed" in str(rec.error)
        assert c.connection.execute("SELECT count(*) FROM messages").fetchone() == (0,)


def test_checks_hold_on_the_connection_after_a_commit(tmp_path: Path) -> None:
    """The CHECK constraints are skipped for the recorder's inserts alone."""
    with Cassette.open(tmp_path / "c.mcpr", create=True) as c:
        session = c.create_session("s", transport="stdio", target=["x"])
        rec = Recorder(c.connection, session)
        for n in range(100):
            rec.add(C, n, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        rec.commit()
        assert rec.error is None
        with pytest.raises(sqlite3.IntegrityError):
            c.connection.execute("UPDATE sessions SET status = 'bogus'")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=60), st.integers(1, 6))
def test_recent_keys_are_forgotten_as_a_dict_forgets_its_first(keys: list[int],
                                                               limit: int) -> None:
    """``_Recent`` holds what a dict trimmed to its first key past the limit holds, in order."""
    recent: writer._Recent[int, int] = writer._Recent(limit)
    reference: dict[int, int] = {}
    for n, key in enumerate(keys):
        recent.set(key, n)
        reference[key] = n
        if len(reference) > limit:
            del reference[next(iter(reference))]
        assert list(recent.map.items()) == list(reference.items())
