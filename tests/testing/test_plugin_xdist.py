"""The pytest plugin under pytest-xdist, run in pytester with two workers: tests that record the
same cassette take turns (a lock next to the cassette), so in mode once one records and the
other, having waited, replays."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from support.plugin_helpers import INNER_ARGS, SDK, add_test
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]


def test_two_workers_recording_one_cassette_take_turns(pytester: pytest.Pytester) -> None:
    """Two tests of one cassette on two workers in mode once: one records, the other waits for
    it and replays; the cassette holds one session, and no lock file is left behind."""
    log = pytester.path / "log.txt"
    test = add_test(f"server={SDK!r}, cassette='cassettes/shared.db'", f"""
        how = "replayed" if mcprec_server.report_path.exists() else "recorded"  # replay reports
        with open({str(log)!r}, "a") as f:
            f.write(how + "\\n")
        """)
    pytester.makepyfile(test_a=test, test_b=test)
    result = pytester.runpytest_subprocess("-n", "2", "--mcprec-mode=once", *INNER_ARGS)
    result.assert_outcomes(passed=2)
    assert sorted(log.read_text().split()) == ["recorded", "replayed"]
    cassette = pytester.path / "cassettes" / "shared.db"
    assert sorted(p.name for p in cassette.parent.iterdir()) == ["shared.db"]
    with contextlib.closing(sqlite3.connect(cassette)) as db:
        assert [n for (n,) in db.execute("SELECT name FROM sessions")] == ["default"]
