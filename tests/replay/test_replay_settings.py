"""``ReplaySettings``: one spelling of the replay settings for the command line, the library,
the test helpers and the pytest marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import MCPREC, REPO
from mcprec.errors import UsageError
from mcprec.replay import ReplaySettings
from mcprec.replay.settings import SettingError
from mcprec.testing import replay_args, replay_server

GOLDEN = REPO / "cassettes" / "golden" / "weather.db"


@pytest.mark.parametrize(("given", "timing"), [
    (None, None), ("none", None), ("recorded", 1.0), ("0.5", 0.5), (2, 2.0), (0.25, 0.25)])
def test_every_spelling_of_timing_is_one_value(given: object, timing: float | None) -> None:
    """The marker's strings and the library's numbers are the same settings."""
    assert ReplaySettings(timing=given).timing == timing  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("1.5m", 90.0),
                                                ("3", 3.0), (0.02, 0.02), (0, 0.0)])
def test_every_spelling_of_max_gap_is_seconds(given: object, seconds: float) -> None:
    """A duration's text and a number of seconds give the same max_gap."""
    s = ReplaySettings(timing="recorded", max_gap=given)  # type: ignore[arg-type]
    assert s.max_gap == pytest.approx(seconds)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"timing": "soon"}, "timing is 'soon'; expected none, recorded or a number"),
    ({"timing": -1}, "timing is -1; the scale must not be negative"),
    ({"timing": "recorded", "max_gap": "soon"}, "max_gap is 'soon'; expected a duration"),
    ({"timing": "recorded", "max_gap": "-1s"}, "max_gap is '-1s'"),
    ({"max_gap": "2s"}, "max_gap goes with timing recorded (or a scale)"),
    ({"protocol_version": "newest"}, "protocol_version is 'newest'; choose recorded or rewrite"),
    ({"faults": ["nonsense"]}, "faults #1: fault 'nonsense': write SELECTOR EFFECT"),
    ({"seed": "7"}, "seed is '7'; expected a whole number"),
])
def test_a_bad_setting_is_one_usage_error_naming_it(kwargs: dict[str, object],
                                                    said: str) -> None:
    """Each bad value is refused when the settings are made, in one line naming the setting."""
    with pytest.raises(UsageError) as e:
        ReplaySettings(**kwargs)  # type: ignore[arg-type]
    assert said in str(e.value) and "\n" not in str(e.value)


def test_the_command_line_names_its_options() -> None:
    """The same error, for `mcprec replay`, names --max-gap and --timing."""
    with pytest.raises(SettingError) as e:
        ReplaySettings(max_gap="2s")
    assert e.value.for_cli() == "--max-gap goes with --timing recorded (or a scale)"


def test_settings_are_values() -> None:
    """Equal spellings compare equal; replace() and merged() give checked copies."""
    a = ReplaySettings(timing="recorded", max_gap="500ms", faults="tools/call drop")
    assert a == ReplaySettings(timing=1.0, max_gap=0.5, faults=["tools/call drop"])
    assert a.replace(seed=3).seed == 3 and a.seed is None
    assert a.merged(protocol_version="rewrite").protocol_version == "rewrite"
    assert a.merged() is a
    with pytest.raises(UsageError):
        a.replace(timing=None)  # max_gap without timing
    assert "timing=1.0" in repr(a)


def test_fault_plan_is_fresh_for_each_replay() -> None:
    """Each replay counts its faults from zero, drawn from the settings' seed."""
    s = ReplaySettings(faults=["tools/call drop nth=1"], seed=7)
    one, two = s.fault_plan(), s.fault_plan()
    assert one is not None and two is not None and one is not two
    assert one.seed == two.seed == 7 and [r.text for r in one.rules] == list(s.faults)
    assert ReplaySettings().fault_plan() is None


