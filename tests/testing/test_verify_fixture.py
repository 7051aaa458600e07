"""The pytest plugin's `mcprec_verify` fixture and marker, run in pytester: a server under test
(tests/peers/clock_server.py) verified against a recorded session, the test failing with the
diff when its behaviour changed."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import PEERS, ClientRun, copy_cassette, dump, record_scenario
from support.plugin_helpers import INNER_ARGS
from support.plugin_helpers import no_mode_from_the_environment  # noqa: F401 - autouse here too

pytest_plugins = ["pytester"]

CLOCK = [sys.executable, str(PEERS / "clock_server.py")]
NORMALIZE = ["timestamps", "uuids", "order=ORD-[0-9]+"]


async def scenario(s: Any, run: ClientRun) -> None:
    """The catalog, an order and a lookup."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea"}))
    run.results["lookup"] = dump(await s.call_tool("lookup", {"id": "a", "at": "b"}))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette with one reference session, "ref", of the clock server v1."""
    cas = tmp_path_factory.mktemp("verify-fixture") / "clock.db"
    record_scenario(cas, "ref", CLOCK, scenario)
    return cas


@pytest.fixture
def project(pytester: pytest.Pytester, reference: Path) -> pytest.Pytester:
    """An inner project with the reference at cassettes/clock.db, next to its tests."""
    (pytester.path / "cassettes").mkdir()
    copy_cassette(reference, pytester.path / "cassettes" / "clock.db")
    return pytester


def sessions(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(str(path))) as db:
        return [name for (name,) in db.execute("SELECT name FROM sessions ORDER BY id")]


CALL_FORM = f'''
import pytest

CLOCK = {CLOCK!r}


def test_verify(mcprec_verify):
    result = mcprec_verify("cassettes/clock.db", CLOCK, {{args}})
    assert result.equal
'''


def test_call_form_passes_with_normalizers_and_leaves_the_cassette(project: pytest.Pytester,
                                                                   ) -> None:
    """The fixture's call verifies a copy: the test passes, the cassette keeps one session."""
    project.makepyfile(CALL_FORM.replace("{args}", f"normalize={NORMALIZE!r}"))
    project.runpytest(*INNER_ARGS).assert_outcomes(passed=1)
    assert sessions(project.path / "cassettes" / "clock.db") == ["ref"]


def test_call_form_fails_with_the_diff(project: pytest.Pytester) -> None:
    """Without normalizers the fresh ids differ: the test fails with the diff report."""
    project.makepyfile(CALL_FORM.replace("{args}", ""))
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*mcprec_verify: the server's behaviour differs from session 'ref' of *clock.db",
        "*tools/call create_order*",
        "*Result: DIFFERENT*"])
    assert "Traceback" not in result.stdout.str()


MARKER_FORM = f'''
import pytest

CLOCK = {CLOCK!r}


@pytest.mark.mcprec_verify(cassette="cassettes/clock.db", server=CLOCK,
                           normalize={NORMALIZE!r}, fail_on={{fail_on!r}})
def test_marked():
    pass
'''


@pytest.mark.parametrize("variant, fail_on, outcome", [
    ("v1", "any", "passed"), ("v2", "breaking", "passed"), ("v2", "warning", "failed"),
    ("v3", "breaking", "failed"),
])
def test_marker_form_and_fail_on(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                 variant: str, fail_on: str, outcome: str) -> None:
    """The marker alone verifies after the body; fail_on decides what fails the test."""
    monkeypatch.setenv("MCPREC_TEST_CLOCK_VARIANT", variant)
    project.makepyfile(MARKER_FORM.replace("{fail_on!r}", repr(fail_on)))
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(**{outcome: 1})
    if variant == "v2" and outcome == "failed":
        result.stdout.fnmatch_lines(["*(fail_on='warning')*", "*WARNING   lookup: description*"])
    if variant == "v3":
        result.stdout.fnmatch_lines(["*BREAKING  lookup: required input 'region' added*"])


