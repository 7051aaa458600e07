"""Helpers for tests: launch parameters for a replayed server, an in-process replay, and the
checks the pytest plugin makes after a test.

    from mcprec.testing import check_replay, replay_server, replay_streams

    # a subprocess, for any client that launches servers (here the mcp SDK's stdio_client):
    server = replay_server("tests/cassettes/weather.db", report_path="report.json")
    async with stdio_client(server.params) as (read, write): ...
    check_replay(server.report())  # AssertionError if a request had no recorded match

    # in-process, no subprocess at all (fastest), for the mcp SDK's ClientSession:
    async with replay_streams("tests/cassettes/weather.db") as (read, write):
        async with ClientSession(read, write) as session: ...
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..cassette.lock import cassette_lock as cassette_lock  # where it was
from ..errors import McprecError, ReplayError, ServerStartError, UsageError
from ..matching import CONTEXT_ENV, MatchOptions
from ..modes import Mode
from ..replay.settings import ReplaySettings, seconds_text

__all__ = ["HTTPRecordingProxy", "HTTPReplayServer", "ReplayServer", "ReplaySettings",
           "StreamReplay", "cassette_lock", "check_replay", "near_misses", "record_http_proxy",
           "replay_args", "replay_http_server", "replay_server", "replay_streams"]


def replay_args(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    mode: str | Mode = Mode.NONE,
    options: MatchOptions | None = None,
    settings: ReplaySettings | None = None,
    report_path: str | os.PathLike[str] | None = None,
    timing: float | str | None = None,
    allow_unmatched: bool = False,
    faults: str | Sequence[str] = (),
    seed: int | None = None,
    max_gap: float | str | None = None,
    protocol_version: str = "recorded",
) -> list[str]:
    """The arguments of ``mcprec replay`` for these settings, defaults left out: the plain form
    (cassette, session, report) is the one the click-free entry point serves, which every test
    pays for at start-up. ``timing``, ``allow_unmatched``, ``faults``, ``seed``, ``max_gap``
    and ``protocol_version`` are ``settings``' fields as keywords, each given one over it."""
    s = _merged(settings, timing=timing, allow_unmatched=allow_unmatched, faults=faults,
                seed=seed, max_gap=max_gap, protocol_version=protocol_version)
    opts = options or MatchOptions()
    if opts.matchers:
        raise UsageError("custom matcher callables work in-process only (replay_streams)")
    args = ["replay", str(cassette)]
    # `none` is said only to overrule a $MCPREC_MODE the replay would otherwise read
    mode = Mode.parse(mode)
    if mode is not Mode.NONE or os.environ.get("MCPREC_MODE", "none") != "none":
        args += ["--mode", mode.value]
    if session:
        args += ["--session", session]
    if s.timing is not None:
        args += ["--timing", "recorded" if s.timing == 1.0 else repr(s.timing)]
    if s.max_gap is not None:
        args += ["--max-gap", seconds_text(s.max_gap)]
    if s.protocol_version != "recorded":
        args += ["--protocol-version", s.protocol_version]
    if opts.repeat != "last":
        args += ["--repeat", opts.repeat]
    if opts.strict_order:
        args.append("--strict-order")
    for path in opts.ignore:
        args += ["--ignore", path]
    for spec in opts.normalize:
        args += ["--normalize", spec]
    if report_path is not None:
        args += ["--report", str(report_path)]
    if s.allow_unmatched:
        args.append("--allow-unmatched")
    for rule in s.faults:
        args += ["--fault", rule]
    if s.seed is not None:
        args += ["--seed", str(s.seed)]
    return args


def _merged(settings: ReplaySettings | None, *, timing: float | str | None,
            allow_unmatched: bool, faults: str | Sequence[str], seed: int | None,
            max_gap: float | str | None, protocol_version: str) -> ReplaySettings:
    return (settings or ReplaySettings()).merged(
        timing=timing, allow_unmatched=allow_unmatched, faults=faults, seed=seed,
        max_gap=max_gap, protocol_version=protocol_version)


