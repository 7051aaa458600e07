"""The pytest plugin's settings, run in pytester: the record mode from the command line,
$MCPREC_MODE, the marker and the ini option (in that order of precedence), the ini option
mcprec_cassette_dir, and --mcprec-skip-missing."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from support.plugin_helpers import INNER_ARGS, SDK, add_test
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]


MODE = '''
import pytest

@pytest.mark.mcprec({marker})
def test_mode(mcprec_mode):
    assert mcprec_mode == {expected!r}
'''


@pytest.mark.parametrize(("cli", "env", "marker", "ini", "expected"), [
    (None, None, None, None, "none"),
    (None, None, None, "once", "once"),
    (None, None, "all", "once", "all"),
    (None, "new_episodes", "all", "once", "new_episodes"),
    ("once", "all", "all", "new_episodes", "once"),
], ids=["default", "ini", "marker-over-ini", "env-over-marker", "cli-over-all"])
def test_mode_precedence(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                         cli: str | None, env: str | None, marker: str | None, ini: str | None,
                         expected: str) -> None:
    """--mcprec-mode, then $MCPREC_MODE, then the marker's mode, then the ini mcprec_mode."""
    if env:
        monkeypatch.setenv("MCPREC_MODE", env)
    if ini:
        pytester.makeini(f"[pytest]\nmcprec_mode = {ini}\n")
    pytester.makepyfile(MODE.format(marker=f"mode={marker!r}" if marker else "",
                                    expected=expected))
    args = [f"--mcprec-mode={cli}"] if cli else []
    pytester.runpytest(*args, *INNER_ARGS).assert_outcomes(passed=1)


@pytest.mark.parametrize("where", ["env", "ini"])
def test_an_unknown_mode_stops_the_run(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A mode that does not exist, in $MCPREC_MODE or the ini file, is a usage error up front."""
    if where == "env":
        monkeypatch.setenv("MCPREC_MODE", "sometimes")
    else:
        pytester.makeini("[pytest]\nmcprec_mode = sometimes\n")
    pytester.makepyfile(MODE.format(marker="", expected="none"))
    result = pytester.runpytest(*INNER_ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mcprec: * is 'sometimes'; choose one of none, once, "
                                 "new_episodes, all*"])


def sessions(path: object) -> list[str]:
    with contextlib.closing(sqlite3.connect(str(path))) as db:
        return [name for (name,) in db.execute("SELECT name FROM sessions ORDER BY id")]


def test_ini_options_record_into_the_cassette_dir_then_replay(pytester: pytest.Pytester) -> None:
    """mcprec_mode = once records under mcprec_cassette_dir (relative to the ini file) as
    <dir>/<module>/<test>.db; without the mode, the same test replays it serverless."""
    pytester.makeini("[pytest]\nmcprec_mode = once\nmcprec_cassette_dir = recordings\n")
    tests = pytester.mkdir("tests")
    (tests / "test_inner.py").write_text(add_test(f"server={SDK!r}"))
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)
    cassette = pytester.path / "recordings" / "test_inner" / "test_add.db"
    assert sessions(cassette) == ["default"]
    assert not (tests / "cassettes").exists()
    pytester.makeini("[pytest]\nmcprec_cassette_dir = recordings\n")
    (tests / "test_inner.py").write_text(add_test("server=['false']"))
    pytester.runpytest("tests", *INNER_ARGS).assert_outcomes(passed=1)


def test_mode_from_the_environment_records(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """MCPREC_MODE=once records as --mcprec-mode=once does, over a marker saying none."""
    monkeypatch.setenv("MCPREC_MODE", "once")
    pytester.makepyfile(add_test(f"mode='none', server={SDK!r}"))
    pytester.runpytest(*INNER_ARGS).assert_outcomes(passed=1)
    assert sessions(pytester.path / "cassettes" / "test_mode_from_the_environment_records"
                    / "test_add.db") == ["default"]


def test_skip_missing_skips_in_mode_none_only(pytester: pytest.Pytester) -> None:
    """--mcprec-skip-missing skips a test whose cassette is missing in mode none, and leaves
    the recording modes alone (there the missing cassette is recorded)."""
    pytester.makepyfile(add_test(f"server={SDK!r}"))
    result = pytester.runpytest("--mcprec-skip-missing", "-rs", *INNER_ARGS)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*mcprec: no cassette at *test_add.db*"])
    pytester.runpytest("--mcprec-skip-missing", "--mcprec-mode=once",
                       *INNER_ARGS).assert_outcomes(passed=1)


def test_the_plugin_knows_the_modes_replay_knows() -> None:
    """The plugin's list of modes (kept to avoid loading replay in every pytest run) is replay's."""
    from mcprec import replay
    from mcprec.testing import plugin as pytest_plugin

    assert pytest_plugin.MODES == replay.MODES
