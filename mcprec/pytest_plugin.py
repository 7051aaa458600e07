"""The pytest plugin (registered through the ``pytest11`` entry point).

    @pytest.mark.mcprec(server=["python", "weather_server.py"])
    async def test_forecast(mcprec_server):
        async with stdio_client(mcprec_server.params) as (read, write):
            ...

The cassette defaults to ``<test dir>/cassettes/<module>/<test name>.db``. ``--mcprec-mode``
(none | once | new_episodes | all) chooses between replaying and recording; the marker's ``mode``
wins over it. ``assert_all_played=True`` fails the test when recorded requests were never used.
The real server for the recording modes comes from the marker's ``server`` or from a
``mcprec_real_server`` fixture returning its argv.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .errors import ReplayError
from .matching import MatchOptions

DEFAULT_SESSION = "default"
_MARKER_KEYS = {"cassette", "session", "server", "mode", "assert_all_played", "ignore",
                "strict_order", "repeat", "timing"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcprec", "MCP record/replay")
    group.addoption(
        "--mcprec-mode",
        choices=["none", "once", "new_episodes", "all"],
        default=None,
        help="mcprec record mode for tests using mcprec fixtures (default: none = replay only).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcprec(cassette=None, session=None, server=None, mode=None, assert_all_played=False, "
        "ignore=(), strict_order=False, repeat='last', timing='none'): configure the mcprec "
        "replay for this test",
    )


def _marker_kwargs(request: pytest.FixtureRequest) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("mcprec"))):
        kwargs.update(marker.kwargs)
    unknown = set(kwargs) - _MARKER_KEYS
    if unknown:
        raise pytest.UsageError(f"unknown mcprec marker arguments: {sorted(unknown)}")
    return kwargs


def default_cassette_path(request: pytest.FixtureRequest) -> Path:
    """``<test dir>/cassettes/<module>/<test name>.db``."""
    module = Path(str(request.node.fspath))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    return module.parent / "cassettes" / module.stem / f"{name}.db"


@pytest.fixture
def mcprec_cassette(request: pytest.FixtureRequest) -> Path:
    """The cassette path for this test (from the marker, or derived from the test's name)."""
    kwargs = _marker_kwargs(request)
    if kwargs.get("cassette"):
        path = Path(kwargs["cassette"])
        return path if path.is_absolute() else Path(str(request.node.fspath)).parent / path
    return default_cassette_path(request)


@pytest.fixture
def mcprec_mode(request: pytest.FixtureRequest) -> str:
    kwargs = _marker_kwargs(request)
    mode = kwargs.get("mode") or request.config.getoption("--mcprec-mode") or "none"
    return str(mode)


@pytest.fixture
def mcprec_server(
    request: pytest.FixtureRequest, mcprec_cassette: Path, mcprec_mode: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """A ``ReplayServer``: ``.params`` for the mcp SDK's ``stdio_client``, ``.argv`` for others."""
    from .replay import needs_recording
    from .testing import replay_server

    kwargs = _marker_kwargs(request)
    server = kwargs.get("server")
    if server is None:
        try:  # a conftest fixture naming the real server, whether or not the test asks for it
            server = request.getfixturevalue("mcprec_real_server")
        except pytest.FixtureLookupError:
            server = None
    if server is None and mcprec_mode != "none" and (
            mcprec_mode in ("all", "new_episodes") or not mcprec_cassette.exists()):
        pytest.fail(
            f"mcprec: mode {mcprec_mode!r} needs the real server to record {mcprec_cassette}; "
            "give it with @pytest.mark.mcprec(server=[...]) or a mcprec_real_server fixture",
            pytrace=False,
        )
    if mcprec_mode == "none" and not mcprec_cassette.exists():
        pytest.fail(
            f"mcprec: no cassette at {mcprec_cassette}; record it with --mcprec-mode=once "
            "(and give the real server with @pytest.mark.mcprec(server=[...]))",
            pytrace=False,
        )
    options = MatchOptions(
        ignore=tuple(kwargs.get("ignore", ())),
        strict_order=bool(kwargs.get("strict_order", False)),
        repeat=kwargs.get("repeat", "last"),
    )
    report = tmp_path_factory.mktemp("mcprec") / "report.json"
    # recording modes name what they record; plain replay takes the latest session
    session = kwargs.get("session") or (DEFAULT_SESSION if mcprec_mode != "none" else None)
    rs = replay_server(
        mcprec_cassette, session=session,
        mode=mcprec_mode, server=list(server or ()), options=options,
        timing=str(kwargs.get("timing", "none")), report_path=report,
    )
    # a run that records (once with nothing recorded yet, all) plays nothing and writes no report
    check = bool(kwargs.get("assert_all_played", False)) and not needs_recording(
        mcprec_cassette, session, mcprec_mode)
    request.node._mcprec_server = (rs, check)
    yield rs


@pytest.fixture
def mcprec_http_server(
    request: pytest.FixtureRequest, mcprec_cassette: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """A running ``mcprec replay --http`` for this test's cassette; ``.url`` is the endpoint."""
    from .testing import replay_http_server

    kwargs = _marker_kwargs(request)
    if not mcprec_cassette.exists():
        pytest.fail(f"mcprec: no cassette at {mcprec_cassette}; record one with "
                    "`mcprec record --target URL -c PATH`", pytrace=False)
    options = MatchOptions(
        ignore=tuple(kwargs.get("ignore", ())),
        strict_order=bool(kwargs.get("strict_order", False)),
        repeat=kwargs.get("repeat", "last"),
    )
    report = tmp_path_factory.mktemp("mcprec") / "report.json"
    with replay_http_server(mcprec_cassette, session=kwargs.get("session"), options=options,
                            timing=str(kwargs.get("timing", "none")),
                            report_path=report) as server:
        yield server
    if kwargs.get("assert_all_played"):
        _check_played(server.report(), mcprec_cassette)


def _check_played(report: dict[str, Any], cassette: Path) -> None:
    unplayed = report.get("unplayed") or []
    unmatched = report.get("unmatched") or []
    if unplayed or unmatched:
        lines = [f"mcprec: {len(unplayed)} recorded request(s) were never played"
                 f" and {len(unmatched)} request(s) had no recorded match in {cassette}"]
        lines += [f"  unplayed: seq {u['seq']} {u['method']}" for u in unplayed[:20]]
        lines += [f"  unmatched: {u['method']} id={u['id']}" for u in unmatched[:20]]
        pytest.fail("\n".join(lines), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # a new-style wrapper: failing here is a plain test failure (an old-style hookwrapper that
    # raises in its teardown also warns, which filterwarnings=error turns into another error)
    result = yield  # re-raises when the test itself failed: nothing more to check then
    entry = getattr(item, "_mcprec_server", None)
    if entry is None:
        return result
    rs, assert_all_played = entry
    if not assert_all_played or rs.mode in ("all",):
        return result
    try:
        report = rs.report()
    except ReplayError as e:
        pytest.fail(f"mcprec: {e}", pytrace=False)
    _check_played(report, rs.cassette)
    return result
