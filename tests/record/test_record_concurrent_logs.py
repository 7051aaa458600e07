"""Several requests in flight at once: the recording attributes each log message so that replay
plays them in the order the server sent them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from support.helpers import PEERS, run_client

MCPREC = [sys.executable, "-m", "mcprec"]
LOG_SERVER = [sys.executable, str(PEERS / "log_server.py")]
# three calls sent at once, each logging at its own time; answers out of the order sent
CALLS = [("warning", 300, 0), ("debug", 100, 250), ("info", 200, 20)]


async def _at_once(session: Any, run: Any) -> None:
    async with anyio.create_task_group() as tg:
        for level, before, after in CALLS:
            tg.start_soon(session.call_tool, "log_at",
                          {"level": level, "before_ms": before, "after_ms": after})


def _levels(run: Any) -> list[str]:
    return [log["level"] for log in run.logs]


def test_concurrent_calls_replay_the_live_log_order(tmp_path: Path) -> None:
    """Three tools/call at once to an SDK server whose tool logs at different times: replay
    gives the live log order, 5 runs of 5."""
    cassette = tmp_path / "logs.db"
    live = run_client([*MCPREC, "record", "-c", str(cassette), "--", *LOG_SERVER], _at_once)
    assert _levels(live) == ["debug", "info", "warning"]
    for _ in range(5):
        replayed = run_client([*MCPREC, "replay", str(cassette)], _at_once)
        assert _levels(replayed) == _levels(live)
