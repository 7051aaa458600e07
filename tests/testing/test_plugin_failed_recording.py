"""The pytest plugin never keeps a failed recording as the golden: a server that exits before
answering fails the test with its own stderr line and leaves nothing stored, so the next run
(with the server fixed) records; ``all`` never replaces a good session with such a recording;
a no-match hint under pytest names the plugin's option."""

from __future__ import annotations

import contextlib
import sqlite3
import sys

import pytest

from support.plugin_helpers import INNER_ARGS, SDK, add_test
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]

BROKEN = [sys.executable, "-c",
          "import sys; sys.stderr.write('boom: no such config file srv.toml\\n'); sys.exit(2)"]


def _sessions(path: object) -> list[str]:
    with contextlib.closing(sqlite3.connect(str(path))) as db:
        return [name for (name,) in db.execute("SELECT name FROM sessions ORDER BY id")]


def test_a_failed_recording_is_not_kept_and_the_fixed_server_records(
        pytester: pytest.Pytester) -> None:
    """once with a broken server: the test fails naming the server's stderr line, nothing is
    stored; once again with the server fixed records and passes, and plain replay passes."""
    pytester.makepyfile(test_inner=add_test(f"server={BROKEN!r}"))
    result = pytester.runpytest("--mcprec-mode=once", *INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*boom: no such config file srv.toml*"])
    cassette = pytester.path / "cassettes" / "test_inner" / "test_add.db"
    assert not cassette.exists() or _sessions(cassette) == []
    pytester.makepyfile(test_inner=add_test(f"server={SDK!r}"))
    pytester.runpytest("--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    assert _sessions(cassette) == ["default"]
    pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_all_with_a_broken_server_keeps_the_good_session(pytester: pytest.Pytester) -> None:
    """--mcprec-mode=all with a broken server fails the test and leaves the committed good
    recording as it was: plain replay still passes."""
    pytester.makepyfile(test_inner=add_test(f"server={SDK!r}"))
    pytester.runpytest("--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_inner" / "test_add.db"
    before = _sessions(cassette)
    pytester.makepyfile(test_inner=add_test(f"server={BROKEN!r}"))
    result = pytester.runpytest("--mcprec-mode=all", *INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*boom: no such config file srv.toml*"])
    assert _sessions(cassette) == before
    pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_a_no_match_hint_names_the_plugin_option(pytester: pytest.Pytester) -> None:
    """A request the recording cannot answer fails the test with a hint in pytest's terms
    (--mcprec-mode=new_episodes), never `once`, which does not re-record."""
    pytester.makepyfile(test_inner=add_test(f"server={SDK!r}"))
    pytester.runpytest("--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    pytester.makepyfile(test_inner=add_test(f"server={SDK!r}").replace('"a": 2', '"a": 7'))
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "--mcprec-mode=new_episodes" in text, text
    assert "--mode new_episodes or once" not in text
