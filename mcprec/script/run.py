"""Recording scripted sessions: mcprec's own client plays a scenario through the recording
machinery every other client goes through.

A stdio server runs behind the same ``StdioTap`` as ``mcprec record -- SERVER``, recording
through the same recorder process; the tap's stdin and stdout are pipes to the scripted client
instead of this process's own. An HTTP server is reached through the same ``RecordingProxy``
as ``mcprec record --target URL``, listening on a loopback port for this one client. So a
scripted session lands in the cassette exactly as a tapped one: same tables, same redaction,
same ``show``, ``diff``, ``verify`` and ``replay``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cassette import Cassette
from ..errors import CassetteError, McprecError, ServerStartError, UsageError
from ..naming import default_cassette, default_http_cassette
from ..redact import Redactor, Rules, default_redactor, env_secrets
from .client import ScriptedClient, StepFailed, StepOutcome
from .links import http_server, tapped_server
from .scenario import Scenario, ScenarioError


@dataclass
class ScriptRun:
    """What one scenario did, and where its recording went."""

    scenario: Scenario
    cassette: Path
    session: str | None
    """The recorded session's name; None when nothing was kept."""
    outcomes: list[StepOutcome] = field(default_factory=list)
    failure: StepFailed | None = None
    exit_code: int | None = None
    """The stdio server's exit code."""
    messages: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        """One line for the terminal."""
        s = self.scenario
        if self.failure is not None:
            kept = (f"; the run is kept as session {self.session!r} of {self.cassette}"
                    if self.session else "")
            return f"{s.path}: {self.failure}{kept}{self.note}"
        steps = f"{len(self.outcomes)} step{'s' if len(self.outcomes) != 1 else ''}"
        return (f"{s.path}: recorded session {self.session!r} into {self.cassette} ({steps}, "
                f"{self.messages} messages){self.note}")


@dataclass
class _Plan:
    scenario: Scenario
    argv: list[str] | None
    url: str | None
    path: Path
    name: str
    record_as: str


def record_scripts(
    scenarios: Sequence[Scenario],
    *,
    server: Sequence[str] = (),
    target: str | None = None,
    cassette: str | os.PathLike[str] | None = None,
    session: str | None = None,
    tags: dict[str, str] | None = None,
    replace: bool = False,
    durable: bool = False,
    exit_timeout: float = 5.0,
    max_message_size: int | None = None,
    upstream_timeout: float = 300.0,
    listen: str = "127.0.0.1:0",
    redact: Redactor | None = None,
    on_run: Callable[[ScriptRun], None] | None = None,
) -> list[ScriptRun]:
    """Record each scenario as a session: against ``server`` (a stdio command), ``target`` (a
    Streamable HTTP URL), or else the server the scenario names. Sessions are named by
    ``session`` (one scenario only) or each scenario's name; a name already in the cassette
    is an error unless ``replace``, which swaps the old session out once the new run passed.
    A failed step does not stop the other scenarios; its run is kept, tagged ``script_failed``
    (a run that could not even initialize is dropped)."""
    if server and target:
        raise UsageError("give either --target URL or a server command, not both")
    if session is not None and len(scenarios) > 1:
        raise UsageError("--session names one session; with several scenarios each session "
                         "takes its scenario's name")
    plans = [_plan(s, server, target, cassette, session) for s in scenarios]
    _check_names(plans, replace)
    base = redact if redact is not None else default_redactor()
    runs = []
    for plan in plans:
        s = plan.scenario
        run_tags = {**s.tags, **(tags or {}), "script": s.path.name}
        redactor = _with_scenario_secrets(base, s)
        if plan.argv is not None:
            run = _record_stdio(plan, run_tags, redactor, durable=durable,
                                exit_timeout=exit_timeout, max_message_size=max_message_size)
        else:
            run = _record_http(plan, run_tags, redactor, timeout=upstream_timeout, listen=listen)
        _settle(plan, run, replace)
        runs.append(run)
        if on_run is not None:
            on_run(run)
    return runs


