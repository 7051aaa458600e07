"""JUnit XML reports (`--format junit`) of `verify`, `verify --all` and `lint`: valid against the
Jenkins/Ant JUnit schema (tests/data/junit.xsd, checked with xmlschema), one test case per
session verified or per rule and finding, failures and errors where the other formats say so."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from support.helpers import (PEERS, REPO, ClientRun, copy_cassette, dump, record_scenario, recorded,
                     run_mcprec)

XSD = xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit.xsd"))
CLOCK = [sys.executable, str(PEERS / "clock_server.py")]
NORMALIZE = ["--normalize", "timestamps,uuids,order=ORD-[0-9]+"]
CAUSAL = [sys.executable, str(PEERS / "causal_server.py")]


def valid(xml: bytes) -> ET.Element:
    """The report, parsed, after the schema accepted it."""
    XSD.validate(xml.decode())
    return ET.fromstring(xml)


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {f"{c.get('classname')}::{c.get('name')}": c for c in root.iter("testcase")}


async def orders(s: Any, run: ClientRun) -> None:
    """The catalog and an order."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea"}))


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a.db with two sessions of the clock server, `one` and `two`."""
    path = tmp_path_factory.mktemp("junit") / "a.db"
    record_scenario(path, "one", CLOCK, orders)
    record_scenario(path, "two", CLOCK, orders)
    return path


def copy(cassette: Path, tmp_path: Path) -> Path:
    """A fresh copy (verify writes its runs into the cassette)."""
    return copy_cassette(cassette, tmp_path / cassette.name)


def test_verify_all_passing_sessions_are_passing_cases(cassette: Path, tmp_path: Path) -> None:
    """Each session a test case of its cassette's suite; all pass: no failure, exit 0."""
    a = copy(cassette, tmp_path)
    out = run_mcprec("verify", "--all", str(a), *NORMALIZE, "--format", "junit", "--", *CLOCK)
    assert out.returncode == 0, out.stderr.decode()
    root = valid(out.stdout)
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "0"
    (suite,) = root.iter("testsuite")
    assert suite.get("name") == f"mcprec verify {a}"
    found = cases(root)
    assert sorted(found) == [f"{a}::one", f"{a}::two"]
    assert all(c.find("failure") is None and c.find("error") is None for c in found.values())
    assert "Result: EQUAL" in (found[f"{a}::one"].findtext("system-out") or "")


def test_verify_all_failure_carries_the_change_list(cassette: Path, tmp_path: Path) -> None:
    """A changed server: each case a failure whose message is the verdict and whose text is
    the list of changes; exit 1 as with the other formats."""
    a = copy(cassette, tmp_path)
    out = run_mcprec("verify", "--all", str(a), *NORMALIZE, "--format", "junit", "--", *CLOCK,
                     env={"MCPREC_TEST_CLOCK_VARIANT": "v3"})
    assert out.returncode == 1, out.stderr.decode()
    root = valid(out.stdout)
    assert root.get("failures") == "2"
    failure = cases(root)[f"{a}::one"].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("DIFFERENT: 1 breaking change(s)")
    assert "required input" in (failure.text or "")


def test_verify_all_a_session_that_cannot_run_is_an_error(cassette: Path,
                                                          tmp_path: Path) -> None:
    """An empty recorded session cannot be verified: an <error> case, the others still run,
    exit 2."""
    from mcprec.record.writer import open_session_writer

    a = copy(cassette, tmp_path)
    writer = open_session_writer(a, "empty", transport="stdio", target=["x"])
    writer.close(exit_code=0, status="complete")
    out = run_mcprec("verify", "--all", str(a), *NORMALIZE, "--format", "junit", "--", *CLOCK)
    assert out.returncode == 2
    root = valid(out.stdout)
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("3", "1", "0")
    error = cases(root)[f"{a}::empty"].find("error")
    assert error is not None and error.get("type") == "could not verify"


def test_single_verify_junit_and_its_error(cassette: Path, tmp_path: Path) -> None:
    """verify -s: one test case; a session that does not exist: an <error> case on stdout, the
    one-line message on stderr, exit 2."""
    a = copy(cassette, tmp_path)
    out = run_mcprec("verify", str(a), "-s", "two", *NORMALIZE, "-f", "junit", "--", *CLOCK)
    assert out.returncode == 0, out.stderr.decode()
    assert list(cases(valid(out.stdout))) == [f"{a}::two"]
    out = run_mcprec("verify", str(a), "-s", "nope", "-f", "junit", "--", *CLOCK)
    err = out.stderr.decode()
    assert out.returncode == 2 and err.startswith("mcprec: ") and len(err.splitlines()) == 1
    (case,) = valid(out.stdout).iter("testcase")
    assert case.get("name") == "nope" and case.find("error") is not None


def test_lint_junit_rules_pass_and_findings_fail(tmp_path: Path) -> None:
    """lint --format junit: a suite per session, each enabled rule that found nothing a
    passing case, each finding a failing case of its rule (LIF005: initialized sent before
    the initialize result)."""
    c = tmp_path / "c.db"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    lines = b"".join(json.dumps(m).encode() + b"\n" for m in (
        init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}))
    done = subprocess.run(recorded(c, *CAUSAL, extra=("-s", "s")), input=lines,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = run_mcprec("lint", str(c), "--format", "junit")
    assert out.returncode == 1, out.stderr.decode()
    root = valid(out.stdout)
    (suite,) = root.iter("testsuite")
    assert suite.get("name") == f"mcprec lint {c}:s"
    failing = [x for x in suite.iter("testcase") if x.find("failure") is not None]
    assert failing and all(x.get("classname", "").endswith(".LIF005") for x in failing)
    assert all(x.get("name", "").startswith("LIF005 ") for x in failing)
    passing = [x for x in suite.iter("testcase") if x.find("failure") is None]
    assert any(x.get("name", "").startswith("SCH") for x in passing)
    assert int(root.get("tests", "0")) == len(failing) + len(passing) > 20
    # a clean run of the same rules: every case passes, exit 0
    out = run_mcprec("lint", str(c), "--format", "junit", "--skip", "LIF005", "-o",
                     str(tmp_path / "lint.xml"))
    assert out.returncode == 0, out.stderr.decode()
    root = valid((tmp_path / "lint.xml").read_bytes())
    assert root.get("failures") == "0" and root.get("tests") == str(len(passing))


def test_text_xml_cannot_hold_is_escaped() -> None:
    """Control characters from a recording (ESC, NUL) become visible escapes: the document
    still parses and validates."""
    from mcprec.junit import Case, Suite, to_xml

    xml = to_xml([Suite("s\x1b[2J", [Case("n\x00", "c", failure="bad\x07", detail="a\x1bb")])],
                 "run")
    root = valid(xml.encode())
    case = next(root.iter("testcase"))
    assert case.get("name") == "n\\x00"
    failure = case.find("failure")
    assert failure is not None and failure.text == "a\\x1bb"
