"""A recording that fills its disk says so: the session ends 'incomplete' with how many messages
were lost and why (sessions, show, JSON), one stderr line names the cause, the exit status is
74, and every message is still forwarded to the client. Real tmpfs mounts, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.helpers import MCPREC, PEERS, run_mcprec
from support.line_client import LineClient, reap_line_clients  # noqa: F401

BIG = [sys.executable, str(PEERS / "big_result_server.py")]
CALLS = 60
SIZE = 40_000  # 60 answers of 40 KB: 2.4 MB through a 1.5 MiB disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1.5 MiB tmpfs of its own (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _drive(argv: list[str]) -> tuple[int, str, int]:
    """Initialize and CALLS large tool calls through ``argv``; (exit status, stderr, answers)."""
    client = LineClient(argv)
    client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}})
    assert client.recv(30) is not None
    answers = 0
    for i in range(1, CALLS + 1):
        client.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                     "params": {"name": "image", "arguments": {"size": SIZE}}})
        got = client.recv(30)
        assert got is not None and got.get("id") == i, got
        answers += 1
    code, err = client.close(60)
    return code, err, answers


@pytest.mark.parametrize("durable", [False, True], ids=["batched", "durable"])
def test_a_full_disk_ends_the_session_incomplete_with_the_loss_said(
        small_disk: Path, durable: bool, reap_line_clients: None) -> None:  # noqa: F811
    """stdio, with and without --durable: every answer reaches the client; the cassette says
    'incomplete', how many messages were lost and that the disk was full; exit status 74."""
    cassette = small_disk / "full.db"
    argv = [*MCPREC, "record", "-c", str(cassette), "-s", "s",
            *(["--durable"] if durable else []), "--", *BIG]
    code, err, answers = _drive(argv)
    assert answers == CALLS  # forwarding never stopped
    assert code == 74, err
    assert "disk is full" in err and "lost" in err, err
    assert "Traceback" not in err and "no transaction is active" not in err, err
    listed = run_mcprec("sessions", str(cassette), "--json")
    assert listed.returncode == 0, listed.stderr
    (s,) = json.loads(listed.stdout)
    assert s["status"] == "incomplete"
    assert s["lost"]["reason"] == "the disk is full"
    assert s["lost"]["lost_messages"] > 0
    assert s["messages"] + s["lost"]["lost_messages"] == 2 * (CALLS + 1)  # every message
    table = run_mcprec("sessions", str(cassette))
    assert b"incomplete (lost" in table.stdout
    shown = run_mcprec("show", str(cassette), "s")
    assert b"not recorded: the disk is full" in shown.stdout
    page = cassette.parent.parent / f"view-{durable}.html"
    viewed = run_mcprec("view", str(cassette), "--html", str(page))
    assert viewed.returncode == 0, viewed.stderr
    assert '"lost":{"lost_messages":' in page.read_text() and "the disk is full" in page.read_text()


def test_no_reserve_is_left_behind(tmp_path: Path, reap_line_clients: None) -> None:  # noqa: F811
    """The space a recording holds back for a full disk is given back at its end: a recorded
    and a verified session leave nothing beside the cassette."""
    cassette = tmp_path / "c.db"
    code, err, _ = _drive([*MCPREC, "record", "-c", str(cassette), "-s", "s", "--", *BIG])
    assert code == 0, err
    done = run_mcprec("verify", str(cassette), "-s", "s", "--", *BIG)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("*-reserve"))


def test_the_proxy_ends_its_sessions_incomplete_on_a_full_disk(small_disk: Path) -> None:
    """HTTP: the recording proxy leaves no session 'recording' after a full disk, says the loss
    and exits 74."""
    from support.http_helpers import HTTPRun, run_http_session, run_sync, start_proxy, start_sdk_http

    async def calls(s: Any, run: HTTPRun) -> None:
        for i in range(40):
            result = await s.call_tool("echo", {"text": f"{i} " + "x" * SIZE})
            run.results[str(i)] = result

    upstream = start_sdk_http()
    try:
        cassette = small_disk / "proxy.db"
        proxy = start_proxy(upstream.url, cassette, "h")
        try:
            done = run_sync(lambda: run_http_session(proxy.url, calls, timeout=60))
            assert len(done.results) == 41  # initialize and 40 calls: forwarding never stopped
        finally:
            code, _ = proxy.stop(timeout=60)
        err = proxy.stderr_text()
        assert code == 74, err
        assert "disk is full" in err, err
        listed = run_mcprec("sessions", str(cassette), "--json")
        assert listed.returncode == 0, listed.stderr
        statuses = {s["status"] for s in json.loads(listed.stdout)}
        assert "recording" not in statuses and "incomplete" in statuses, statuses
    finally:
        upstream.stop()
