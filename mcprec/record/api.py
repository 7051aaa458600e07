"""Recording: run a tap between a client and a server and write every message to a cassette."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any
from pathlib import Path

from .. import _log
from ..cassette import Cassette
from .process import ProcessSessionWriter, RecorderProcess, create_recorded_session
from ..redact import Redactor, default_redactor
from ..wire import SERVER_TO_CLIENT
from ..cassette.sets import expand, rotated_glob
from ..errors import CassetteError, McprecError, ServerStartError, UsageError
from ..naming import SESSION_ENV, default_cassette, default_http_cassette, default_session_name
from ..transports.stdio import StdioTap, run_loop


def check_command(argv: Sequence[str]) -> None:
    """Fail early, before a session is created, when the server command cannot run."""
    if not argv:
        raise ServerStartError("no server command given; put it after `--`", exit_code=2)
    exe = argv[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise ServerStartError(f"cannot start server: no such file: {exe}")
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            raise ServerStartError(f"cannot start server: not executable: {exe}", exit_code=126)
    elif shutil.which(exe) is None:
        raise ServerStartError(f"cannot start server: command not found: {exe}")


EXIT_LOST = 74
"""The exit status of a recording that lost messages (a write to the cassette failed: a full
disk, a removed file), whatever the server's (EX_IOERR of sysexits.h). Where nothing was lost,
``mcprec record`` exits with the server's code."""


def record_stdio(
    argv: Sequence[str],
    *,
    cassette: str | os.PathLike[str] | None = None,
    session: str | None = None,
    tags: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    durable: bool = False,
    exit_timeout: float = 5.0,
    redact: Redactor | None = None,
    max_message_size: int | None = None,
    faults: Any = None,
) -> int:
    """Run ``argv`` as a stdio MCP server behind a recording tap on this process's stdin/stdout.

    ``faults`` (a ``faults.rules.Faults``): the server's answers are rewritten by its rules
    before they reach the client, recorded as the client received them and marked in the
    cassette's ``injected_faults``; ``faults.report()`` then tells what was injected and what
    the client did after each fault.

    Returns the server's exit code as soon as the server has exited and the session is marked
    as ended; the recorder process commits what remains on its own, and whatever opens the
    cassette (``open_cassette``, replay, diff) waits until it has.
    """
    check_command(argv)
    path = Path(cassette) if cassette is not None else default_cassette(argv)
    name = session or os.environ.get(SESSION_ENV) or default_session_name(argv)
    redactor = redact if redact is not None else default_redactor()
    live = _live_faults(faults)
    writer = open_recording(path, name, transport="stdio", target=list(argv), tags=tags,
                            redact=redactor, max_message_size=max_message_size)
    tap = StdioTap(
        argv,
        writer,
        env=env,
        cwd=cwd,
        exit_timeout=exit_timeout,
        before_forward=(lambda: None if writer.sync() else None) if durable else None,
        faults=live,
    )
    code: int | None = None
    status = "incomplete"
    started = False
    try:
        code = run_loop(tap.run())
        started = True
        status = "complete"
    finally:
        writer.close(exit_code=code, status=status)
        if not started and code is None:
            with contextlib.suppress(McprecError), Cassette.open(path) as c:
                if not any(True for _ in c.messages(writer.session)):
                    c.delete_session(name)  # the server never ran: no empty session left
        if writer.error is not None:
            _log.warning("record", f"recording to {path} was incomplete: {writer.error}")
    if writer.lost:  # said on stderr by the recorder, with the cause and the count
        return EXIT_LOST
    return code if code is not None else 1


def _live_faults(faults: Any) -> Any:
    """The rules applied to live traffic, or None (then no fault code is even imported)."""
    if not faults:
        return None
    from ..faults.live import LiveFaults

    return LiveFaults(faults)


def open_recording(
    path: Path, name: str, *, transport: str, target: Any, tags: dict[str, str] | None,
    redact: Redactor, max_message_size: int | None = None,
) -> ProcessSessionWriter:
    """Create the session (so that a bad cassette fails before anything starts) and the
    recorder process that will write it."""
    session = create_recorded_session(path, name, transport=transport, target=target, tags=tags,
                                      redact=redact, recorder_pid=None)
    recorder = RecorderProcess(path, rules={**redact.rules.to_dict(),
                                            "max_message_size": max_message_size})
    with Cassette.open(path, wait=False) as c:
        c.update_session(session, recorder_pid=recorder.pid)
    return ProcessSessionWriter(recorder, session)


