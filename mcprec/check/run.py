"""One check run: the probe session recorded into a cassette (stdio through the tap, HTTP
through the recording proxy, as ``mcprec record --script`` records), the HTTP checks made
straight to the server, then the recording linted.

A server that cannot be started or reached raises (the command line's "could not run"); a
server that starts and then misbehaves, dies included, gets failing checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..cassette import Cassette
from ..errors import McprecError, ServerStartError, UsageError
from ..redact import default_redactor
from .model import FAIL, PASS, SKIP, CheckReport, Result
from .probe import Probe, ProbeOptions, ProbeSession

DEFAULT_SESSION = "check"


@dataclass
class CheckOptions(ProbeOptions):
    headers: dict[str, str] = field(default_factory=dict)
    """Sent with every HTTP request (e.g. Authorization)."""
    exit_timeout: float = 5.0
    """Seconds a stdio server may take to exit once its input is closed."""
    lint: bool = True


def run_check(*, server: Sequence[str] = (), target: str | None = None,
              cassette: str | os.PathLike[str] | None = None, session: str | None = None,
              options: CheckOptions | None = None,
              on_result: Callable[[Result], None] | None = None) -> CheckReport:
    """Probe ``server`` (a stdio command) or ``target`` (a Streamable HTTP URL). The probe
    session is kept in ``cassette`` when one is given (as ``session``, default ``check``, or
    ``check-2``... when taken), else in a temporary cassette removed at the end."""
    from ..record.api import check_command

    if bool(server) == bool(target):
        raise UsageError("give either a server command after `--` or --target URL")
    o = options or CheckOptions()
    if target is not None:
        _check_url(target)
    else:
        check_command(server)
    temp = None
    if cassette is None:
        temp = tempfile.mkdtemp(prefix="mcprec-check-")
        path = Path(temp) / "check.db"
    else:
        path = Path(cassette)
    report = CheckReport(target or " ".join(server), "http" if target else "stdio",
                         cassette=None if temp else str(path))
    t0 = time.monotonic()
    try:
        name = _free_name(path, session or DEFAULT_SESSION, explicit=session is not None)
        if target is not None:
            report.sessions = asyncio.run(_http(target, path, name, o, report, on_result))
        else:
            _stdio(list(server), path, name, o, report, on_result)
            report.sessions = [name]
        if o.lint and report.sessions:
            report.results.append(_lint(path, report.sessions[0]))
            if on_result is not None:
                on_result(report.results[-1])
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    report.seconds = time.monotonic() - t0
    return report


def _check_url(url: str) -> None:
    import socket

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--target must be an http:// or https:// URL, got {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=10).close()
    except OSError as e:
        raise McprecError(f"cannot reach {url}: {e.strerror or e}") from None


def _free_name(path: Path, name: str, *, explicit: bool) -> str:
    if not path.exists():
        return name
    with Cassette.open(path) as c:
        taken = {s.name for s in c.sessions()}
    if name not in taken:
        return name
    if explicit:
        raise UsageError(f"cassette {path} already has a session named {name!r}")
    n = 2
    while f"{name}-{n}" in taken:
        n += 1
    return f"{name}-{n}"


def _finish(report: CheckReport, s: ProbeSession) -> None:
    report.results.extend(s.results)
    info = s.p.server_result.get("serverInfo")
    report.server = info if isinstance(info, dict) else {}
    version = s.p.server_result.get("protocolVersion")
    report.protocol = version if isinstance(version, str) else None


def _stdio(argv: list[str], path: Path, name: str, o: CheckOptions, report: CheckReport,
           on_result: Callable[[Result], None] | None) -> None:
    from ..record.api import open_recording

    writer = open_recording(path, name, transport="stdio", target=argv,
                            tags={"check": "mcprec check"}, redact=default_redactor())
    s = ProbeSession(Probe(o.timeout), o, on_result)
    exit_code: int | None = None
    try:
        exit_code = asyncio.run(_play_stdio(argv, s, writer, o))
    except ServerStartError:
        writer.close(status="incomplete")
        with contextlib.suppress(McprecError), Cassette.open(path) as c:
            c.delete_session(name)
        raise
    writer.close(exit_code=exit_code, status="complete")
    _finish(report, s)
    if exit_code in (128 + signal.SIGTERM, 128 + signal.SIGKILL):
        r = Result("lifecycle.exit", FAIL, f"the server did not exit within {o.exit_timeout:g} s "
                   "of its input closing, and was stopped")
    elif exit_code in (None, 0):
        r = Result("lifecycle.exit", PASS, "the server exited with 0 when its input closed")
    elif exit_code > 128:
        r = Result("lifecycle.exit", FAIL,
                   f"the server died of signal {exit_code - 128} (exit code {exit_code})")
    else:
        r = Result("lifecycle.exit", FAIL, f"the server exited with code {exit_code}")
    report.results.append(r)
    if on_result is not None:
        on_result(r)


async def _play_stdio(argv: list[str], s: ProbeSession, writer: Any, o: CheckOptions
                      ) -> int | None:
    from ..script.links import tapped_server

    async with tapped_server(argv, s.p, writer, exit_timeout=o.exit_timeout) as server:
        await s.run()
    return server.exit_code


async def _http(target: str, path: Path, name: str, o: CheckOptions, report: CheckReport,
                on_result: Callable[[Result], None] | None) -> list[str]:
    from ..script.links import http_server
    from ..script.run import recording_proxy
    from .http import http_checks

    s = ProbeSession(Probe(o.timeout), o, on_result)

    async def extra(session: ProbeSession) -> None:
        await http_checks(session, target, o.headers)

    async with recording_proxy(target, path, name, {"check": "mcprec check"}, default_redactor(),
                               timeout=max(o.timeout * 2, 30.0)) as (url, proxy):
        async with http_server(url, s.p, o.headers):
            await s.run(extra)
    _finish(report, s)
    return list(proxy.sessions)


def _lint(path: Path, session: str) -> Result:
    """The recorded session linted (protocol rules, what the server sent)."""
    from ..lint.api import LintOptions, lint
    from ..lint.model import severity_rank

    t0 = time.monotonic()
    try:
        result = lint([path], session=session, options=LintOptions(select=["protocol"]))
    except McprecError as e:
        return Result("lint", SKIP, f"could not lint the recording: {e}")
    floor = severity_rank("warning")
    found = [f for f in result.findings if f.direction == "server_to_client"
             and severity_rank(f.severity) >= floor]
    took = time.monotonic() - t0
    if not found:
        return Result("lint", PASS, f"no findings in the server's messages "
                      f"({result.sessions[0].messages} messages)", took)
    shown = "; ".join(f"{f.code} seq {f.seq} {f.method or ''}: {f.message}" for f in found[:3])
    more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
    return Result("lint", FAIL, f"{len(found)} finding(s): {shown}{more}", took)
