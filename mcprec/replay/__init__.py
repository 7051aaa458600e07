"""Replay: a cassette as a mock MCP server, with record modes.

    none          replay only; an unmatched request gets a JSON-RPC error
    once          record when the cassette (or the named session) is missing, else replay
    new_episodes  replay what matches; pass the rest to the real server and append it
    all           always record afresh (replacing the named session)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from ..redact import Redactor
    from ..faults.rules import Faults

from .. import _log
from ..cassette import Cassette
from ..errors import McprecError, SessionNotFoundError, UsageError
from ..matching import MatchOptions
from ..modes import MODES, Mode
from .playback import Playback, candidates
from .settings import ReplaySettings

if TYPE_CHECKING:
    from .engine import AsyncPlayback

__all__ = ["MODES", "AsyncPlayback", "MatchOptions", "Mode", "Playback", "ReplaySettings",
           "needs_recording", "replay_http", "replay_stdio"]


def __getattr__(name: str) -> Any:
    if name in ("AsyncPlayback", "ReplaySession"):  # the asyncio driver: imported where used
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'mcprec.replay' has no attribute {name!r}")


def needs_recording(path: Path, session: str | None, mode: str | Mode) -> bool:
    """Whether ``mode`` means recording (rather than replaying) for this cassette and session."""
    mode = Mode.parse(mode)
    if mode is Mode.ALL:
        return True
    if mode not in (Mode.ONCE, Mode.NEW_EPISODES):
        return False
    if not path.exists() or path.stat().st_size == 0:
        return True
    with Cassette.open(path, read_only=True) as c:
        if session is None:
            return not c.sessions()
        try:
            c.session(session)
        except SessionNotFoundError:
            return True
    return False


def replay_stdio(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    mode: str | Mode = Mode.NONE,
    server: Sequence[str] = (),
    options: MatchOptions | None = None,
    settings: ReplaySettings | None = None,
    report: str | os.PathLike[str] | None = None,
    redact: Redactor | None = None,
    timing: float | str | None = None,
    allow_unmatched: bool = False,
    faults: Faults | str | Iterable[str] | None = None,
    protocol_version: str = "recorded",
    max_gap: float | str | None = None,
) -> int:
    """Serve a recorded session on this process's stdin/stdout (or record it, per ``mode``).

    ``settings`` says how it plays (``ReplaySettings``); ``timing``, ``allow_unmatched``,
    ``faults``, ``protocol_version`` and ``max_gap`` are its fields as keywords, each given one
    over ``settings``. Returns the exit code: 0; ``UNMATCHED_EXIT`` when a request had no
    recorded match (unless ``allow_unmatched``); the recorded server's exit code when the
    recording ends with it; the server's exit code when the mode meant recording.
    """
    mode = Mode.parse(mode)
    s, plan = _settings(settings, timing, allow_unmatched, faults, protocol_version, max_gap)
    check_report_path(report)
    _check_set(cassette, mode)
    path = Path(cassette)
    if mode.may_record:  # processes recording one cassette take turns, as the plugin's do
        from ..cassette.lock import cassette_lock

        # the lock first, then the look: a session another process is recording exists
        # before it is complete
        with cassette_lock(path):
            if needs_recording(path, session, mode) or mode is Mode.NEW_EPISODES:
                return _replay_stdio(path, session, mode, server, options, s, plan, report,
                                     redact)
        # recorded by another process (once): replayed like any other
    return _replay_stdio(path, session, mode, server, options, s, plan, report, redact)


def _settings(settings: ReplaySettings | None, timing: float | str | None,
              allow_unmatched: bool, faults: Faults | str | Iterable[str] | None,
              protocol_version: str, max_gap: float | str | None,
              ) -> tuple[ReplaySettings, Faults | None]:
    """The settings a replay runs with, and its faults: a ``Faults`` given as it is (with its
    seed), else a fresh one from the settings' rules."""
    plan: Faults | None = None
    rules: str | Iterable[str] = ()
    if isinstance(faults, (str, list, tuple)):
        rules = faults
    elif faults is not None:
        from ..faults.rules import Faults

        if isinstance(faults, Faults):  # parsed already, and perhaps shared with the caller
            plan = faults
        else:
            rules = faults
    s = (settings or ReplaySettings()).merged(
        timing=timing, max_gap=max_gap, protocol_version=protocol_version,
        faults=rules, allow_unmatched=allow_unmatched)
    if plan is None:
        plan = s.fault_plan()
    return s, plan