def _plan(s: Scenario, server: Sequence[str], target: str | None,
          cassette: str | os.PathLike[str] | None, session: str | None) -> _Plan:
    argv = list(server) if server else None
    url = target
    if argv is None and url is None:
        argv, url = s.server.command, s.server.url
    if argv is None and url is None:
        raise ScenarioError(f"{s.path}: no server to record: give its command after `--`, or "
                            "--target URL, or set [server] command (or url) in the scenario")
    if cassette is not None:
        path = Path(cassette)
    else:
        path = default_cassette(argv) if argv is not None else default_http_cassette(url or "")
    name = session or s.name
    return _Plan(s, argv, url, path, name, name)


def _check_names(plans: list[_Plan], replace: bool) -> None:
    """Refuse taken names before any server starts; with ``replace``, record under a
    temporary name that takes the old one's place at the end."""
    for plan in plans:
        if not plan.path.exists():
            continue
        with Cassette.open(plan.path) as c:
            taken = {s.name for s in c.sessions()}
        if plan.name in taken:
            if not replace:
                raise CassetteError(
                    f"cassette {plan.path} already has a session named {plan.name!r} "
                    f"({plan.scenario.path}); pass --replace to record it again")
            plan.record_as = f"{plan.name}.new-{secrets.token_hex(3)}"


def _with_scenario_secrets(base: Redactor, s: Scenario) -> Redactor:
    """Secrets the scenario itself hands the server (``[server] env`` values with secret
    names, secret headers) are redacted wherever they show up."""
    headers = s.server.headers  # "Authorization: Bearer X": X is the secret
    values = [*env_secrets(s.server.env), *env_secrets(headers),
              *env_secrets({k: v.split(" ", 1)[-1] for k, v in headers.items()})]
    if not values:
        return base
    return Redactor(base.rules.merged(Rules(extra_values=values)))


# --- stdio: the tap, with the scripted client on its client side ---------------------------------


def _record_stdio(plan: _Plan, tags: dict[str, str], redactor: Redactor, *, durable: bool,
                  exit_timeout: float, max_message_size: int | None) -> ScriptRun:
    from ..record.api import check_command, open_recording

    assert plan.argv is not None
    s = plan.scenario
    exe = plan.argv[0]
    if s.server.cwd and os.sep in exe and not os.path.isabs(exe):
        check_command([os.path.join(s.server.cwd, exe), *plan.argv[1:]])
    else:
        check_command(plan.argv)
    if s.server.cwd and not os.path.isdir(s.server.cwd):
        raise ScenarioError(f"{s.path}: [server] cwd {s.server.cwd} is not a directory")
    writer = open_recording(plan.path, plan.record_as, transport="stdio", target=plan.argv,
                            tags=tags, redact=redactor, max_message_size=max_message_size)
    run = ScriptRun(s, plan.path, plan.record_as)
    status = "incomplete"
    try:
        asyncio.run(_play_stdio(plan, writer, run, durable=durable, exit_timeout=exit_timeout))
        status = "complete"
    except ServerStartError:
        writer.close(status=status)
        with contextlib.suppress(McprecError), Cassette.open(plan.path) as c:
            c.delete_session(plan.record_as)  # the server never ran: no empty session left
        raise
    finally:
        writer.close(exit_code=run.exit_code, status=status)
    return run


async def _play_stdio(plan: _Plan, writer: Any, run: ScriptRun, *, durable: bool,
                      exit_timeout: float) -> None:
    assert plan.argv is not None
    s = plan.scenario
    client = ScriptedClient(s.client)
    async with tapped_server(
        plan.argv, client, writer, env={**os.environ, **s.server.env} if s.server.env else None,
        cwd=s.server.cwd, exit_timeout=exit_timeout,
        before_forward=(lambda: None if writer.sync() else None) if durable else None,
    ) as server:
        await _play(client, run)
    run.exit_code = server.exit_code