@dataclass
class ReplayServer:
    """How to launch ``mcprec replay`` as a stdio server (or record, per ``mode``)."""

    cassette: Path
    session: str | None = None
    mode: str | Mode = Mode.NONE
    server: Sequence[str] = ()
    options: MatchOptions = field(default_factory=MatchOptions)
    settings: ReplaySettings = field(default_factory=ReplaySettings)
    """How the replay plays: timing, faults, ... (``ReplaySettings``)."""
    report_path: Path | None = None
    env: dict[str, str] | None = None
    context: str | None = None
    """``pytest`` when the plugin made it: the replay's hints name ``--mcprec-mode``."""
    launched: bool = field(default=False, init=False, compare=False)
    """Whether the launch parameters were read (``args``, ``argv`` or ``params``): a test that
    never read them never started the replay, and no report will come."""

    @property
    def command(self) -> str:
        return sys.executable

    @property
    def args(self) -> list[str]:
        self.launched = True
        args = ["-m", "mcprec", *replay_args(
            self.cassette, session=self.session, mode=self.mode, options=self.options,
            settings=self.settings, report_path=self.report_path)]
        if self.server and Mode.parse(self.mode).may_record:  # replay alone never starts it
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
        if self.context is not None:  # the replay's hints say the context's options
            env.setdefault(CONTEXT_ENV, self.context)
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
    mode: str | Mode = Mode.NONE,
    server: Sequence[str] = (),
    options: MatchOptions | None = None,
    settings: ReplaySettings | None = None,
    report_path: str | os.PathLike[str] | None = None,
    timing: float | str | None = None,
    allow_unmatched: bool = False,
    faults: str | Sequence[str] = (),
    seed: int | None = None,
    max_gap: float | str | None = None,
    protocol_version: str = "recorded",
) -> ReplayServer:
    """The ``ReplayServer`` for a cassette. ``settings`` says how it plays; ``timing``,
    ``allow_unmatched``, ``faults``, ``seed``, ``max_gap`` and ``protocol_version`` are its
    fields as keywords, each given one over it (a bad one: ``UsageError`` at once)."""
    return ReplayServer(
        Path(cassette), session, mode, list(server), options or MatchOptions(),
        _merged(settings, timing=timing, allow_unmatched=allow_unmatched, faults=faults,
                seed=seed, max_gap=max_gap, protocol_version=protocol_version),
        Path(report_path) if report_path is not None else None,
    )


# --- after the test: what the replay's report says ----------------------------------------------

_NO_MATCH = re.compile(r"^mcprec: (no recorded response matches request id=(.+?) (\S+) \(session .*)$")


def near_misses(stderr: str) -> list[tuple[str, str, str]]:
    """The no-match reports in a replay's stderr, in order: ``(id text, method, report)``, the
    report being what follows ``mcprec: `` (the request, the playback position and the closest
    recorded requests)."""
    found: list[tuple[str, str, str]] = []
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        m = _NO_MATCH.match(line)
        if m is None:
            continue
        block = [m.group(1)]
        for more in lines[i + 1:]:
            if not more.startswith("  "):
                break
            block.append(more)
        found.append((m.group(2), m.group(3), "\n".join(block)))
    return found


def check_replay(
    report: Mapping[str, Any],
    *,
    cassette: str | os.PathLike[str] | None = None,
    allow_unmatched: bool = False,
    all_played: bool = False,
    stderr: str = "",
    rerecord: str | None = None,
) -> None:
    """Raise ``AssertionError`` when the replay's ``report`` lists a request that had no
    recorded match (unless ``allow_unmatched``) or, with ``all_played``, a recorded request that
    no request used. Requests the recording itself left unanswered count as neither.

    ``stderr``, the replay's, supplies each unmatched request's closest recorded requests.
    """
    where = f" in {cassette}" if cassette is not None else ""
    lines: list[str] = []
    unmatched = list(report.get("unmatched") or [])
    if unmatched and not allow_unmatched:
        lines.append(f"mcprec: {len(unmatched)} request(s) had no recorded match{where} "
                     "(allow_unmatched=True accepts that)")
        misses = near_misses(stderr)
        for u in unmatched[:10]:
            rid, method = orjson.dumps(u.get("id")).decode(), str(u.get("method"))
            found = u.get("report") or _take(misses, rid, method)
            if found:
                if rerecord is not None:  # said with the option of the caller's context
                    from ..matching import RERECORD

                    found = found.replace(RERECORD, rerecord)
                lines += ["  " + line for line in found.splitlines()]
            else:
                lines.append(f"  id={rid} {method} (its closest recorded requests are in the "
                             "replay's stderr)")
    unplayed = list(report.get("unplayed") or [])
    if all_played and unplayed:
        lines.append(f"mcprec: {len(unplayed)} recorded request(s) were never played{where}")
        lines += [f"  unplayed: seq {u['seq']} {u['method']}" for u in unplayed[:20]]
    if lines:
        raise AssertionError("\n".join(lines))