def _replay_stdio(path: Path, session: str | None, mode: Mode, server: Sequence[str],
                  options: MatchOptions | None, settings: ReplaySettings, faults: Faults | None,
                  report: str | os.PathLike[str] | None, redact: Redactor | None) -> int:
    cassette = path
    timing, max_gap = settings.timing, settings.max_gap
    protocol_version = settings.protocol_version
    if needs_recording(path, session, mode):
        if not server:
            raise UsageError(
                f"mode {mode.value!r} needs to record {path} but no server command was given; "
                "add it after `--`"
            )
        return _record_stdio_instead(path, session, mode, server, redact, report)

    c = open_for_replay(path)  # read-only; new_episodes writes through its own
    try:
        found = candidates(c, session)
        s = found[0]
        live = None
        if mode is Mode.NEW_EPISODES:
            if not server:
                raise UsageError("mode 'new_episodes' needs the real server command after `--`")
            from .live import LiveServer

            live = LiveServer(list(server), c, s, redact=redact)

        def announce() -> None:
            if len(found) == 1:  # with several, the engine says which one the client got
                _log.info("replay", f"replaying session {s.name!r} of {path}"
                          + (f" ({s.status}: replaying what was recorded)"
                             if s.status != "complete" else ""))

        if faults:
            _check_faults(c, found, faults)
        if live is None:  # the common case: a blocking loop, no asyncio to import
            from .lean import serve_lean

            engine: Any = Playback(c, found, options=options, timing=timing, redact=redact,
                                   server_stderr=_server_stderr, faults=faults,
                                   protocol_version=protocol_version, max_gap=max_gap)
            announce()
            serve_lean(engine)
        else:
            import asyncio

            from .engine import AsyncPlayback
            from .stdio import serve_stdio

            def make(send: Any, send_stored: Any) -> AsyncPlayback:
                made = AsyncPlayback(c, s, send, options=options, timing=timing, live=live,
                                     redact=redact, server_stderr=_server_stderr,
                                     protocol_version=protocol_version, max_gap=max_gap,
                                     send_stored=send_stored)
                announce()
                return made

            engine = asyncio.run(serve_stdio(make))
        if report is not None:
            _write_report(report, [engine])
    finally:
        c.close()
    if faults:
        from ..faults.rules import summary

        _log.info("replay", summary(faults))
    if engine.exit_code is not None:
        return _exit_status(engine.exit_code)
    return _unmatched_status([engine], settings.allow_unmatched)


def open_for_replay(cassette: str | os.PathLike[str]) -> Cassette:
    """The cassette to replay: a file, or the files a directory or a glob names, read as one
    (``cassette.sets.CassetteSet``: each client is answered from the recorded session its
    traffic matches, whichever file holds it)."""
    from ..cassette.sets import expand, is_set, open_set

    if is_set(cassette):
        return open_set(expand([cassette]), label=os.fspath(cassette))
    return Cassette.open(cassette, read_only=True)


def _check_set(cassette: str | os.PathLike[str], mode: Mode) -> None:
    """A set of cassettes (a directory, a glob) is replayed, never recorded into."""
    from ..cassette.sets import is_set

    if mode is not Mode.NONE and is_set(cassette):
        raise UsageError(f"{os.fspath(cassette)} names several cassettes (a directory or a "
                         f"glob): they replay in mode 'none' only, as one; mode "
                         f"{mode.value!r} records into one cassette file")


def _check_faults(c: Cassette, sessions: list[Any], faults: Faults) -> None:
    """Warn, before serving, of fault rules that select no recorded request."""
    from .. import wire
    from ..faults.rules import check_against

    recorded = ((m.method or "", m.json) for s in sessions
                for m in c.messages(s, kinds=(wire.REQUEST,))
                if m.direction == wire.CLIENT_TO_SERVER)
    for warning in check_against(faults.rules, recorded):
        _log.warning("replay", warning)


