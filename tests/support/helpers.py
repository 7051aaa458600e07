"""Helpers shared by the tests: peer paths, running mcprec, driving servers with the SDK client."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).resolve().parents[1] / "peers"
SDK_SERVER = PEERS / "sdk_server.py"
WITNESS = PEERS / "witness.py"
BYTE_MIRROR = PEERS / "byte_mirror.py"
LINE_SERVER = PEERS / "line_server.py"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_DIR = REPO / "node_modules" / "@modelcontextprotocol" / "server-everything"
MCPREC = [sys.executable, "-m", "mcprec"]
# an initialize and its answer, compact as the SDKs write them (tests of matching by bytes)
INITIALIZE_LINE = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
                   b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}')
INITIALIZE_ANSWER_LINE = (b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18",'
                          b'"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}')

# the client's side of a recorded session whose one tools/call has a large answer
# (test_replay_large.py over stdio, test_http_replay_large.py over HTTP)
LARGE_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "c", "version": "1"}}}
LARGE_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LARGE_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "image", "arguments": {"size": 3}}}


def run_mcprec(
    *args: str,
    input: bytes | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m mcprec ARGS`` to completion and capture its output.

    mcprec's own environment variables are not inherited from the test run, only given.
    """
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    full_env.update(env or {})
    return subprocess.run(
        [*MCPREC, *args], input=input, capture_output=True, cwd=cwd, env=full_env,
        timeout=timeout, check=False,
    )


def recorded(cassette: str | os.PathLike[str], *server_argv: str,
             extra: Sequence[str] = ()) -> list[str]:
    """The argv of ``mcprec record -c CASSETTE [extra] -- SERVER...``."""
    return [*MCPREC, "record", "-c", str(cassette), *extra, "--", *server_argv]


# --- driving a server with the official SDK client --------------------------------------------


def assert_show_says_paused(cassette: str | os.PathLike[str], session: str,
                            pauses: int) -> None:
    """`mcprec show` prints one line for a session whose forwarding paused ``pauses`` times
    for its recorder (with the tap's 16 MiB bound)."""
    import re

    shown = run_mcprec("show", str(cassette), session).stdout.decode().splitlines()
    said = [ln for ln in shown if ln.startswith("forwarding paused")]
    assert len(said) == 1 and re.fullmatch(
        rf"forwarding paused {pauses} times? \([0-9.]+ m?s in all\) waiting for the recorder "
        r"\(memory bound 16 MiB\)", said[0]), shown[:5]


def proc_status_bytes(pid: int, field: str) -> int:
    """A field of /proc/PID/status (VmRSS, VmHWM), in bytes."""
    import re

    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    assert m, status
    return int(m.group(1)) * 1024


def dump(model: Any) -> Any:
    """A result as the client saw it, in wire (camelCase) form, defaults left out."""
    return model.model_dump(exclude_unset=True, mode="json", by_alias=True)


@dataclass
class ClientRun:
    """Everything an SDK client saw in one session with a server."""

    results: dict[str, Any] = field(default_factory=dict)
    logs: list[Any] = field(default_factory=list)
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    sampling: list[Any] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)
    stderr: str = ""


Scenario = Callable[[Any, ClientRun], Awaitable[None]]


async def _drive(argv: Sequence[str], scenario: Scenario, run: ClientRun,
                 env: dict[str, str] | None, cwd: str | None, errlog: Any,
                 roots: Sequence[str] | None) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp_types import CreateMessageResult, ListRootsResult, Root, TextContent

    async def on_sampling(context: Any, params: Any) -> Any:
        run.sampling.append(dump(params))
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
        return ListRootsResult(roots=[Root(uri=uri, name=uri.rsplit("/", 1)[-1]) for uri in roots or ()])

    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=env, cwd=cwd)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(
            read, write, sampling_callback=on_sampling, logging_callback=on_log,
            message_handler=on_message, list_roots_callback=on_list_roots if roots else None,
        ) as session:
            run.results["initialize"] = dump(await session.initialize())
            await scenario(session, run)


def run_client(argv: Sequence[str], scenario: Scenario, *, env: dict[str, str] | None = None,
               cwd: str | os.PathLike[str] | None = None, roots: Sequence[str] | None = None,
               timeout: float = 60) -> ClientRun:
    """Start ``argv`` as a stdio server, initialize, run ``scenario(session, run)``, close.

    The client offers sampling (answering ``you asked: <last message>``), takes log messages,
    and offers roots when ``roots`` (a list of URIs) is given.
    """
    run = ClientRun()
    full_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})}
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:

        async def main() -> None:
            with anyio.fail_after(timeout):
                await _drive(argv, scenario, run, full_env, str(cwd) if cwd else None, errlog,
                             roots)

        anyio.run(main)
        errlog.seek(0)
        run.stderr = errlog.read()
    return run


def wire_lines(data: bytes) -> list[bytes]:
    """The newline-delimited messages in ``data`` (a last line without newline counts)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def witnessed(wire_dir: str | os.PathLike[str], *server_argv: str) -> list[str]:
    """``server_argv`` behind the independent byte witness, which copies the wire to ``wire_dir``."""
    return [sys.executable, str(WITNESS), str(wire_dir), "--", *server_argv]


def copy_cassette(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """A copy of the cassette ``src`` at ``dst``, whole: once its recordings are complete (the
    recorder outlives ``mcprec record`` and may still be committing), through SQLite's backup
    (what is still in the WAL comes too). Copying the file alone could miss both."""

    from mcprec.cassette import Cassette

    with Cassette.open(src) as c:
        target = sqlite3.connect(dst)
        try:
            c.connection.backup(target)
        finally:
            target.close()
    return Path(dst)


def record_scenario(cassette: str | os.PathLike[str], session: str, server_argv: Sequence[str],
                    scenario: Scenario, *, env: dict[str, str] | None = None,
                    timeout: float = 60) -> ClientRun:
    """Drive ``server_argv`` with ``scenario`` through ``mcprec record``, as session ``session``
    of ``cassette``."""
    argv = recorded(cassette, *server_argv, extra=["-s", session])
    return run_client(argv, scenario, env=env, timeout=timeout)


async def page_through(s: Any, run: Any) -> None:
    """List resources page by page, following nextCursor."""
    from mcp_types import PaginatedRequestParams

    pages, cursor = [], None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await s.list_resources(params=params)
        pages.append(dump(page))
        cursor = page.next_cursor
        if not cursor:
            break
    run.results["pages"] = pages


@contextlib.contextmanager
def sqlite(path: str | os.PathLike[str], **kwargs: Any) -> Iterator[sqlite3.Connection]:
    """``with sqlite3.connect(path) as conn`` (committed at the end of the block), closed too:
    Python 3.13 warns of a connection left open, and the suite fails on warnings."""
    conn = sqlite3.connect(path, **kwargs)
    try:
        with conn:
            yield conn
    finally:
        conn.close()
