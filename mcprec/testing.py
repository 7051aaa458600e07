"""Helpers for tests: launch parameters for a replayed server, and an in-process replay.

    from mcprec.testing import replay_server, replay_streams

    # a subprocess, for any client that launches servers (here the mcp SDK's stdio_client):
    server = replay_server("tests/cassettes/weather.db")
    async with stdio_client(server.params) as (read, write): ...

    # in-process, no subprocess at all (fastest), for the mcp SDK's ClientSession:
    async with replay_streams("tests/cassettes/weather.db") as (read, write):
        async with ClientSession(read, write) as session: ...
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .errors import ReplayError
from .matching import MatchOptions


@dataclass
class ReplayServer:
    """How to launch ``mcprec replay`` as a stdio server (or record, per ``mode``)."""

    cassette: Path
    session: str | None = None
    mode: str = "none"
    server: Sequence[str] = ()
    options: MatchOptions = field(default_factory=MatchOptions)
    timing: str = "none"
    report_path: Path | None = None
    env: dict[str, str] | None = None

    @property
    def command(self) -> str:
        return sys.executable

    @property
    def args(self) -> list[str]:
        args = ["-m", "mcprec", "replay", str(self.cassette), "--mode", self.mode,
                "--timing", self.timing, "--repeat", self.options.repeat]
        if self.session:
            args += ["--session", self.session]
        if self.options.strict_order:
            args.append("--strict-order")
        for path in self.options.ignore:
            args += ["--ignore", path]
        if self.report_path is not None:
            args += ["--report", str(self.report_path)]
        if self.options.matchers:
            raise ValueError("custom matcher callables work in-process only (replay_streams)")
        if self.server:
            args += ["--", *self.server]
        return args

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]

    @property
    def params(self) -> Any:
        """``mcp.StdioServerParameters`` for the SDK's ``stdio_client``."""
        from mcp import StdioServerParameters

        env = dict(self.env) if self.env is not None else None
        if env is None:
            from mcp.client.stdio import get_default_environment

            env = get_default_environment()
        return StdioServerParameters(command=self.command, args=self.args, env=env)

    def report(self, wait: float = 5.0) -> dict[str, Any]:
        """The replay's report (written when the replay process exits)."""
        if self.report_path is None:
            raise ReplayError("this ReplayServer was made without a report path")
        deadline = time.monotonic() + wait
        while not self.report_path.exists():
            if time.monotonic() > deadline:
                raise ReplayError(
                    f"no replay report at {self.report_path}: the replay server did not exit "
                    "(is the client still connected?)"
                )
            time.sleep(0.02)
        return orjson.loads(self.report_path.read_bytes())  # type: ignore[no-any-return]


def replay_server(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    mode: str = "none",
    server: Sequence[str] = (),
    options: MatchOptions | None = None,
    timing: str = "none",
    report_path: str | os.PathLike[str] | None = None,
) -> ReplayServer:
    return ReplayServer(
        Path(cassette), session, mode, list(server), options or MatchOptions(), timing,
        Path(report_path) if report_path is not None else None,
    )


@contextlib.asynccontextmanager
async def replay_streams(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    options: MatchOptions | None = None,
    timing: float | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Replay in-process: yields ``(read_stream, write_stream)`` for ``mcp.ClientSession``.

    After the block, the ``ReplaySession`` is ``replay_streams.last_engine``; its ``report()``
    (played, repeated, unmatched and unplayed requests) is the one taken as the block ended.
    """
    import anyio
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from .cassette import Cassette
    from .replay.engine import ReplaySession
    from .replay.playback import candidates

    c = Cassette.open(cassette)
    try:
        found = candidates(c, session)
        # all four ends are closed on the way out (unclosed ones warn when garbage-collected,
        # which fails tests run with filterwarnings=error)
        to_client_send, to_client_recv = anyio.create_memory_object_stream[Any](1000)
        from_client_send, from_client_recv = anyio.create_memory_object_stream[Any](1000)

        async def send(data: bytes, related: str | None) -> None:
            try:
                msg = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
            except Exception as e:  # noqa: BLE001 - the client sees what a transport would give
                await to_client_send.send(e)
                return
            await to_client_send.send(SessionMessage(msg))

        engine = ReplaySession(c, found, send, options=options, timing=timing)

        async def pump() -> None:
            async for item in from_client_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await engine.receive(data.encode())

        async def end() -> None:
            await engine.ended.wait()  # the recorded server exited: the client's stream ends
            await to_client_send.aclose()

        async with to_client_send, to_client_recv, from_client_send, from_client_recv:
            async with anyio.create_task_group() as tg:
                await engine.start()
                tg.start_soon(pump)
                tg.start_soon(end)
                try:
                    yield to_client_recv, from_client_send
                finally:
                    replay_streams.last_engine = engine  # type: ignore[attr-defined]
                    await engine.aclose()
                    tg.cancel_scope.cancel()
                    engine.freeze()  # the cassette closes below; report() and unplayed() stay
    finally:
        c.close()


@dataclass
class HTTPReplayServer:
    """A running ``mcprec replay --http`` subprocess: ``.url`` is its endpoint."""

    url: str
    process: Any
    report_path: Path | None

    def stop(self, timeout: float = 10.0) -> int:
        """Stop it (SIGINT, as Ctrl-C would) and return its exit code."""
        import signal
        import subprocess

        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)

    def report(self) -> dict[str, Any]:
        if self.report_path is None or not self.report_path.exists():
            raise ReplayError("no replay report: stop() the server first")
        return orjson.loads(self.report_path.read_bytes())  # type: ignore[no-any-return]


@contextlib.contextmanager
def replay_http_server(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    options: MatchOptions | None = None,
    timing: str = "none",
    report_path: str | os.PathLike[str] | None = None,
    startup_timeout: float = 20.0,
) -> Any:
    """Run ``mcprec replay --http`` on a free port for the duration of the block; yields an
    ``HTTPReplayServer`` whose ``url`` the client under test connects to."""
    import subprocess
    import threading

    opts = options or MatchOptions()
    argv = [sys.executable, "-m", "mcprec", "replay", str(cassette), "--http", "--listen",
            "127.0.0.1:0", "--timing", timing, "--repeat", opts.repeat]
    if session:
        argv += ["--session", session]
    if opts.strict_order:
        argv.append("--strict-order")
    for path in opts.ignore:
        argv += ["--ignore", path]
    if report_path is not None:
        argv += ["--report", str(report_path)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    got = threading.Event()

    def read_url() -> None:
        assert proc.stdout is not None
        lines.append(proc.stdout.readline())
        got.set()

    threading.Thread(target=read_url, daemon=True).start()
    if not got.wait(startup_timeout) or not lines[0].strip():
        proc.kill()
        _, err = proc.communicate()
        raise ReplayError(f"mcprec replay --http did not start: {err.decode(errors='replace')}")
    server = HTTPReplayServer(lines[0].decode().strip(), proc,
                              Path(report_path) if report_path is not None else None)
    try:
        yield server
    finally:
        server.stop()
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
