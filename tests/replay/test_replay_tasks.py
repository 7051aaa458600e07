"""Tasks replay as state over time: clients polling faster or slower than the recorded one,
and a client waiting for the status notifications, reach the recorded terminal result no later
than the recorded task duration plus one poll interval."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.helpers import EVERYTHING_DIR, MCPREC, PEERS

TASK_CLIENT = PEERS / "task_client.py"
SERVER = ["node", str(EVERYTHING_DIR / "dist" / "index.js"), "stdio"]


def _client(poll: float, most: int, argv: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(TASK_CLIENT), str(poll), str(most), "--",
                           *argv], capture_output=True, text=True, timeout=90, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A task polled every 0.5 s, recorded from server-everything."""
    cassette = tmp_path_factory.mktemp("tasks") / "t.db"
    live = _client(0.5, 100, [*MCPREC, "record", "-c", str(cassette), "-s", "t", "--",
                              *SERVER])
    assert live["statuses"][-1] == "completed"
    return cassette, live


@pytest.mark.parametrize("poll", [0.1, 0.5, 2.0, 0])
def test_task_clients_reach_the_terminal_result_in_time(
        recorded: tuple[Path, dict[str, Any]], poll: float) -> None:
    """Each poller (0: notification-driven) gets "completed" and the recorded result in time."""
    cassette, live = recorded
    replayed = _client(poll, 100, [*MCPREC, "replay", str(cassette), "-s", "t"])
    assert replayed["statuses"][-1] == "completed"
    assert replayed["result"] == live["result"]
    assert replayed["done"] <= live["done"] + poll + 0.5
    assert replayed["done"] >= live["done"] - 1.5  # by the task's time, not the poll count


def test_a_recording_that_stopped_while_working_says_so(tmp_path: Path) -> None:
    """The last recorded status is answered from then on, and --report names the task."""
    cassette = tmp_path / "stopped.db"
    _client(0.5, 2, [*MCPREC, "record", "-c", str(cassette), "-s", "s", "--", *SERVER])
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(TASK_CLIENT), "0.5", "4", "--", *MCPREC,
                           "replay", str(cassette), "-s", "s", "--report", str(report)],
                          capture_output=True, text=True, timeout=90, check=True)
    replayed = json.loads(done.stdout.strip().splitlines()[-1])
    assert replayed["statuses"] == ["working"] * 4
    unfinished = json.loads(report.read_text())["tasks_unfinished"]
    assert [u["status"] for u in unfinished] == ["working"]