UNMATCHED_EXIT = 3


def _unmatched_status(engines: list[Any], allow: bool) -> int:
    """``UNMATCHED_EXIT`` with a one-line summary when any request went unmatched: a client
    that swallowed the error must not pass unnoticed."""
    missed = [u for e in engines for u in e.stats.unmatched]
    if not missed:
        return 0
    first = missed[0]
    n = len(missed)
    _log.warning("replay", f"{n} request{'s' if n > 1 else ''} had no recorded match (the "
                 f"first: id={first.get('id')} {first.get('method')}); "
                 + ("--allow-unmatched: exit 0" if allow else
                    f"exit {UNMATCHED_EXIT} (--allow-unmatched to exit 0)"))
    return 0 if allow else UNMATCHED_EXIT


def _server_stderr(line: str) -> None:
    """The recorded server's stderr, replayed on ours (as the server's would reach the client)."""
    from ..terminal import safe

    sys.stderr.write(safe(line.rstrip("\r\n")) + "\n")
    sys.stderr.flush()


def _exit_status(code: int) -> int:
    """A recorded exit code as a process exit status (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code & 0xFF


def check_report_path(report: str | os.PathLike[str] | None) -> None:
    """Refuse, before serving, a ``--report`` that could not be written at the end."""
    if report is None:
        return
    path = Path(report)
    if path.is_dir():
        raise UsageError(f"--report {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"--report {path}: no directory {path.parent}")


def _write_report(report: str | os.PathLike[str], engines: list[Any],
                  faults: Faults | None = None) -> None:
    import json  # not orjson: a replay whose requests all came as recorded never imports it

    data: Any = engines[0].report() if len(engines) == 1 else {
        "sessions": [e.report() for e in engines],
        "unplayed": [u for e in engines for u in e.report()["unplayed"]] if engines else [],
        "unmatched": [u for e in engines for u in e.report()["unmatched"]],
        "unanswered": [u for e in engines for u in e.report()["unanswered"]],
        **({"faults": faults.report()} if faults else {}),
    }
    Path(report).write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def _record_stdio_instead(path: Path, session: str | None, mode: Mode, server: Sequence[str],
                          redact: Redactor | None, report: str | os.PathLike[str] | None) -> int:
    """Record in place of replaying. A recording whose server sent nothing or never answered
    the first request is not kept (the test or the client fails with why), and under ``all``
    it never replaces the session it would have: it is recorded under a name of its own and
    takes the session's place only once it is known to be good."""
    from ..record.api import failed_recording, record_stdio
    from ..naming import SESSION_ENV, default_session_name

    replacing = False
    if mode is Mode.ALL and session is not None and path.exists():
        with Cassette.open(path) as c:
            replacing = any(s.name == session for s in c.sessions())
    name = session or os.environ.get(SESSION_ENV) or default_session_name(list(server))
    recording_as = f"{name}.recording-{os.getpid()}" if replacing else name
    code = record_stdio(list(server), cassette=path, session=recording_as, redact=redact)
    try:
        why = failed_recording(path, recording_as)
    except McprecError:  # nothing was stored (the server never started)
        return code
    with Cassette.open(path) as c:
        if why is not None:
            c.delete_session(recording_as)
            kept = f"; session {name!r} kept as it was" if replacing else ""
            _log.warning("replay", f"recording {name!r} into {path} failed: {why}; the "
                         f"recording was not kept{kept}")
            if report is not None:
                import json

                Path(report).write_text(json.dumps({"recording_failed": why, "session": name}),
                                        encoding="utf-8")
            return code or 1
        if replacing:
            c.delete_session(name)
            c.rename_session(recording_as, name)
    return code