def test_keywords_and_settings_launch_the_same_replay(tmp_path: Path) -> None:
    """replay_server(settings=...) and the old keywords give one command line; a keyword goes
    over the settings."""
    settings = ReplaySettings(timing="0.5", max_gap="20ms", protocol_version="rewrite",
                              faults=["tools/call drop"], seed=1, allow_unmatched=True)
    by_keywords = replay_server(tmp_path / "c.db", timing="0.5", max_gap="20ms",
                                protocol_version="rewrite", faults=["tools/call drop"],
                                seed=1, allow_unmatched=True)
    assert replay_server(tmp_path / "c.db", settings=settings).args == by_keywords.args
    assert by_keywords.settings == settings
    assert by_keywords.args[4:] == ["--timing", "0.5", "--max-gap", "0.02s",
                                    "--protocol-version", "rewrite", "--allow-unmatched",
                                    "--fault", "tools/call drop", "--seed", "1"]
    assert replay_args("c.db", settings=settings, timing=2)[2:4] == ["--timing", "2.0"]


def test_a_launched_replay_reads_back_what_the_settings_say(tmp_path: Path) -> None:
    """The options replay_args writes are ones `mcprec replay` accepts: a replay launched with
    every setting serves the golden cassette's v1 to a client that only initializes."""
    settings = ReplaySettings(timing="recorded", max_gap="1ms", protocol_version="rewrite",
                              faults=["tools/call error=-32000:busy"], seed=3,
                              allow_unmatched=True)
    report = tmp_path / "r.json"
    argv = [*MCPREC, *replay_args(GOLDEN, session="v1", settings=settings, report_path=report)]
    init = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')
    done = subprocess.run(argv, input=init, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert b'"id":1' in done.stdout and b'"result"' in done.stdout
    assert b"seed 3" in done.stderr and report.exists()


@pytest.mark.parametrize("args", [["--timing", "soon"], ["--max-gap", "1s"],
                                  ["--protocol-version", "newest"], ["--fault", "x"]])
def test_the_command_line_refuses_what_the_settings_refuse(args: list[str]) -> None:
    """`mcprec replay` says a bad setting in one line, exit 2, before opening the cassette."""
    done = subprocess.run([*MCPREC, "replay", str(GOLDEN), *args], capture_output=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.startswith("mcprec: ") and err.count("\n") == 1, err


def test_the_library_takes_typed_settings() -> None:
    """replay_stdio refuses bad settings given as keywords in one UsageError, as the others."""
    code = ("from mcprec import replay_stdio\n"
            "from mcprec.errors import UsageError\n"
            "try:\n"
            f"    replay_stdio({str(GOLDEN)!r}, max_gap=0.5)\n"
            "except UsageError as e:\n"
            "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, stdin=subprocess.DEVNULL)
    assert done.stdout.strip() == "max_gap goes with timing recorded (or a scale)"


def test_in_process_replay_plays_by_the_settings() -> None:
    """replay_streams takes ReplaySettings as the subprocess does: an injected error reaches
    the client, and the yielded replay's report() and check() tell the outcome."""
    import anyio
    from mcp import ClientSession
    from mcp.shared.exceptions import MCPError

    from mcprec.testing import replay_streams

    settings = ReplaySettings(faults=["tools/call:forecast error=-32000:busy nth=1"])

    async def main() -> tuple[Any, str, str]:
        async with replay_streams(GOLDEN, session="v1", settings=settings) as replay:
            async with ClientSession(replay.read, replay.write) as s:
                await s.initialize()
                with pytest.raises(MCPError) as failed:
                    await s.call_tool("forecast", {"city": "Paris"})
                again = await s.call_tool("forecast", {"city": "Paris"})
        return replay, failed.value.error.message, again.content[0].text  # type: ignore[union-attr]

    replay, error, text = anyio.run(main)
    assert error == "busy" and text == "Paris: sunny, 18 °C"
    assert replay.report()["unmatched"] == []
    replay.check()
    with pytest.raises(AssertionError, match="never played"):
        replay.check(all_played=True)
