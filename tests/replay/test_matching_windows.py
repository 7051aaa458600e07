"""Look-ups read recorded traffic ahead in windows: a request is found wherever it lies, and
identical requests are answered in recorded order across windows, in a real cassette."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcprec import wire
from mcprec.cassette import Cassette
from mcprec.record.writer import open_session_writer
from mcprec.matching import WINDOW, Matcher


def req(i: int, name: str) -> bytes:
    return wire.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": name}})


def ans(i: int, text: str) -> bytes:
    return wire.dumps({"jsonrpc": "2.0", "id": i, "result": {"text": text}})


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """'same' three times (early, past the first window, past the second); 'late' once, far
    past the first window; filler between."""
    path = tmp_path_factory.mktemp("windows") / "w.db"
    w = open_session_writer(path, "s", transport="stdio", target=["x"])
    plan = ["same"] + ["filler"] * WINDOW + ["same"] + ["filler"] * WINDOW + ["late", "same"]
    for i, name in enumerate(plan):
        w.message(wire.CLIENT_TO_SERVER, req(i, name if name != "filler" else f"f{i}"), i * 10)
        w.message(wire.SERVER_TO_CLIENT, ans(i, f"{name} {i}"), i * 10 + 5)
    w.close()
    return path


def answer_text(m: Matcher, name: str) -> Any:
    found = m.match({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}})
    return m.handling(found.request.seq)[-1].json["result"]["text"], found.repeated


def test_identical_requests_across_windows_come_in_recorded_order(cassette: Path) -> None:
    """The three recorded 'same' answers come in order, then the last repeats."""
    with Cassette.open(cassette) as c:
        m = Matcher(c, c.session("s"))
        got = [answer_text(m, "same") for _ in range(4)]
    n = WINDOW
    assert got == [("same 0", False), (f"same {n + 1}", False),
                   (f"same {2 * n + 3}", False), (f"same {2 * n + 3}", True)]


def test_request_far_past_the_read_windows_is_found(cassette: Path) -> None:
    """A request recorded beyond the windows read so far is found by its own look-up."""
    with Cassette.open(cassette) as c:
        m = Matcher(c, c.session("s"))
        assert answer_text(m, "late") == (f"late {2 * WINDOW + 2}", False)
        assert answer_text(m, "same")[0] == "same 0"
        assert answer_text(m, "f5")[0] == "filler 5"


def test_message_fields_are_the_schemas_columns(cassette: Path) -> None:
    """The one field list that reads messages names every column of the table but `size`."""
    from mcprec.cassette.models import MESSAGE_FIELDS

    with Cassette.open(cassette) as c:
        columns = [r[1] for r in c.connection.execute("PRAGMA table_info(messages)")]
    assert sorted(MESSAGE_FIELDS) == sorted(col for col in columns if col != "size")


def test_sqlite_errors_reach_callers_as_cassette_errors(tmp_path: Path) -> None:
    """A failure inside SQLite while reading is a CassetteError naming the cassette."""
    from mcprec.errors import CassetteError

    path = tmp_path / "gone.db"
    w = open_session_writer(path, "s", transport="stdio", target=["x"])
    w.message(wire.CLIENT_TO_SERVER, req(1, "x"), 0)
    w.close()
    with Cassette.open(path) as c:
        s = c.session("s")
        c.connection.execute("DROP TABLE stderr")
        with pytest.raises(CassetteError, match=str(path)):
            list(c.stderr(s))
        c.connection.execute("DROP INDEX messages_by_match")
        with pytest.raises(CassetteError, match="cannot read cassette"):
            c.requests(s, "tools/call")


@pytest.mark.parametrize("limit", [1, 3, 10_000])
def test_forgotten_messages_are_read_again_the_same(cassette: Path, limit: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The matcher keeps only recently used messages (``_Aging``): whatever it forgot comes
    back from the cassette as it was, in order, repeats and look-ups past the windows too."""
    from mcprec import matching

    monkeypatch.setattr(matching._Aging, "LIMIT", limit)
    names = ["f1", "same", "f2", "late", "same", "f1", "same", "same", "f1", "late", "same"]
    with Cassette.open(cassette) as c:
        m = Matcher(c, c.session("s"))
        got = [answer_text(m, name) for name in names]
        again = [(m.handling(2 * i)[-1].raw, m._message(2 * i).raw) for i in (1, 2 * WINDOW + 2)]
    n = WINDOW
    assert got == [("filler 1", False), ("same 0", False), ("filler 2", False),
                   (f"late {2 * n + 2}", False), (f"same {n + 1}", False), ("filler 1", True),
                   (f"same {2 * n + 3}", False), (f"same {2 * n + 3}", True),
                   ("filler 1", True), (f"late {2 * n + 2}", True), (f"same {2 * n + 3}", True)]
    assert again == [(ans(1, "filler 1"), req(1, "f1")),
                     (ans(2 * n + 2, f"late {2 * n + 2}"), req(2 * n + 2, "late"))]
    if limit < 10:
        assert len(m._cache.new) < limit and len(m._cache.old) <= limit