def _take(misses: list[tuple[str, str, str]], rid: str, method: str) -> str | None:
    """The first report in ``misses`` for this request, removed (ids repeat across sessions)."""
    for i, (mid, mmethod, text) in enumerate(misses):
        if (mid, mmethod) == (rid, method):
            del misses[i]
            return text
    return None


class StreamReplay:
    """What ``replay_streams`` yields: the streams for the SDK's ``ClientSession`` (``read``,
    ``write``; it unpacks as that pair), and the replay's outcome: ``report()`` (played,
    repeated, unmatched and unplayed requests; after the block, as the block ended) and
    ``check()``, ``check_replay`` of it."""

    __slots__ = ("read", "write", "cassette", "settings", "engine")

    def __init__(self, read: Any, write: Any, engine: Any, cassette: str | os.PathLike[str],
                 settings: ReplaySettings) -> None:
        self.read = read
        self.write = write
        self.engine = engine
        """The asyncio replay engine (``mcprec.replay.engine.AsyncPlayback``)."""
        self.cassette = cassette
        self.settings = settings

    def __iter__(self) -> Iterator[Any]:
        return iter((self.read, self.write))

    def report(self) -> dict[str, Any]:
        """The replay's report (``mcprec replay --report``'s, for this one client)."""
        return self.engine.report()  # type: ignore[no-any-return]

    def check(self, *, all_played: bool = False) -> None:
        """``check_replay`` of the report: ``AssertionError`` when a request had no recorded
        match (unless the settings' ``allow_unmatched``) or, with ``all_played``, a recorded
        request was never used."""
        check_replay(self.report(), cassette=self.cassette,
                     allow_unmatched=self.settings.allow_unmatched, all_played=all_played)


@contextlib.asynccontextmanager
async def replay_streams(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    options: MatchOptions | None = None,
    settings: ReplaySettings | None = None,
    timing: float | str | None = None,
) -> AsyncIterator[StreamReplay]:
    """Replay in-process: yields a ``StreamReplay``, which unpacks as ``(read_stream,
    write_stream)`` for ``mcp.ClientSession`` and gives the replay's ``report()`` and
    ``check()``, during the block and after it (the report then is the one taken as the
    block ended).

    ``settings`` says how it plays (``timing``, ``max_gap``, ``protocol_version``, ``faults``;
    ``allow_unmatched`` for ``check()``); ``timing`` is its field as a keyword.

    Deprecated: ``replay_streams.last_engine``, the last block's engine, is still set after
    each block; use the yielded object's ``report()`` instead.
    """
    import anyio
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from ..cassette import Cassette
    from ..replay.engine import AsyncPlayback
    from ..replay.playback import candidates

    s = (settings or ReplaySettings()).merged(timing=timing)
    c = Cassette.open(cassette, read_only=True)
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

        engine = AsyncPlayback(c, found, send, options=options, timing=s.timing,
                               max_gap=s.max_gap, protocol_version=s.protocol_version,
                               faults=s.fault_plan())

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
                    yield StreamReplay(to_client_recv, from_client_send, engine, cassette, s)
                finally:
                    replay_streams.last_engine = engine  # type: ignore[attr-defined]
                    await engine.aclose()
                    tg.cancel_scope.cancel()
                    engine.freeze()  # the cassette closes below; report() and unplayed() stay
    finally:
        c.close()


class _Served:
    """A server subprocess that announced its URL (``_serving``)."""

    process: Any
    _stderr: list[bytes]
    _drained: Any

    def stop(self, timeout: float = 10.0) -> int:
        """Stop it (SIGINT, as Ctrl-C would; the recording proxy flushes every session) and
        return its exit code."""
        return _stop(self.process, self._drained, timeout)

    @property
    def stderr(self) -> str:
        """What it wrote on stderr so far (complete once stopped)."""
        return b"".join(self._stderr).decode(errors="replace")


