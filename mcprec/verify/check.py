"""Verify from a test: the machinery of the pytest plugin's ``mcprec_verify`` fixture and marker
(``pytest_plugin.py`` holds the fixture; this module holds what it runs, with no pytest in it).

A verification drives the server under test with a recorded session's client traffic and diffs
the new run with the recording (``mcprec verify``). From a test, the committed cassette is left
as it is: the run is recorded into a copy of it in a temporary directory, unless ``update``
asks to accept the new run as the reference (then in place, as ``verify --update``).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .gate import FAIL_ON, Gate, resolve

OPTIONS = ("cassette", "server", "target", "session", "ignore", "normalize", "fail_on",
           "surface_only", "fail_on_latency", "timeout", "update", "check")
"""What the marker and the fixture's call take."""


@dataclass
class VerifySettings:
    cassette: Path
    server: Sequence[str] = ()
    target: str | None = None
    session: str | None = None
    gate: Gate = field(default_factory=Gate)
    """The diff settings and the pass/fail rule, as ``mcprec verify`` builds them."""
    timeout: float = 30.0
    update: bool = False
    check: bool = True


def settings(cassette: Path, given: dict[str, Any], config_dir: Path) -> VerifySettings:
    """The project's ``[diff]`` config (in ``config_dir``) under the marker's and the call's
    arguments (``given``), as ``mcprec verify``'s options over it: ignores and normalizers add
    up."""
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise UsageError(f"unknown mcprec_verify arguments: {', '.join(unknown)}; known: "
                         f"{', '.join(OPTIONS)}")
    server = given.get("server") or ()
    if isinstance(server, (str, os.PathLike)):
        raise UsageError("mcprec_verify: server is the server's argv, a list "
                         "(e.g. [sys.executable, 'server.py'])")
    fail_on = given.get("fail_on") or None
    if fail_on is not None and fail_on not in FAIL_ON:
        raise UsageError(f"mcprec_verify: fail_on must be breaking, warning or any; got "
                         f"{fail_on!r}")
    gate = resolve(cwd=config_dir, ignore=_strings(given.get("ignore")),
                   normalize=_strings(given.get("normalize")), fail_on=fail_on,
                   surface_only=_flag(given.get("surface_only")),
                   fail_on_latency=_flag(given.get("fail_on_latency")))
    return VerifySettings(
        cassette=cassette, server=[str(x) for x in server], target=given.get("target"),
        session=given.get("session"), gate=gate,
        timeout=float(given.get("timeout", 30.0)), update=bool(given.get("update", False)),
        check=bool(given.get("check", True)),
    )


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _strings(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


@dataclass
class Outcome:
    """One verification from a test: the diff, and why it fails the test (None: it passes)."""

    result: Any
    """The ``DiffResult``: ``.equal``, ``.counts``, ``.to_text()``..."""
    failure: str | None
    new_session: str


def run(s: VerifySettings, workdir: Path) -> Outcome:
    """Verify ``s.cassette`` (a copy of it in ``workdir``, or in place with ``update``)."""
    if s.target is None and not s.server:
        raise UsageError("mcprec_verify needs the server under test: server=[...] (its argv) "
                         "or target=URL, in the marker or the call, or a mcprec_real_server "
                         "fixture")
    if not s.cassette.is_file():
        raise FileNotFoundError(s.cassette)
    if _loop_running():  # an async test: verify's own event loop runs in a thread
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(_run, s, workdir).result()
    return _run(s, workdir)


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run(s: VerifySettings, workdir: Path) -> Outcome:
    from .run import accept, describe, run_verification

    if s.update:
        from ..cassette.lock import cassette_lock

        with cassette_lock(s.cassette):
            v = run_verification(s.cassette, list(s.server), target=s.target,
                                 session=s.session, timeout=s.timeout)
            result = s.gate.compare(s.cassette, v.original, v.new)
            accept(s.cassette, v)
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        copy = workdir / s.cassette.name
        _copy_cassette(s.cassette, copy)
        v = run_verification(copy, list(s.server), target=s.target, session=s.session,
                             timeout=s.timeout)
        result = s.gate.compare(copy, v.original, v.new)
    failure = None
    failed = s.gate.fails(result, v.drive.timed_out)
    describe(result, s.cassette, v, s.server, s.target, failed=failed)
    if failed:
        fail_on = s.gate.fail_on
        how = "" if fail_on == "any" else f" (fail_on={fail_on!r})"
        head = (f"mcprec_verify: the server's behaviour differs from session {v.original!r} "
                f"of {s.cassette}{how}")
        if v.drive.timed_out:
            head += f"; no answer to request id(s) {', '.join(v.drive.timed_out)}"
        failure = head + "\n\n" + result.to_text()
    return Outcome(result, failure, v.new)


def _copy_cassette(src: Path, dst: Path) -> None:
    """A consistent copy through SQLite's backup API (a WAL it may have included)."""
    from ..cassette.connect import copy_cassette

    copy_cassette(src, dst)