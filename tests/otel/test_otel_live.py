"""Spans while recording (``MCPREC_OTLP=URL mcprec record ...``): the recorder process sends
what `export --otlp` would, and a dead or hanging collector never holds recording up."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.helpers import recorded, run_mcprec
from mcprec.cassette import open_cassette
from support.otlp_receiver import Receiver, serve_receiver
from support.replay_helpers import SDK, Run, converse, progress_recorder, record
from test_otel import free_port, otel_scenario


async def short_scenario(s: Any, run: Run) -> None:
    """A few tools, one of them with progress."""
    await s.list_tools()
    await s.call_tool("add", {"a": 2, "b": 3})
    await s.call_tool("slow", {"steps": 2, "delay_ms": 20}, progress_callback=progress_recorder(run))
    run.results["done"] = True


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A fresh receiver for one test."""
    with serve_receiver() as r:
        yield r


def record_logged(cassette: Path, scenario: Any, env: dict[str, str], log: Path) -> Run:
    """Like ``replay_helpers.record``, with stderr in ``log``: the recorder process, which
    outlives `mcprec record` by its last deliveries, writes there too."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv = recorded(cassette, *SDK, extra=("-s", "s1"))
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env})
    run = Run()
    with open(log, "w", encoding="utf-8") as errlog:

        async def main() -> None:
            with anyio.fail_after(30):
                async with stdio_client(params, errlog=errlog) as (read, write):
                    await converse(read, write, scenario, run)

        anyio.run(main)
    return run


def wait_for_line(log: Path, text: str, timeout: float = 15) -> list[str]:
    """The lines of ``log`` once one of them holds ``text``."""
    deadline = time.monotonic() + timeout
    while True:
        lines = log.read_text(encoding="utf-8").splitlines()
        if any(text in line for line in lines):
            return lines
        assert time.monotonic() < deadline, lines
        time.sleep(0.05)


def wait_for_root(receiver: Receiver, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not any(r.span.name == "mcprec session" for r in receiver.spans()):
        assert time.monotonic() < deadline, [r.span.name for r in receiver.spans()]
        time.sleep(0.05)


def summary(receiver: Receiver) -> dict[bytes, tuple[Any, ...]]:
    return {r.span.span_id: (r.span.trace_id, r.span.parent_span_id, r.span.name, r.span.kind,
                             r.span.start_time_unix_nano, r.span.end_time_unix_nano,
                             sorted(r.attrs.items()), r.span.status.code, sorted(r.resource.items()))
            for r in receiver.spans()}


def session_of(cassette: Path) -> Any:
    with open_cassette(cassette) as c:
        return c.session("s1")


def test_live_spans_are_the_ones_export_sends(tmp_path: Path, receiver: Receiver) -> None:
    """Recording with MCPREC_OTLP delivers, as the session goes, the same spans (ids, times,
    attributes) and histograms that exporting the cassette afterwards sends."""
    cassette = tmp_path / "live.db"
    record(cassette, "s1", SDK, otel_scenario, env={"MCPREC_OTLP": receiver.url})
    wait_for_root(receiver)
    live = summary(receiver)
    assert len(live) > 20
    # the histograms go with the last batch, which may land a moment after the root span
    deadline = time.monotonic() + 15
    while not receiver.data_points("mcp.client.operation.duration"):
        assert time.monotonic() < deadline, "no duration histogram delivered"
        time.sleep(0.05)
    with serve_receiver() as later:
        result = run_mcprec("export", str(cassette), "--otlp", later.url)
        assert result.returncode == 0, result.stderr.decode()
        assert summary(later) == live


def test_a_dead_collector_is_said_once_and_recording_goes_on(tmp_path: Path) -> None:
    """Nobody listening at MCPREC_OTLP: the session is recorded whole, the failure is said
    once, and at the end how many spans were not delivered."""
    cassette, log = tmp_path / "dead.db", tmp_path / "stderr.txt"
    run = record_logged(cassette, short_scenario,
                        {"MCPREC_OTLP": f"http://127.0.0.1:{free_port()}"}, log)
    assert run.results["done"]
    session = session_of(cassette)
    assert session.status == "complete" and session.message_count >= 10
    lines = wait_for_line(log, "were not delivered")
    warnings = [line for line in lines if "recording goes on" in line]
    assert len(warnings) == 1 and "cannot connect" in warnings[0]
    assert "spans are dropped" in warnings[0]


def test_a_hanging_collector_does_not_hold_recording_up(tmp_path: Path,
                                                        receiver: Receiver) -> None:
    """A collector that accepts and never answers: the session ends as it would without it."""
    receiver.hang = True
    cassette, log = tmp_path / "hang.db", tmp_path / "stderr.txt"
    start = time.monotonic()
    run = record_logged(cassette, short_scenario, {"MCPREC_OTLP": receiver.url}, log)
    assert time.monotonic() - start < 15
    assert run.results["done"]
    assert session_of(cassette).status == "complete"
    ended = time.monotonic()
    wait_for_line(log, "were not delivered")  # the recorder gives up on the collector in time
    assert time.monotonic() - ended < 8


def test_a_bad_url_is_said_once_and_recording_goes_on(tmp_path: Path) -> None:
    """MCPREC_OTLP that is not an http(s) URL: one line, and recording without export."""
    cassette = tmp_path / "bad.db"
    rec = record(cassette, "s1", SDK, short_scenario, env={"MCPREC_OTLP": "localhost:4318"})
    lines = [line for line in rec.live.stderr.splitlines() if "MCPREC_OTLP" in line]
    assert len(lines) == 1 and "recording without OpenTelemetry export" in lines[0]
    assert session_of(cassette).status == "complete"


def test_record_otlp_option_is_the_environment_variable(tmp_path: Path,
                                                        receiver: Receiver) -> None:
    """`mcprec record --otlp URL` delivers the same live spans as MCPREC_OTLP does."""
    from support.replay_helpers import drive

    cassette = tmp_path / "flag.db"
    drive(recorded(cassette, *SDK, extra=("-s", "s1", "--otlp", receiver.url)), otel_scenario)
    wait_for_root(receiver)
    assert len(summary(receiver)) > 20
