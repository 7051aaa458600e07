"""`record --target URL --max-idle DURATION`: an unattended HTTP recording ends by itself after
that much silence (no request in flight, no traffic), cleanly: exit 0, one line on stderr, every
session ended and committed. Real processes: the SDK's HTTP server peer, the recording proxy,
the SDK client."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.helpers import run_mcprec
from support.http_helpers import run_http_session, start_proxy, start_sdk_http

from mcprec.cassette import open_cassette


def _wait_exit(proc: Any, limit: float) -> float:
    """Seconds until ``proc`` exits by itself (fails after ``limit``)."""
    t0 = time.monotonic()
    while proc.popen.poll() is None:
        if time.monotonic() - t0 > limit:
            proc.kill()
            raise AssertionError(f"still running after {limit} s: {proc.stderr_text()}")
        time.sleep(0.05)
    proc.join_output()
    return time.monotonic() - t0


@pytest.fixture
def upstream() -> Any:
    server = start_sdk_http()
    yield server
    server.stop()


def test_recording_ends_after_the_silence(upstream: Any, tmp_path: Path) -> None:
    """After a session, 3 s of silence ends the proxy: exit 0, one line, the session complete."""
    cassette = tmp_path / "idle.db"
    proxy = start_proxy(upstream.url, cassette, "idle", extra=["--max-idle", "3s"])

    async def scenario(s: Any, run: Any) -> None:
        run.results["add"] = (await s.call_tool("add", {"a": 2, "b": 3})).content[0].text

    run = anyio.run(run_http_session, proxy.url, scenario)
    assert run.results["add"] == "5"
    _wait_exit(proxy, 15)
    assert proxy.popen.returncode == 0, proxy.stderr_text()
    notes = [line for line in proxy.err if "--max-idle" in line]
    assert len(notes) == 1 and notes[0].startswith("mcprec: no traffic for 3 s")
    assert "Traceback" not in proxy.stderr_text(), proxy.stderr_text()
    with open_cassette(cassette) as c:
        s = c.session("idle")
        assert s.status == "complete" and s.ended_at is not None
        assert any(m.method == "tools/call" for m in c.messages(s))


def test_nobody_connecting_ends_it_too(upstream: Any, tmp_path: Path) -> None:
    """No client at all: the proxy ends after the silence with exit 1 (an unattended
    recording that recorded nothing failed), saying so in one line."""
    proxy = start_proxy(upstream.url, tmp_path / "none.db", extra=["--max-idle", "500ms"])
    took = _wait_exit(proxy, 15)
    assert proxy.popen.returncode == 1, proxy.stderr_text()
    assert took < 10
    assert any("no client ever connected: nothing recorded" in line for line in proxy.err)


def test_a_request_in_flight_is_not_silence(upstream: Any, tmp_path: Path) -> None:
    """A tool call that stays quiet for 5 s outlasts --max-idle 3s and is still recorded."""
    cassette = tmp_path / "busy.db"
    proxy = start_proxy(upstream.url, cassette, "busy", extra=["--max-idle", "3s"])

    async def scenario(s: Any, run: Any) -> None:
        result = await s.call_tool("slow", {"steps": 1, "delay_ms": 5000})
        run.results["slow"] = result.content[0].text

    run = anyio.run(run_http_session, proxy.url, scenario)
    assert run.results["slow"] == "done after 1 steps"
    _wait_exit(proxy, 15)
    assert proxy.popen.returncode == 0
    with open_cassette(cassette) as c:
        answers = [m for m in c.messages(c.session("busy")) if m.method == "tools/call"
                   and m.kind == "response"]
    assert len(answers) == 1


@pytest.mark.parametrize("args", [["--target", "http://127.0.0.1:9/mcp", "--max-idle", "soon"],
                                  ["--target", "http://127.0.0.1:9/mcp", "--max-idle", "0"],
                                  ["--max-idle", "1s", "--", "python", "server.py"]])
def test_bad_max_idle_is_one_line(args: list[str], tmp_path: Path) -> None:
    """A bad duration, or --max-idle on a stdio recording: one line, exit 2."""
    out = run_mcprec("record", "-c", str(tmp_path / "x.db"), *args, timeout=30)
    assert out.returncode == 2
    err = out.stderr.decode()
    assert err.count("\n") == 1 and "--max-idle" in err and "Traceback" not in err