def record_http(
    target: str,
    *,
    listen: str = "127.0.0.1:0",
    cassette: str | os.PathLike[str] | None = None,
    session: str | None = None,
    tags: dict[str, str] | None = None,
    timeout: float = 300.0,
    on_ready: Callable[[str], None] | None = None,
    redact: Redactor | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_idle: float | None = None,
    session_idle: float | None = 600.0,
    sample: float | None = None,
    seed: int | None = None,
    rotate_size: int | None = None,
    rotate_every: float | None = None,
    faults: Any = None,
) -> int:
    """Run a recording reverse proxy in front of the MCP endpoint at ``target`` until SIGINT or
    SIGTERM, or until ``max_idle`` seconds pass with no request in flight and no traffic (an
    unattended recording); every session through it is ended and flushed to the cassette
    before this returns.

    Listening on a loopback address, the proxy answers only to local ``Host`` names, and to
    local browser ``Origin``s anywhere (``allowed_hosts`` and ``allowed_origins`` add more):
    it rewrites ``Host`` to the target's, so the server's own check would never fire.
    A session without a request in flight for ``session_idle`` seconds is ended in the
    cassette (None: never), so that a client that left without DELETE holds nothing.
    ``sample``: record that fraction of the sessions (drawn with ``seed``), forward all.
    ``rotate_size`` (bytes) and ``rotate_every`` (seconds): rotate the cassette, recording into
    ``NAME-<UTC time>.db`` files next to ``cassette``, a new one for the sessions that begin
    once the current one has passed a bound (``record.http_sessions.ProxyRecordings``).
    ``faults``: as for ``record_stdio``, applied to every session through the proxy."""
    from ..transports.http_proxy import RecordingProxy
    from .http_sessions import ProxyRecordings
    from ..transports.http_serve import Trust, bind, parse_listen, run_app, url_of

    host, port = parse_listen(listen)
    path = Path(cassette) if cassette is not None else default_http_cassette(target)
    rotating = rotate_size is not None or rotate_every is not None
    if rotating and path.is_dir():
        raise UsageError(f"-c {path} is a directory; give the cassette's name (e.g. "
                         f"{path / 'recording.db'}): rotated files are named after it")
    if session is not None:  # refuse now, not at the first client's request
        _check_name_free(expand([rotated_glob(path)]) if rotating and glob_matches(path)
                         else [path] if not rotating and path.exists() else [], session)
    recordings = functools.partial(ProxyRecordings, rotate_size=rotate_size,
                                   rotate_every=rotate_every) if rotating else ProxyRecordings
    proxy = RecordingProxy(target, path, session=session, tags=tags, timeout=timeout,
                           redact=redact if redact is not None else default_redactor(),
                           trust=Trust(host, allowed_hosts, allowed_origins),
                           session_idle=session_idle, sample=sample, seed=seed,
                           recordings=recordings, faults=_live_faults(faults))
    sock = bind(host, port)
    url = url_of(sock, proxy.path)
    proxy.listen_origin = url[: url.index("/", len("http://"))]
    where = f"{rotated_glob(path)} (a new file past " + " or ".join(
        ([_bytes(rotate_size)] if rotate_size is not None else [])
        + ([f"{rotate_every:g} s"] if rotate_every is not None else [])) + ")" \
        if rotating else str(path)

    def ready() -> None:
        _log.info("record", f"recording {url} -> {proxy.target} into {where}")
        if on_ready is not None:
            on_ready(url)

    if run_app(proxy, sock, announce=ready, cleanup=proxy.aclose, max_idle=max_idle):
        n = proxy.session_count
        if not n and not proxy.sessions_skipped:  # unattended, and nothing came: a failed recording, not a quiet success
            _log.warning("record", f"no traffic for {max_idle:g} s (--max-idle) and no client "
                         f"ever connected: nothing recorded in {path}")
            return 1
        files = proxy.files
        _log.info("record", f"no traffic for {max_idle:g} s (--max-idle): recording ended, "
                  f"{n} session{'' if n == 1 else 's'} in "
                  + (f"{len(files)} files {rotated_glob(path)}" if len(files) > 1
                     else str(files[0]) if files else str(path)))
    if proxy.lost:  # said on stderr by the recorder, with the cause and the count
        return EXIT_LOST
    return 0


def _bytes(n: int) -> str:
    """A size as given to ``--rotate-size``: 100 MiB, 1.5 GiB, 512 KiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} bytes"


def glob_matches(base: Path) -> bool:
    """Whether files rotated from ``base`` exist already."""
    import glob

    return bool(glob.glob(rotated_glob(base)))


def _check_name_free(paths: Sequence[Path], session: str) -> None:
    """Refuse a ``--session`` name the cassette (or a file of the rotated set) already has."""
    for p in paths:
        with Cassette.open(p) as c:
            if any(s.name == session for s in c.sessions()):
                raise CassetteError(f"cassette {p} already has a session named {session!r}; "
                                    "choose another --session name")


def failed_recording(path: str | os.PathLike[str], session: str) -> str | None:
    """Why session ``session`` of ``path`` is no recording to keep, or None: its server sent
    nothing, or never answered the client's first request. The reason ends with the last line
    the server wrote on stderr, if it wrote one."""
    with Cassette.open(path) as c:
        s = c.session(session)
        first = c.next_request(s, -1)
        if first is None:  # the client asked nothing: nothing the server could have failed
            return None
        sent = any(m.direction == SERVER_TO_CLIENT for m in c.messages(s))
        if sent and c.answer(s, first.seq) is not None:
            return None
        said = [line.line.strip() for line in c.stderr(s) if line.line.strip()]
    why = (f"the server never answered {first.method or 'the first request'}" if sent
           else "the server sent nothing")
    if s.exit_code is not None:
        why += f" (it exited with {s.exit_code})"
    if said:
        why += f"; its last stderr line: {said[-1]}"
    return why
