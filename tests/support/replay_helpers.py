"""Helpers for the replay tests: record real sessions, then drive `mcprec replay` with the SDK.

A live run goes through `mcprec record` in front of a real server; a replay run starts
`mcprec replay CASSETTE` instead, with no server at all. Both are driven by the same scenario with
the official SDK client, and what the client saw is compared.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from support.helpers import MCPREC, SDK_SERVER, ClientRun, dump, page_through, recorded

SDK = [sys.executable, str(SDK_SERVER)]

# The "slow" call of the main scenario: its recorded latency is what --timing reproduces.
SLOW_STEPS = 4
SLOW_DELAY_MS = 150
SLOW_ARGS = {"steps": SLOW_STEPS, "delay_ms": SLOW_DELAY_MS}
PAGE_SIZE = 5


@dataclass
class Run(ClientRun):
    """What the client saw, plus wall-clock durations of selected calls (not compared)."""

    timings: dict[str, float] = field(default_factory=dict)
    roots_asked: int = 0
    elicitations: list[Any] = field(default_factory=list)


Scenario = Callable[[Any, Run], Awaitable[None]]


def replay_cmd(cassette: str | os.PathLike[str], *options: str) -> list[str]:
    """The argv of ``mcprec replay CASSETTE OPTIONS...``."""
    return [*MCPREC, "replay", str(cassette), *options]


def client_kwargs(run: Run, *, roots: Sequence[str] | None = None, sampling: bool = True,
                  sampling_delay: float = 0.0, elicitation: bool = False,
                  client_info: Any = None) -> dict[str, Any]:
    """``ClientSession`` keyword arguments whose callbacks note what the client sees in ``run``.

    The sampling callback answers ``you asked: <last message>`` (after ``sampling_delay``); roots
    are offered only when ``roots`` is given; with ``elicitation`` the client declines every
    elicitation; ``client_info`` replaces the SDK's own.
    """
    from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

    async def on_sampling(context: Any, params: Any) -> Any:
        run.sampling.append(dump(params))
        if sampling_delay:
            await anyio.sleep(sampling_delay)
        question = params.messages[-1].content.text
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=f"you asked: {question}"),
            model="test-model", stop_reason="endTurn",
        )

    async def on_log(params: Any) -> None:
        run.logs.append(dump(params))

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            run.notifications.append({"exception": repr(message)})
        else:
            run.notifications.append(dump(message))

    async def on_list_roots(context: Any) -> Any:
        run.roots_asked += 1
        return ListRootsResult(roots=[Root(uri=u, name=u.rsplit("/", 1)[-1]) for u in roots or ()])

    async def on_elicit(context: Any, params: Any) -> Any:
        run.elicitations.append(dump(params))
        return ElicitResult(action="decline")

    kwargs: dict[str, Any] = {"logging_callback": on_log, "message_handler": on_message}
    if elicitation:
        kwargs["elicitation_callback"] = on_elicit
    if sampling:
        kwargs["sampling_callback"] = on_sampling
    if roots is not None:
        kwargs["list_roots_callback"] = on_list_roots
    if client_info is not None:
        kwargs["client_info"] = client_info
    return kwargs


async def converse(read: Any, write: Any, scenario: Scenario, run: Run, **kwargs: Any) -> None:
    """Initialize an SDK ``ClientSession`` on these streams and run the scenario."""
    from mcp import ClientSession

    async with ClientSession(read, write, **client_kwargs(run, **kwargs)) as session:
        run.results["initialize"] = dump(await session.initialize())
        await scenario(session, run)


def drive(
    argv: Sequence[str],
    scenario: Scenario,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    **kwargs: Any,
) -> Run:
    """Start ``argv`` as a stdio server, initialize with the SDK client, run the scenario, close.

    Like ``helpers.run_client``, with knobs for the client's side of the conversation (see
    ``client_kwargs``: sampling, its delay, roots, clientInfo).
    """
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    run = Run()
    full_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})}
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=full_env)

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:

        async def main() -> None:
            with anyio.fail_after(timeout):
                async with stdio_client(params, errlog=errlog) as (read, write):
                    await converse(read, write, scenario, run, **kwargs)

        anyio.run(main)
        errlog.seek(0)
        run.stderr = errlog.read()
    return run


def progress_recorder(run: Run) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append((progress, total, message))

    return on_progress


async def timed(run: Run, name: str, call: Awaitable[Any]) -> Any:
    """Await ``call``, noting how long it took in ``run.timings[name]``."""
    start = time.monotonic()
    try:
        return await call
    finally:
        run.timings[name] = time.monotonic() - start


async def quietly(call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Call an SDK method deprecated in the 2026-07-28 revision (logging, subscribe) quietly."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return await call(*args)


# --- scenarios --------------------------------------------------------------------------------


async def main_scenario(s: Any, run: Run) -> None:
    """The main SDK session: tools, identical calls, progress, sampling, resources, prompts."""
    r = run.results
    r["tools/list"] = dump(await s.list_tools())
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["echo"] = dump(await s.call_tool("echo", {"text": "hello"}))
    for i in (1, 2, 3):
        r[f"counter {i}"] = dump(await s.call_tool("counter", {}))
    r["slow"] = dump(await timed(run, "slow", s.call_tool(
        "slow", SLOW_ARGS, progress_callback=progress_recorder(run))))
    r["progress before slow returned"] = len(run.progress)
    r["ask_model"] = dump(await s.call_tool("ask_model", {"question": "why?"}))
    r["resources/list"] = dump(await s.list_resources())
    r["resources/templates/list"] = dump(await s.list_resource_templates())
    r["read static"] = dump(await s.read_resource("test://static/config"))
    r["read template"] = dump(await s.read_resource("test://users/ann/notes/7"))
    r["prompts/list"] = dump(await s.list_prompts())
    r["prompts/get"] = dump(await s.get_prompt("opener", {"name": "Bo"}))
    r["ping"] = dump(await s.send_ping())


CANCEL_AFTER_S = 0.4


async def cancel_slow_then_add(s: Any, run: Run) -> None:
    """Start a long slow call, give up on it (the SDK sends notifications/cancelled), call add."""
    start = time.monotonic()
    with anyio.move_on_after(CANCEL_AFTER_S) as scope:
        await s.call_tool("slow", {"steps": 50, "delay_ms": 100},
                          progress_callback=progress_recorder(run))
    run.timings["cancelled slow"] = time.monotonic() - start
    run.results["slow cancelled"] = scope.cancelled_caught
    run.results["add"] = dump(await s.call_tool("add", {"a": 1, "b": 2}))


BIG = 2**70
"""An integer beyond 64 bits: valid JSON, exact in Python, lossy in parsers that use doubles."""
PAYLOAD_SIZE = 1_000_000


async def errors_and_edges(s: Any, run: Run) -> None:
    """A JSON-RPC error, a tool error result, a large payload and a very large integer."""
    r = run.results
    try:
        await quietly(s.set_logging_level, "debug")  # MCPServer has no logging/setLevel
    except MCPError as e:
        r["setLevel error"] = {"code": e.error.code, "message": e.error.message}
    r["unknown tool"] = dump(await s.call_tool("no-such-tool", {}))
    r["payload"] = dump(await s.call_tool("payload", {"size": PAYLOAD_SIZE}))
    r["big add"] = dump(await s.call_tool("add", {"a": BIG, "b": 1}))


async def extra_scenario(s: Any, run: Run) -> None:
    """The second SDK session (paged lists): page through resources, a cancelled call, errors and
    edge cases."""
    await page_through(s, run)
    await cancel_slow_then_add(s, run)
    await errors_and_edges(s, run)


# --- recordings -------------------------------------------------------------------------------


@dataclass
class Recording:
    """A cassette recorded from a real server, and what the client saw while it was recorded."""

    cassette: Path
    session: str
    live: Run

    def copy_to(self, directory: Path) -> Path:
        """A private copy of the cassette (for tests that append to or rewrite it)."""
        dst = directory / self.cassette.name
        shutil.copy(self.cassette, dst)
        for suffix in ("-wal", "-shm"):
            side = self.cassette.with_name(self.cassette.name + suffix)
            if side.exists():
                shutil.copy(side, dst.with_name(dst.name + suffix))
        return dst


def record(cassette: Path, session: str, server: Sequence[str], scenario: Scenario,
           **kwargs: Any) -> Recording:
    """Run ``scenario`` against the real ``server`` through ``mcprec record``."""
    live = drive(recorded(cassette, *server, extra=("-s", session)), scenario, **kwargs)
    return Recording(cassette, session, live)


def one_line_error(stderr: bytes | str) -> str:
    """Assert that stderr is one ``mcprec: ...`` line and no traceback; return the line."""
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    assert "Traceback" not in text, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcprec: "), text
    return lines[0]
