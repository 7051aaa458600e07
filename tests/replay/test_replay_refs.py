"""Recorded references to request ids are made live: a 2026-07-28 subscription event names the
live ``subscriptions/listen`` request, whatever request's script plays it."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

from support.helpers import PEERS

from mcprec.cassette import open_cassette

MCPREC = [sys.executable, "-m", "mcprec"]
LISTEN_SERVER = PEERS / "listen_server.py"


async def _listen(argv: list[str]) -> dict[str, Any]:
    from mcp import StdioServerParameters
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:]),
                          mode="2026-07-28") as c:  # type: ignore[arg-type]
            async with c.listen(tools_list_changed=True) as sub:
                honored = str(sub.honored)
                result = await c.call_tool("touch", {"name": "a"})
                event = await asyncio.wait_for(sub.__anext__(), 10)
    return {"honored": honored, "event": type(event).__name__,
            "result": result.model_dump(mode="json", exclude_unset=True,
                                        exclude={"result_type"})}


def test_a_listen_session_replays_its_events_to_the_live_listen(tmp_path: Path) -> None:
    """The event recorded while a tools/call ran names the listen request, not the call."""
    cassette = tmp_path / "listen.db"
    live = asyncio.run(_listen([*MCPREC, "record", "-c", str(cassette), "-s", "l", "--",
                                sys.executable, str(LISTEN_SERVER)]))
    with open_cassette(cassette) as c:
        s = c.session("l")
        event = next(m for m in c.messages(s) if m.method == "notifications/tools/list_changed")
        call = next(m for m in c.messages(s) if m.method == "tools/call")
    assert event.context_seq == call.seq  # played in the call's script
    replayed = asyncio.run(_listen([*MCPREC, "replay", str(cassette), "-s", "l"]))
    assert replayed == live
