"""The pytest plugin (registered through the ``pytest11`` entry point).

    @pytest.mark.mcprec(server=["python", "weather_server.py"])
    async def test_forecast(mcprec_server):
        async with stdio_client(mcprec_server.params) as (read, write):
            ...

The cassette defaults to ``<test dir>/cassettes/<module>/<test name>.db`` (the ini option
``mcprec_cassette_dir`` moves it). The record mode comes from ``--mcprec-mode``, else
``$MCPREC_MODE``, else the marker's ``mode``, else the ini option ``mcprec_mode``, else
``none`` (``record_mode``). A test fails when a request of its replay had no recorded match
(``allow_unmatched=True`` accepts that), when it recorded nothing, and, with
``assert_all_played=True``, when recorded requests were never used. The real server for the
recording modes comes from the marker's ``server`` (argv) or ``target`` (an HTTP server's URL),
or from a ``mcprec_real_server`` or ``mcprec_real_target`` fixture.
Tests that record the same cassette take turns (``testing.cassette_lock``), so that
pytest-xdist workers do not collide.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from ..errors import ReplayError, SessionNotFoundError, UsageError
from ..matching import MatchOptions
from ..modes import MODES, Mode

if TYPE_CHECKING:
    from ..replay.settings import ReplaySettings

DEFAULT_SESSION = "default"
_MARKER_KEYS = {"cassette", "session", "server", "target", "mode", "assert_all_played",
                "allow_unmatched", "ignore", "strict_order", "repeat", "timing", "faults",
                "seed", "normalize", "max_gap", "protocol_version"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcprec", "MCP record/replay")
    group.addoption(
        "--mcprec-mode",
        choices=MODES,
        default=None,
        help="mcprec record mode for tests using mcprec fixtures (default: $MCPREC_MODE, else "
             "the marker's mode, else the mcprec_mode ini option, else none = replay only).",
    )
    group.addoption(
        "--mcprec-skip-missing",
        action="store_true",
        help="In mode none, skip tests whose cassette is missing instead of failing them.",
    )
    parser.addini("mcprec_mode", "mcprec record mode when neither --mcprec-mode, $MCPREC_MODE "
                  "nor the test's marker gives one (default: none).", default="")
    parser.addini("mcprec_cassette_dir", "Directory of the cassettes mcprec derives from test "
                  "names, relative to the ini file (default: cassettes/ next to each test "
                  "file).", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcprec(cassette=None, session=None, server=None, target=None, mode=None, "
        "assert_all_played=False, allow_unmatched=False, ignore=(), strict_order=False, "
        "repeat='last', timing='none', max_gap=None, protocol_version='recorded', faults=(), "
        "seed=None, normalize=()): configure the mcprec "
        "replay for this test",
    )
    config.addinivalue_line(
        "markers",
        "mcprec_verify(cassette=None, server=None, target=None, session=None, ignore=(), "
        "normalize=(), fail_on='any', surface_only=False, fail_on_latency=False, timeout=30, "
        "update=False, check=True): verify the server under test against a recorded session "
        "after the test body (or as the defaults of the mcprec_verify fixture's call)",
    )
    record_mode(config, None)  # a bad $MCPREC_MODE or ini value stops the run at once


def record_mode(config: pytest.Config, marker_mode: str | None) -> Mode:
    """A test's record mode: ``--mcprec-mode``, else ``$MCPREC_MODE``, else the marker's
    ``mode``, else the ini option ``mcprec_mode``, else ``none``."""
    for source, value in (("--mcprec-mode", config.getoption("mcprec_mode")),
                          ("$MCPREC_MODE", os.environ.get("MCPREC_MODE")),
                          ("the mcprec marker's mode", marker_mode),
                          ("the ini option mcprec_mode", config.getini("mcprec_mode"))):
        if value:
            try:
                return Mode.parse(value, source)
            except UsageError as e:
                raise pytest.UsageError(f"mcprec: {e}") from None
    return Mode.NONE


def _settings(kwargs: dict[str, Any]) -> ReplaySettings:
    """The marker's replay settings (``timing``, ``max_gap``, ``protocol_version``, ``faults``,
    ``seed``, ``allow_unmatched``), spelled as ``ReplaySettings`` takes them; a bad one fails
    the test in one line."""
    from ..replay.settings import ReplaySettings

    try:
        return ReplaySettings(
            timing=kwargs.get("timing"), max_gap=kwargs.get("max_gap"),
            protocol_version=kwargs.get("protocol_version", "recorded"),
            faults=kwargs.get("faults") or (), seed=kwargs.get("seed"),
            allow_unmatched=bool(kwargs.get("allow_unmatched", False)))
    except UsageError as e:
        pytest.fail(f"mcprec marker: {e}", pytrace=False)


def _marker_kwargs(request: pytest.FixtureRequest) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("mcprec"))):
        kwargs.update(marker.kwargs)
    unknown = set(kwargs) - _MARKER_KEYS
    if unknown:
        raise pytest.UsageError(f"unknown mcprec marker arguments: {sorted(unknown)}")
    return kwargs


def default_cassette_path(request: pytest.FixtureRequest) -> Path:
    """``<cassette dir>/<module>/<test name>.db``, the cassette dir being the ini option
    ``mcprec_cassette_dir`` (relative to the ini file) or ``cassettes`` next to the test file."""
    module = Path(str(request.node.path))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    configured = request.config.getini("mcprec_cassette_dir")
    if configured:
        config = request.config
        base = (config.inipath.parent if config.inipath else config.rootpath) / configured
    else:
        base = module.parent / "cassettes"
    return base / module.stem / f"{name}.db"


@pytest.fixture
def mcprec_cassette(request: pytest.FixtureRequest) -> Path:
    """The cassette path for this test (from the marker, or derived from the test's name)."""
    kwargs = _marker_kwargs(request)
    if kwargs.get("cassette"):
        path = Path(kwargs["cassette"])
        return path if path.is_absolute() else Path(str(request.node.path)).parent / path
    return default_cassette_path(request)


@pytest.fixture
def mcprec_mode(request: pytest.FixtureRequest) -> Mode:
    """The record mode for this test (``record_mode``)."""
    return record_mode(request.config, _marker_kwargs(request).get("mode"))


def _match_options(kwargs: dict[str, Any]) -> MatchOptions:
    return MatchOptions(
        ignore=tuple(kwargs.get("ignore", ())),
        strict_order=bool(kwargs.get("strict_order", False)),
        repeat=kwargs.get("repeat", "last"),
        normalize=_strings(kwargs.get("normalize", ())),
    )


def _strings(value: Any) -> tuple[str, ...]:
    """A marker argument given as one string or a list of strings."""
    return (value,) if isinstance(value, str) else tuple(value or ())


def _require_cassette(request: pytest.FixtureRequest, cassette: Path, how: str) -> None:
    """Fail (or, with --mcprec-skip-missing, skip) a replay-only test without its cassette."""
    if cassette.exists():
        return
    if request.config.getoption("mcprec_skip_missing"):
        pytest.skip(f"mcprec: no cassette at {cassette}")
    pytest.fail(f"mcprec: no cassette at {cassette}; {how}", pytrace=False)


# --- what is checked after the test -------------------------------------------------------------


class _NotYet(Exception):
    """The replay (or recording) is still running: look again at the fixture's teardown."""


Verdict = Callable[[bool, str], "str | None"]
"""``verdict(final, captured_stderr)``: why the test fails, or None; raises ``_NotYet`` when it
cannot tell before the fixture's teardown (``final``)."""


@dataclass
class _Check:
    """One fixture's verdict, taken once: right after a passing test body if it can tell then,
    else at the fixture's teardown."""

    verdict: Verdict
    done: bool = False

    def failure(self, *, final: bool, captured: str) -> str | None:
        if self.done:
            return None
        try:
            found = self.verdict(final, captured)
        except _NotYet:
            return None
        self.done = True
        return found


_CHECKS = pytest.StashKey[list[_Check]]()
_CALL = pytest.StashKey[pytest.TestReport]()
_WHY_FAILED = pytest.StashKey[list[Callable[[], "str | None"]]]()
"""Said beside a failing test's own failure: why the recording it made was not kept."""


def _captured_stderr(report: pytest.TestReport) -> str:
    return "\n".join(text for title, text in report.sections if title.startswith("Captured stderr"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    checks = item.stash.get(_CHECKS, None)
    if report.when == "call" and checks:
        item.stash[_CALL] = report
        # a failing body says enough; a passing one fails here, as a plain test failure, when
        # what it started has ended (a client held by a fixture ends later: see _watched)
        for check in checks if report.passed else ():
            failure = check.failure(final=False, captured=_captured_stderr(report))
            if failure is not None:
                report.outcome = "failed"
                report.longrepr = failure
                break
    if report.when == "call" and report.failed:
        for why in item.stash.get(_WHY_FAILED, []):
            said = why()
            if said is not None:
                report.sections.append(("mcprec", said))
    return report


@contextlib.contextmanager
def _watched(request: pytest.FixtureRequest, verdict: Verdict) -> Iterator[None]:
    """Register a fixture's verdict for the test, and take it at the fixture's teardown if it
    was not taken right after the body (around the fixture's ``yield``)."""
    check = _Check(verdict)
    request.node.stash.setdefault(_CHECKS, []).append(check)
    yield
    call = request.node.stash.get(_CALL, None)
    if call is None or not call.passed:
        return
    failure = check.failure(final=True, captured=_captured_stderr(call))
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def _replay_verdict(report: dict[str, Any], cassette: Path, kwargs: dict[str, Any],
                    stderr: str) -> str | None:
    from ..matching import RERECORD_PYTEST
    from . import check_replay

    try:
        check_replay(report, cassette=cassette,
                     allow_unmatched=bool(kwargs.get("allow_unmatched", False)),
                     all_played=bool(kwargs.get("assert_all_played", False)), stderr=stderr,
                     rerecord=RERECORD_PYTEST)
    except AssertionError as e:
        return str(e)
    return None


def _failed_recording(report: Path | None) -> str | None:
    """Why the replay process did not keep its recording (its server sent nothing or never
    answered the first request), as it wrote in its report; None when it said nothing so."""
    if report is None or not report.exists():
        return None
    try:
        said = orjson.loads(report.read_bytes())
    except orjson.JSONDecodeError:
        return None
    why = said.get("recording_failed") if isinstance(said, dict) else None
    if not why:
        return None
    return (f"mcprec: recording session {said.get('session')!r} failed: {why}; nothing was "
            "kept, so the next run records again (fix the server, or its command in "
            "@pytest.mark.mcprec(server=[...]))")


def _recording_verdict(cassette: Path, session: str, existed: bool, final: bool) -> str | None:
    """None if the recording holds a request from the client. Else why the test fails, after
    removing the empty session (and the cassette, if the test created it), so that the next run
    records again. Before the end, only a recording that has ended is judged."""
    from ..cassette import Cassette

    if cassette.exists() and cassette.stat().st_size:
        with Cassette.open(cassette) as c:
            try:
                found = c.session(session)
            except SessionNotFoundError:
                found = None
            if found is not None and c.has_requests(found):
                return None
            if not final and (found is None or found.status == "recording"):
                raise _NotYet
            if found is not None:
                c.delete_session(found.name)
            left = c.sessions()
        if not left and not existed:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{cassette}{suffix}").unlink()
    elif not final:
        raise _NotYet
    return (f"mcprec: the test recorded nothing into {cassette} (session {session!r}): its "
            "client sent no request through the mcprec fixture; nothing was kept")


# --- the fixtures ---------------------------------------------------------------------------------


def _fixture_or_none(request: pytest.FixtureRequest, name: str) -> Any:
    """A fixture of the user's that names the real server (``mcprec_real_server``,
    ``mcprec_real_target``), whether or not the test asks for it; None without one."""
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        return None


@pytest.fixture
def mcprec_server(
    request: pytest.FixtureRequest, mcprec_cassette: Path, mcprec_mode: Mode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """A ``ReplayServer``: ``.params`` for the mcp SDK's ``stdio_client``, ``.argv`` for others."""
    from ..replay import needs_recording
    from ..cassette.lock import cassette_lock
    from . import replay_server

    kwargs = _marker_kwargs(request)
    cassette, mode = mcprec_cassette, mcprec_mode
    if mode is Mode.NONE:
        _require_cassette(request, cassette, "record it with --mcprec-mode=once (and give the "
                          "real server with @pytest.mark.mcprec(server=[...]))")
    # recording modes name what they record; plain replay takes the latest session
    session = kwargs.get("session") or (DEFAULT_SESSION if mode.may_record else None)
    existed = cassette.exists()
    with contextlib.ExitStack() as lock:
        recording = needs_recording(cassette, session, mode)
        if recording or mode is Mode.NEW_EPISODES:
            lock.enter_context(cassette_lock(cassette))
            recording = needs_recording(cassette, session, mode)  # by another worker meanwhile?
            if not recording and mode is Mode.ONCE:
                lock.close()  # recorded while we waited: replay it like any other test
        server = kwargs.get("server") or _fixture_or_none(request, "mcprec_real_server")
        if server is None and (recording or mode is Mode.NEW_EPISODES):
            pytest.fail(
                f"mcprec: mode {mode.value!r} needs the real server to record {cassette}; "
                "give it "
                "with @pytest.mark.mcprec(server=[...]) or a mcprec_real_server fixture",
                pytrace=False,
            )
        rs = replay_server(
            cassette, session=session, mode=mode, server=list(server or ()),
            options=_match_options(kwargs), settings=_settings(kwargs),
            report_path=tmp_path_factory.mktemp("mcprec") / "report.json",
        )
        rs.context = "pytest"
        def why_failed() -> str | None:
            """Beside a failing body's own error: the recording not kept, or the requests the
            replay could not answer (with their closest recorded requests)."""
            if recording:
                return _failed_recording(rs.report_path)
            if not rs.launched:
                return None
            try:
                report = rs.report(wait=3.0)
            except ReplayError:
                return None
            return _replay_verdict(report, cassette, {**kwargs, "assert_all_played": False}, "")

        request.node.stash.setdefault(_WHY_FAILED, []).append(why_failed)

        def verdict(final: bool, captured: str) -> str | None:
            if recording:
                if not rs.launched:
                    final = True  # nothing will come
                failed = _failed_recording(rs.report_path)
                if failed is not None:
                    return failed
                return _recording_verdict(cassette, str(session), existed, final)
            if not rs.launched:
                if kwargs.get("assert_all_played"):
                    return (f"mcprec: the test never started the replay of {cassette} "
                            "(with mcprec_server.params or .argv)")
                return None
            assert rs.report_path is not None
            if not final and not rs.report_path.exists():
                raise _NotYet
            try:
                report = rs.report()
            except ReplayError as e:
                return f"mcprec: {e}"
            return _replay_verdict(report, cassette, kwargs, captured)

        with _watched(request, verdict):
            yield rs


@pytest.fixture
def mcprec_http_server(
    request: pytest.FixtureRequest, mcprec_cassette: Path, mcprec_mode: Mode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """A running ``mcprec replay --http`` for this test's cassette or, when the mode records, a
    recording proxy in front of the real HTTP server; ``.url`` is the endpoint either way."""
    from ..replay import needs_recording
    from ..cassette.lock import cassette_lock

    kwargs = _marker_kwargs(request)
    cassette, mode = mcprec_cassette, mcprec_mode
    session = kwargs.get("session") or DEFAULT_SESSION
    existed = cassette.exists()
    # replay --http does not forward yet: new_episodes records what is missing, as once does
    as_mode = Mode.ALL if mode is Mode.ALL else Mode.ONCE
    with contextlib.ExitStack() as lock:
        recording = mode.may_record and needs_recording(cassette, session, as_mode)
        if recording:
            lock.enter_context(cassette_lock(cassette))
            recording = needs_recording(cassette, session, as_mode)  # by another worker?
            if not recording:
                lock.close()
        if recording:
            yield from _record_http(request, kwargs, cassette, session, existed)
        else:
            _require_cassette(request, cassette, "record it with --mcprec-mode=once (and give "
                              "the real server with @pytest.mark.mcprec(target=URL))")
            yield from _replay_http(request, kwargs, cassette, tmp_path_factory)


def _replay_http(request: pytest.FixtureRequest, kwargs: dict[str, Any], cassette: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from . import replay_http_server

    with replay_http_server(cassette, session=kwargs.get("session"),
                            options=_match_options(kwargs), settings=_settings(kwargs),
                            report_path=tmp_path_factory.mktemp("mcprec") / "report.json",
                            ) as server:

        def verdict(final: bool, captured: str) -> str | None:
            if not final:
                raise _NotYet  # the report is written when the server stops, below
            server.stop()
            try:
                report = server.report()
            except ReplayError as e:
                return f"mcprec: {e}"
            return _replay_verdict(report, cassette, kwargs, server.stderr)

        with _watched(request, verdict):
            yield server


def _record_http(request: pytest.FixtureRequest, kwargs: dict[str, Any], cassette: Path,
                 session: str, existed: bool) -> Iterator[Any]:
    from . import record_http_proxy

    target = kwargs.get("target") or _fixture_or_none(request, "mcprec_real_target")
    if not target:
        pytest.fail(f"mcprec: recording {cassette} needs the real HTTP server; give its URL "
                    "with @pytest.mark.mcprec(target=URL) or a mcprec_real_target fixture",
                    pytrace=False)
    _forget(cassette, session)  # mode all: the proxy records under these names again
    with record_http_proxy(str(target), cassette, session=session) as proxy:

        def verdict(final: bool, captured: str) -> str | None:
            if not final:
                raise _NotYet  # sessions are complete when the proxy stops, below
            proxy.stop()
            return _recording_verdict(cassette, session, existed, final=True)

        with _watched(request, verdict):
            yield proxy


def _forget(cassette: Path, session: str) -> None:
    """Delete ``session`` and the ``session-N`` the recording proxy names the next ones."""
    if not cassette.exists():
        return
    from ..cassette import Cassette

    with Cassette.open(cassette) as c:
        for s in c.sessions():
            if re.fullmatch(re.escape(session) + r"(-\d+)?", s.name):
                c.delete_session(s.name)


# --- verify a server against a recording ------------------------------------------------------


class Verifier:
    """What ``mcprec_verify`` gives: call it to verify the server under test against a recorded
    session; the test fails with the diff when the server's behaviour differs (``check=False``:
    just return the ``DiffResult``)."""

    def __init__(self, request: pytest.FixtureRequest, default_cassette: Path,
                 workdir: Path) -> None:
        self._request = request
        self._default_cassette = default_cassette
        self._workdir = workdir
        self.calls = 0
        self.last: Any = None
        """The last call's ``DiffResult``."""

    def __call__(self, cassette: str | os.PathLike[str] | None = None,
                 server: Any = None, **kwargs: Any) -> Any:
        """``mcprec_verify()``, ``mcprec_verify("cassettes/x.db", [sys.executable, "srv.py"],
        fail_on="breaking", normalize=["timestamps"], ...)``: the marker's arguments, with
        these over them."""
        from ..errors import McprecError
        from ..verify.check import run, settings

        self.calls += 1
        request = self._request
        marker = request.node.get_closest_marker("mcprec_verify")
        given: dict[str, Any] = {**(marker.kwargs if marker else {}), **kwargs}
        if cassette is not None:
            given["cassette"] = cassette
        if server is not None:
            given["server"] = server
        path = self._cassette(given.get("cassette"))
        if not given.get("server") and not given.get("target"):
            real = _fixture_or_none(request, "mcprec_real_server")
            if real:
                given["server"] = real
            else:
                given["target"] = _fixture_or_none(request, "mcprec_real_target")
        mode = record_mode(request.config, None)
        if str(getattr(mode, "value", mode)) == "all":
            given.setdefault("update", True)  # re-recording: the new run becomes the reference
        if not path.is_file():
            _require_cassette(request, path, "record a reference session with `mcprec record` "
                              "(see docs/pytest.md#verify-a-server-against-a-recording)")
        try:
            s = settings(path, given, request.config.rootpath)
            outcome = run(s, self._workdir / f"run{self.calls}")
        except McprecError as e:
            pytest.fail(f"mcprec_verify: {e}", pytrace=False)
        self.last = outcome.result
        if outcome.failure and s.check:
            pytest.fail(outcome.failure, pytrace=False)
        return outcome.result

    async def run_async(self, cassette: str | os.PathLike[str] | None = None,
                        server: Any = None, **kwargs: Any) -> Any:
        """The same, awaited in a worker thread: the test's event loop keeps running (an HTTP
        server under test served by that very loop can answer)."""
        import functools

        import anyio.to_thread

        return await anyio.to_thread.run_sync(
            functools.partial(self, cassette, server, **kwargs))

    def _cassette(self, given: Any) -> Path:
        if not given:
            return self._default_cassette
        path = Path(given)
        return path if path.is_absolute() else Path(str(self._request.node.path)).parent / path


@pytest.fixture
def mcprec_verify(request: pytest.FixtureRequest, mcprec_cassette: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Verifier]:
    """Verify the server under test against a recorded session (``mcprec verify`` in a test).

    Call it (``mcprec_verify(...)``), or mark the test ``@pytest.mark.mcprec_verify(...)`` and
    it runs after the test body when the body did not call it."""
    verifier = Verifier(request, mcprec_cassette, tmp_path_factory.mktemp("mcprec-verify"))

    def verdict(final: bool, captured: str) -> str | None:
        if verifier.calls or request.node.get_closest_marker("mcprec_verify") is None:
            return None
        try:
            verifier()
        except pytest.fail.Exception as e:
            return str(e.msg)
        except pytest.skip.Exception:
            return None
        return None

    with _watched(request, verdict):
        yield verifier


@pytest.fixture(autouse=True)
def _mcprec_verify_marker(request: pytest.FixtureRequest) -> None:
    """A test marked ``mcprec_verify`` gets the fixture even when it does not ask for it."""
    if ("mcprec_verify" not in request.fixturenames
            and request.node.get_closest_marker("mcprec_verify") is not None):
        request.getfixturevalue("mcprec_verify")
