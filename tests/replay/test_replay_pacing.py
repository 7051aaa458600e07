"""--timing recorded --max-gap DURATION: recorded pauses are replayed, each capped at DURATION.
The recording is of the SDK server's ``slow`` tool (three steps, 800 ms apart), replayed to the
official SDK client."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.helpers import MCPREC, SDK_SERVER, record_scenario, run_client, run_mcprec

STEPS, DELAY_MS = 3, 800


async def _slow(session: Any, run: Any) -> None:
    t0 = time.monotonic()
    await session.call_tool("slow", {"steps": STEPS, "delay_ms": DELAY_MS})
    run.results["took"] = time.monotonic() - t0


@pytest.fixture(scope="module")
def slow_cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pacing") / "slow.db"
    run = record_scenario(path, "slow", [sys.executable, str(SDK_SERVER)], _slow)
    assert run.results["took"] >= STEPS * DELAY_MS / 1000
    return path


@pytest.mark.parametrize("transport", ["lean", "asyncio"])
def test_max_gap_caps_each_recorded_pause(slow_cassette: Path, transport: str) -> None:
    """Pauses of 800 ms replay as 100 ms: the call takes about 0.3 s, not 2.4 s."""
    extra = ([] if transport == "lean" else
             ["--mode", "new_episodes", "--", sys.executable, str(SDK_SERVER)])
    run = run_client([*MCPREC, "replay", str(slow_cassette), "--timing", "recorded",
                      "--max-gap", "100ms", *extra], _slow)
    assert 0.25 <= run.results["took"] < 1.5, run.results["took"]


def test_max_gap_above_the_pauses_changes_nothing(slow_cassette: Path) -> None:
    """A cap longer than every pause leaves the recorded timing as it was."""
    run = run_client([*MCPREC, "replay", str(slow_cassette), "--timing", "recorded",
                      "--max-gap", "5s"], _slow)
    assert run.results["took"] >= STEPS * DELAY_MS / 1000 * 0.9, run.results["took"]


@pytest.mark.parametrize("args", [["--timing", "recorded", "--max-gap", "soon"],
                                  ["--timing", "recorded", "--max-gap", "-1s"],
                                  ["--max-gap", "2s"]])
def test_bad_max_gap_is_one_line(slow_cassette: Path, args: list[str]) -> None:
    """A duration that does not parse, or --max-gap without --timing: one line, exit 2."""
    out = run_mcprec("replay", str(slow_cassette), *args)
    assert out.returncode == 2
    err = out.stderr.decode()
    assert err.count("\n") == 1 and "--max-gap" in err and "Traceback" not in err


def test_max_gap_over_http(tmp_path: Path) -> None:
    """Over HTTP too: a recorded 3 x 800 ms stream replays in about 0.3 s with --max-gap 100ms."""
    import anyio

    from support.http_helpers import run_http_session, start_proxy, start_replay, start_sdk_http

    cassette = tmp_path / "http.db"
    upstream = start_sdk_http()
    try:
        proxy = start_proxy(upstream.url, cassette, "slow")
        recorded = anyio.run(run_http_session, proxy.url, _slow)
        assert proxy.stop()[0] == 0
    finally:
        upstream.stop()
    assert recorded.results["took"] >= STEPS * DELAY_MS / 1000
    replay = start_replay(cassette, extra=["--timing", "recorded", "--max-gap", "100ms"])
    run = anyio.run(run_http_session, replay.url, _slow)
    assert replay.stop()[0] == 0, replay.stderr_text()
    assert 0.25 <= run.results["took"] < 1.5, run.results["took"]