@dataclass
class HTTPReplayServer(_Served):
    """A running ``mcprec replay --http`` subprocess: ``.url`` is its endpoint."""

    url: str
    process: Any
    report_path: Path | None
    _stderr: list[bytes] = field(default_factory=list, repr=False)
    _drained: Any = field(default=None, repr=False)

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
    settings: ReplaySettings | None = None,
    report_path: str | os.PathLike[str] | None = None,
    startup_timeout: float = 20.0,
    timing: float | str | None = None,
    allow_unmatched: bool = False,
    faults: str | Sequence[str] = (),
    seed: int | None = None,
    max_gap: float | str | None = None,
    protocol_version: str = "recorded",
) -> Iterator[HTTPReplayServer]:
    """Run ``mcprec replay --http`` on a free port for the duration of the block; yields an
    ``HTTPReplayServer`` whose ``url`` the client under test connects to. ``settings`` and the
    keywords that are its fields as for ``replay_server``."""
    argv = [sys.executable, "-m", "mcprec", *replay_args(
        cassette, session=session, options=options, report_path=report_path,
        settings=_merged(settings, timing=timing, allow_unmatched=allow_unmatched,
                         faults=faults, seed=seed, max_gap=max_gap,
                         protocol_version=protocol_version)),
        "--http", "--listen", "127.0.0.1:0"]
    with _serving(argv, "mcprec replay --http", startup_timeout) as (proc, url, err, drained):
        server = HTTPReplayServer(url, proc, Path(report_path) if report_path is not None
                                  else None, err, drained)
        try:
            yield server
        finally:
            server.stop()


@dataclass
class HTTPRecordingProxy(_Served):
    """A running ``mcprec record --target`` subprocess: ``.url`` is the proxy's endpoint, which
    forwards to the target and records into ``cassette``."""

    url: str
    process: Any
    cassette: Path
    _stderr: list[bytes] = field(default_factory=list, repr=False)
    _drained: Any = field(default=None, repr=False)


@contextlib.contextmanager
def record_http_proxy(
    target: str,
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    startup_timeout: float = 20.0,
) -> Iterator[HTTPRecordingProxy]:
    """Run ``mcprec record --target TARGET`` on a free port for the duration of the block; yields
    an ``HTTPRecordingProxy`` whose ``url`` the client under test connects to. Each client session
    is recorded into ``cassette`` (the first as ``session``, the next ``session-2``, ...)."""
    argv = [sys.executable, "-m", "mcprec", "record", "--target", target, "--listen",
            "127.0.0.1:0", "-c", str(cassette), *(["-s", session] if session else [])]
    with _serving(argv, "mcprec record --target", startup_timeout, announced=_PROXY_URL,
                  error=ServerStartError) as (proc, url, err, drained):
        proxy = HTTPRecordingProxy(url, proc, Path(cassette), err, drained)
        try:
            yield proxy
        finally:
            proxy.stop()


_PROXY_URL = re.compile(rb"^mcprec: recording (\S+) -> ")


def _stop(process: Any, drained: Any, timeout: float) -> int:
    """SIGINT, as Ctrl-C would; SIGKILL after ``timeout``. The exit code."""
    import signal
    import subprocess

    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if drained is not None:
        drained.join(timeout)
    return int(process.returncode)


@contextlib.contextmanager
def _serving(argv: list[str], what: str, startup_timeout: float,
             announced: re.Pattern[bytes] | None = None, error: type[McprecError] = ReplayError,
             ) -> Iterator[tuple[Any, str, list[bytes], Any]]:
    """Start ``argv``, a server that announces its URL: as its first line on stdout, or in the
    first stderr line that matches ``announced`` (group 1). Yields the process, the URL, its
    stderr as it comes (read all along, so that a chatty server never blocks on a full pipe)
    and the thread reading it. Stops it on the way out."""
    import subprocess
    import threading

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE if announced is None
                            else subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    out, pipe = proc.stdout, proc.stderr
    err: list[bytes] = []
    url: list[bytes] = []
    got = threading.Event()

    def drain() -> None:
        for line in iter(pipe.readline, b""):
            err.append(line)
            m = announced.match(line) if announced is not None and not got.is_set() else None
            if m is not None:
                url.append(m.group(1))
                got.set()
        got.set()  # it ended without saying

    def first_line() -> None:
        assert out is not None
        url.append(out.readline().strip())
        got.set()

    drained = threading.Thread(target=drain, daemon=True)
    drained.start()
    if announced is None:
        threading.Thread(target=first_line, daemon=True).start()
    try:
        if not got.wait(startup_timeout) or not url or not url[0]:
            proc.kill()
            proc.wait()
            drained.join(5)
            raise error(f"{what} did not start: {b''.join(err).decode(errors='replace')}")
        yield proc, url[0].decode(), err, drained
    finally:
        _stop(proc, drained, 10.0)
        if out is not None:
            out.close()
        pipe.close()
