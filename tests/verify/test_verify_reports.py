"""`mcprec verify`'s reports say what they are (the server or target, the reference session, the
exit status) in text, Markdown, JSON, GitHub and HTML; and the HTML page badges each change with
the severity the JSON gives it, warning included."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.helpers import PEERS, ClientRun, dump, record_scenario, run_mcprec
from support.view_helpers import CHROMIUM, CHROMIUM_ARGS

CLOCK = [sys.executable, str(PEERS / "clock_server.py")]
NORMALIZE = ["--normalize", "timestamps,uuids,order=ORD-[0-9]+"]
# the clock server's releases: the same (v1), a warning (v2: a description and a result), a
# breaking change (v3: a required input), a compatible one (v4: a tool added)
SEVERITY = {"v1": None, "v2": "warning", "v3": "breaking", "v4": "compatible"}


async def scenario(s: Any, run: ClientRun) -> None:
    """The catalog, an order and a lookup."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea"}))
    run.results["lookup"] = dump(await s.call_tool("lookup", {"id": "a", "at": "b"}))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette with one reference session, "ref", of the clock server v1."""
    cas = tmp_path_factory.mktemp("verify-reports") / "clock.db"
    record_scenario(cas, "ref", CLOCK, scenario)
    return cas


@pytest.fixture
def cassette(reference: Path, tmp_path: Path) -> Path:
    """A fresh copy (verify stores its run in the cassette)."""
    return Path(shutil.copy(reference, tmp_path / "clock.db"))


def verify(cassette: Path, variant: str, *args: str) -> Any:
    return run_mcprec("verify", str(cassette), "-s", "ref", *NORMALIZE, *args, "--", *CLOCK,
                      env={"MCPREC_TEST_CLOCK_VARIANT": variant}, timeout=120)


@pytest.mark.parametrize("variant", ["v1", "v3"])
def test_every_format_names_the_server_the_reference_and_the_exit_status(
        cassette: Path, variant: str) -> None:
    """Text, Markdown, JSON and GitHub: `mcprec verify`, the command, `clock.db:ref` and the
    exit status (0 the same server, 1 a breaking change)."""
    code = 0 if variant == "v1" else 1
    ref = f"{cassette}:ref"
    text = verify(cassette, variant)
    assert text.returncode == code, text.stderr
    out = text.stdout.decode()
    assert out.startswith("mcprec verify\n") and "mcprec diff" not in out
    assert f"server: {' '.join(CLOCK)}, against the reference {ref}" in out
    assert out.rstrip().endswith(f"Exit status: {code} ({'passed' if code == 0 else 'failed'})")
    md = verify(cassette, variant, "--format", "markdown").stdout.decode()
    assert md.startswith("## ") and "mcprec verify" in md.splitlines()[0]
    assert f"against the reference `{ref}`" in md and f"exit status {code}" in md
    data = json.loads(verify(cassette, variant, "--format", "json").stdout)
    assert data["verify"]["reference"] == ref and data["verify"]["server"] == CLOCK
    assert data["verify"]["exit_status"] == code
    gh = verify(cassette, variant, "--format", "github").stdout.decode().splitlines()
    assert gh[0].startswith("::notice ") and "title=mcprec verify" in gh[0]
    assert f"exit status {code}" in gh[0] and ref in gh[0]
    assert any(line.startswith("## ") and "mcprec verify" in line for line in gh)
    if variant == "v3":
        assert any(line.startswith("::error ") for line in gh)


@pytest.fixture(scope="module")
def browser(reference: Path) -> Iterator[Any]:
    """Headless Chromium through Playwright, started after the recording (Playwright's sync API
    runs an event loop of its own, and the SDK client needs one of its own)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium`", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.mark.parametrize("variant", sorted(SEVERITY))
def test_html_badges_are_the_json_severities(browser: Any, cassette: Path, tmp_path: Path,
                                             variant: str) -> None:
    """Each change and exchange of the HTML page carries the badge of its JSON severity
    (breaking, warning, compatible); the page says verify, its exit status, and offers no
    session pickers."""
    page_file = tmp_path / "verify.html"
    done = verify(cassette, variant, "--format", "json", "--html", str(page_file))
    data = json.loads(done.stdout)
    assert done.returncode == (0 if variant == "v1" else 1), done.stderr
    assert data["severity"] == SEVERITY[variant]
    expected = sorted([c["severity"] for c in data["summary"]["changes"]]
                      + [e["severity"] for e in data["exchanges"] if e["severity"]])
    context = browser.new_context()
    try:
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(page_file.as_uri())
        tab.locator(".verdict").wait_for()
        badges = sorted(tab.locator(".diff [data-severity]:not(.verdict)").evaluate_all(
            "els => els.map(e => e.dataset.severity)"))
        assert badges == expected
        if SEVERITY[variant]:
            assert SEVERITY[variant] in badges
        shown = tab.locator(".badge[data-severity]").evaluate_all(
            "els => els.map(e => [e.dataset.severity, e.textContent])")
        label = {"breaking": "BREAKING", "warning": "WARNING", "compatible": "compatible"}
        assert shown and all(text == label[sev] for sev, text in shown) or not expected
        head = tab.locator(".verify-head").inner_text()
        assert f"{cassette}:ref" in head and f"exit status {data['verify']['exit_status']}" in head
        assert tab.locator("select").count() == 0
        assert tab.locator("button", has_text="Compare").count() == 0
        assert tab.title().startswith("mcprec verify")
        assert not errors, errors
    finally:
        context.close()