def replay_http(
    cassette: str | os.PathLike[str],
    *,
    session: str | None = None,
    listen: str = "127.0.0.1:0",
    path: str = "/mcp",
    options: MatchOptions | None = None,
    settings: ReplaySettings | None = None,
    report: str | os.PathLike[str] | None = None,
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    on_ready: Callable[[str], None] | None = None,
    redact: Redactor | None = None,
    timing: float | str | None = None,
    allow_unmatched: bool = False,
    faults: Faults | str | Iterable[str] | None = None,
    protocol_version: str = "recorded",
    max_gap: float | str | None = None,
    mode: str | Mode = Mode.NONE,
    target: str | None = None,
    session_idle: float | None = 600.0,
) -> int:
    """Serve a recorded session over Streamable HTTP (and legacy HTTP+SSE at ``/sse``) until
    SIGINT/SIGTERM. Calls ``on_ready(url)`` once listening (port 0 picks a free port; the
    command line prints it on stdout).

    The record modes as for stdio, with the real server at ``target``: ``new_episodes``
    forwards the requests the recording cannot answer there and appends them to the replayed
    session; when the mode means recording (``once`` with nothing recorded, ``all``), this is
    ``record_http`` in front of ``target``. ``session_idle``: a client session without a
    request in flight for this many seconds ends (None: never). ``settings`` and the
    keywords that are its fields as for ``replay_stdio``."""
    from ..transports.http_serve import bind, parse_listen, run_app, url_of
    from .http import ReplayApp

    mode = Mode.parse(mode)
    s, faults = _settings(settings, timing, allow_unmatched, faults, protocol_version, max_gap)
    check_report_path(report)
    _check_set(cassette, mode)
    if needs_recording(Path(cassette), session, mode):
        return _record_http_instead(cassette, session, mode, target, listen, redact,
                                    allowed_hosts, allowed_origins, on_ready)
    if mode is Mode.NEW_EPISODES and target is None:
        raise UsageError("mode 'new_episodes' needs the real server's --target URL")
    host, port = parse_listen(listen)
    c = open_for_replay(cassette)  # read-only; new_episodes: its own
    try:
        found = candidates(c, session)
        first = found[0]
        live = None
        if mode is Mode.NEW_EPISODES:  # new exchanges go into the session being replayed
            from .live_http import LiveHTTP

            assert target is not None
            found = [first]
            live = LiveHTTP(target, c, first, redact=redact)
        sock = bind(host, port)
        if faults:
            _check_faults(c, found, faults)
        app = ReplayApp(c, found, options=options, timing=s.timing, bound_host=host,
                        allowed_origins=tuple(allowed_origins),
                        allowed_hosts=tuple(allowed_hosts), redact=redact, faults=faults,
                        protocol_version=s.protocol_version, max_gap=s.max_gap, live=live,
                        path=path, session_idle=session_idle,
                        keep_reports=report is not None)
        url = url_of(sock, path)

        def ready() -> None:
            what = (f"session {first.name!r}" if len(found) == 1 else
                    f"{len(found)} sessions (each client gets the one its traffic matches)")
            _log.info("replay", f"replaying {what} of {cassette} at {url}")
            if on_ready is not None:
                on_ready(url)

        run_app(app, sock, announce=ready, cleanup=app.aclose)
        if report is not None:
            _write_report(report, app.engines(), faults)
    finally:
        c.close()
    if faults:
        from ..faults.rules import summary

        _log.info("replay", summary(faults))
    if app.failure is not None:  # said on stderr when it happened
        return app.failure.exit_code
    return _unmatched_status(app.engines(), s.allow_unmatched)


def _record_http_instead(cassette: str | os.PathLike[str], session: str | None, mode: str,
                         target: str | None, listen: str, redact: Redactor | None,
                         allowed_hosts: Sequence[str], allowed_origins: Sequence[str],
                         on_ready: Callable[[str], None] | None) -> int:
    """``replay --http`` in a mode that means recording: the recording proxy before
    ``target``, its URL given to ``on_ready`` as replay gives its own."""
    from ..record.api import record_http

    path = Path(cassette)
    if target is None:
        raise UsageError(f"mode '{mode}' needs to record {path} but no --target URL was given")
    if mode == "all" and session is not None and path.exists():
        with Cassette.open(path) as c:
            if any(s.name == session for s in c.sessions()):
                c.delete_session(session)

    return record_http(target, listen=listen, cassette=path, session=session, redact=redact,
                       allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                       on_ready=on_ready)