async def _play(client: ScriptedClient, run: ScriptRun) -> None:
    try:
        run.outcomes = await client.play(run.scenario)
    except StepFailed as e:
        run.failure = e


# --- HTTP: the recording proxy, on a loopback port, with the scripted client as its client -------


def _record_http(plan: _Plan, tags: dict[str, str], redactor: Redactor, *, timeout: float,
                 listen: str) -> ScriptRun:
    run = ScriptRun(plan.scenario, plan.path, None)
    recorded = asyncio.run(_play_http(plan, tags, redactor, run, timeout=timeout, listen=listen))
    if recorded:
        run.session = recorded[0]
    if len(recorded) > 1:
        run.note = f" (the server made {len(recorded)} sessions of it: {', '.join(recorded)})"
    return run


async def _play_http(plan: _Plan, tags: dict[str, str], redactor: Redactor, run: ScriptRun, *,
                     timeout: float, listen: str) -> list[str]:
    assert plan.url is not None
    s = plan.scenario
    async with recording_proxy(plan.url, plan.path, plan.record_as, tags, redactor,
                               timeout=timeout, listen=listen) as (url, proxy):
        client = ScriptedClient(s.client)
        async with http_server(url, client, s.server.headers):
            await _play(client, run)
    return list(proxy.sessions)


@contextlib.asynccontextmanager
async def recording_proxy(target: str, path: Path, session: str, tags: dict[str, str],
                          redactor: Redactor, *, timeout: float, listen: str = "127.0.0.1:0",
                          ) -> AsyncIterator[tuple[str, Any]]:
    """The recording proxy for ``target`` serving on ``listen`` while the block runs: its URL,
    and the proxy (``proxy.sessions``: the names it recorded, once the block is left)."""
    from ..record.http_sessions import ProxyRecordings
    from ..transports.http_proxy import RecordingProxy
    from ..transports.http_serve import bind, parse_listen, serve_app, url_of

    proxy = RecordingProxy(target, path, session=session, tags=tags, timeout=timeout,
                           redact=redactor, recordings=ProxyRecordings)
    sock = bind(*parse_listen(listen))
    url = url_of(sock, proxy.path)
    proxy.listen_origin = url[: url.index("/", len("http://"))]
    stop, ready = asyncio.Event(), asyncio.Event()
    serving = asyncio.get_running_loop().create_task(
        serve_app(proxy, sock, on_ready=ready.set, stop=stop))
    try:
        waiting = asyncio.get_running_loop().create_task(ready.wait())
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if serving.done():
            serving.result()  # raises why it could not serve
            raise CassetteError(f"the recording proxy for {target} stopped at once")
        yield url, proxy
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await proxy.aclose()


# --- after the run ------------------------------------------------------------------------------


def _settle(plan: _Plan, run: ScriptRun, replace: bool) -> None:
    """Name, tag or drop the recorded session, and count its messages."""
    if run.session is None:
        return
    with Cassette.open(plan.path) as c:
        if run.failure is not None:
            if run.failure.where == "initialize" or plan.record_as != plan.name:
                c.delete_session(run.session)  # nothing worth keeping, or the old one stays
                run.session = None
                if plan.record_as != plan.name:
                    run.note = f"; session {plan.name!r} is left as it was"
                return
            s = c.session(run.session)
            c.update_session(s, tags={**s.tags, "script_failed": str(run.failure)})
            return
        if plan.record_as != plan.name:
            c.delete_session(plan.name)
            c.rename_session(plan.record_as, plan.name)
            run.session = plan.name
        run.messages = c.session(run.session).message_count
    if run.exit_code in (128 + signal.SIGTERM, 128 + signal.SIGKILL):
        run.note = ("; the server did not exit when its input closed, and was stopped after "
                    "--exit-timeout")
    elif run.exit_code not in (None, 0):
        run.note = f"; the server exited with code {run.exit_code}"


__all__ = ["ScriptRun", "record_scripts", "recording_proxy"]

