"""One source of severity: every badge of every HTML page (the view's diff page, `diff --format
html`, `verify --html`) says the severity the JSON says for the same change or exchange, and
the verdict is the text report's, over diffs that hold every severity."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.helpers import run_mcprec
from support.view_helpers import CHROMIUM, CHROMIUM_ARGS, base_of, recordings, running_view

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "cassettes" / "golden" / "weather.db"
SERVER = [sys.executable, str(ROOT / "examples" / "weather_server.py")]


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK server's v1 and v2: a changed answer (a warning exchange), an error appeared."""
    return recordings(tmp_path_factory.mktemp("severity"))


@pytest.fixture(scope="module")
def browser(sdk: Path) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium`", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def badges(browser: Any, url: str) -> dict[str, Any]:
    """What a diff page shows: the verdict and its severity, each change's badge and text, each
    exchange's badge and label."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = ctx.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda e: problems.append(str(e)))
    tab.goto(url)
    tab.locator(".verdict").wait_for(timeout=60_000)
    out = tab.evaluate("""() => ({
      verdict: document.querySelector('.verdict').textContent,
      severity: document.querySelector('.verdict').dataset.severity,
      changes: [...document.querySelectorAll('li.change')].map((li) => ({
        severity: li.querySelector('.badge').dataset.severity, text: li.textContent })),
      exchanges: [...document.querySelectorAll('li.exchange')].map((li) => {
        const b = li.querySelector('.exchange-head .badge[data-severity]');
        return { severity: b ? b.dataset.severity : null, label: li.querySelector('.exchange-head .m').textContent };
      }),
    })""")
    ctx.close()
    assert not problems, problems
    return dict(out)


def check(page: dict[str, Any], d: dict[str, Any]) -> set[str]:
    """The page says what the JSON says; the severities seen."""
    assert page["verdict"] == d["verdict"]
    assert page["severity"] == (d["severity"] or "")
    changes = d["summary"]["changes"]
    assert len(page["changes"]) == len(changes)
    for shown in page["changes"]:
        same = [c for c in changes if c["message"] in shown["text"] and (c["name"] or "") in shown["text"]]
        assert same and {c["severity"] for c in same} == {shown["severity"]}, (shown, same)
    assert [e["severity"] for e in page["exchanges"]] == [e["severity"] for e in d["exchanges"]]
    assert [e["label"] for e in page["exchanges"]] == [e["label"] for e in d["exchanges"]]
    return {c["severity"] for c in changes} | {e["severity"] for e in d["exchanges"] if e["severity"]}


def test_every_page_says_the_json_severity(browser: Any, sdk: Path, tmp_path: Path) -> None:
    """diff --format html, the live view's diff page and verify --html, over the golden
    cassette's releases and the SDK server's: every badge as in the JSON; all three seen."""
    seen: set[str] = set()
    for a, b in ((f"{GOLDEN}:v1", f"{GOLDEN}:v2"), (f"{sdk}:v1", f"{sdk}:v2")):
        d = json.loads(run_mcprec("diff", a, b, "--format", "json").stdout)
        html = tmp_path / "diff.html"
        html.write_bytes(run_mcprec("diff", a, b, "--format", "html").stdout)
        seen |= check(badges(browser, html.as_uri()), d)
        cassette = a.rsplit(":", 1)[0]
        with running_view(Path(cassette), "--diff", "v1", "v2") as url:
            check(badges(browser, url), d)
    assert seen == {"breaking", "warning", "compatible"}

    golden = tmp_path / "weather.db"
    shutil.copyfile(GOLDEN, golden)
    out = tmp_path / "verify.html"
    r = run_mcprec("verify", str(golden), "-s", "v1", "--format", "json", "--html", str(out),
                   "--", *SERVER, "--v2", timeout=120)
    assert r.returncode == 1, r.stderr
    check(badges(browser, out.as_uri()), json.loads(r.stdout))