def test_async_test_and_run_async(project: pytest.Pytester) -> None:
    """From an async test: the plain call (verify's loop in a thread) and ``run_async``."""
    project.makepyfile(f'''
import pytest

CLOCK = {CLOCK!r}


@pytest.mark.anyio
async def test_async(mcprec_verify):
    first = mcprec_verify("cassettes/clock.db", CLOCK, normalize={NORMALIZE!r})
    second = await mcprec_verify.run_async("cassettes/clock.db", CLOCK,
                                           normalize={NORMALIZE!r})
    assert first.equal and second.equal and mcprec_verify.last is second


@pytest.fixture
def anyio_backend():
    return "asyncio"
''')
    project.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_real_server_fixture_config_and_update(project: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The server from mcprec_real_server, normalizers from [diff] in mcprec.toml; with
    --mcprec-mode=all the new run (v2) becomes the reference, and then v2 verifies clean."""
    project.makeconftest(f'''
import pytest

@pytest.fixture
def mcprec_real_server():
    return {CLOCK!r}
''')
    (project.path / "mcprec.toml").write_text(
        '[diff]\nnormalize = ["timestamps", "uuids", "order"]\n'
        '[diff.normalizers]\norder = "ORD-[0-9]+"\n')
    project.makepyfile('''
import pytest

@pytest.mark.mcprec_verify(cassette="cassettes/clock.db")
def test_marked():
    pass
''')
    project.runpytest(*INNER_ARGS).assert_outcomes(passed=1)
    monkeypatch.setenv("MCPREC_TEST_CLOCK_VARIANT", "v2")
    project.runpytest(*INNER_ARGS).assert_outcomes(failed=1)
    project.runpytest("--mcprec-mode=all", *INNER_ARGS).assert_outcomes(failed=1)
    assert sessions(project.path / "cassettes" / "clock.db") == ["ref"]  # accepted, renamed
    project.runpytest(*INNER_ARGS).assert_outcomes(passed=1)


def test_missing_cassette_fails_or_skips(project: pytest.Pytester) -> None:
    """A missing cassette fails the test; --mcprec-skip-missing skips it."""
    project.makepyfile(f'''
def test_missing(mcprec_verify):
    mcprec_verify("cassettes/nope.db", {CLOCK!r})
''')
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*mcprec: no cassette at *nope.db*"])
    project.runpytest("--mcprec-skip-missing", *INNER_ARGS).assert_outcomes(skipped=1)


@pytest.mark.parametrize("args, message", [
    ("fail_on='sometimes'", "*mcprec_verify: mcprec_verify: fail_on must be breaking, warning "
                            "or any; got 'sometimes'*"),
    ("normalize=['stamps']", "*mcprec_verify: unknown normalizer 'stamps'*"),
    ("ignored=['$..x']", "*unknown mcprec_verify arguments: ignored*"),
])
def test_bad_arguments_fail_in_one_line(project: pytest.Pytester, args: str,
                                        message: str) -> None:
    """A bad fail_on, normalizer or argument name fails the test with one line."""
    project.makepyfile(CALL_FORM.replace("{args}", args))
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


def test_no_server_is_a_clear_failure(project: pytest.Pytester) -> None:
    """Without server, target or mcprec_real_server: a one-line failure saying what to give."""
    project.makepyfile('''
def test_no_server(mcprec_verify):
    mcprec_verify("cassettes/clock.db")
''')
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*mcprec_verify needs the server under test*"])


LATENCY_CONFIG = ('[diff]\nnormalize = ["timestamps", "uuids", "order"]\n'
                  'fail-on-latency = true\n{extra}'
                  '[diff.normalizers]\norder = "ORD-[0-9]+"\n')


@pytest.mark.parametrize("extra, outcome", [
    ("", "failed"),
    ("latency-min-ms = 60000\n", "passed"),
    ("latency-threshold = 1e9\n", "passed"),
])
def test_latency_settings_of_the_config_gate_the_test(project: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      extra: str, outcome: str) -> None:
    """[diff] latency-threshold and latency-min-ms decide a latency regression from a test as
    they do for `mcprec verify` (one gate): a 300 ms slower lookup fails, unless they allow it."""
    monkeypatch.setenv("MCPREC_TEST_CLOCK_DELAY_MS", "300")
    (project.path / "mcprec.toml").write_text(LATENCY_CONFIG.format(extra=extra))
    project.makepyfile(CALL_FORM.replace("{args}", ""))
    result = project.runpytest(*INNER_ARGS)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*mcprec_verify: the server's behaviour differs*"])
