"""`mcprec view` in a real browser: headless Chromium (Debian's) driven by Playwright, over real
recordings of the SDK server; the same views from a self-contained file opened from file://.

Screenshots of each view go to $MCPREC_VIEW_SCREENSHOTS when it is set (docs/images is made so).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.helpers import SDK_SERVER, run_mcprec
from support.view_helpers import CHROMIUM, CHROMIUM_ARGS, SECRET, base_of, gallery, recordings, running_view

SHOTS = os.environ.get("MCPREC_VIEW_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser(cassette: Path) -> Iterator[Any]:
    """Chromium, started after the recordings are made (Playwright's sync API runs an event
    loop of its own, and the SDK client needs one of its own)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test.sh (it installs Debian's chromium) "
                    "or `apt-get install chromium`", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Page:
    """A browser tab that fails the test on a script error, a console error (a CSP violation
    is one) or a request to anywhere but ``allowed``."""

    def __init__(self, browser: Any, allowed: tuple[str, ...]) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 860})
        self.tab = self.context.new_page()
        self.tab.set_default_timeout(15_000)
        self.problems: list[str] = []
        self.tab.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        self.tab.on("console", lambda m: self.problems.append(f"console: {m.text}")
                    if m.type == "error" else None)
        self.tab.on("request", lambda r: None if r.url.startswith((*allowed, "data:"))
                    else self.problems.append(f"request to {r.url}"))

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.tab.screenshot(path=str(Path(SHOTS) / f"view-{name}.png"))

    def close(self) -> None:
        self.context.close()
        assert not self.problems, self.problems


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recordings(tmp_path_factory.mktemp("view-browser"))


@pytest.fixture(scope="module")
def base(cassette: Path) -> Iterator[str]:
    with running_view(cassette) as url:
        yield base_of(url)


@pytest.fixture
def page(browser: Any, base: str) -> Iterator[Any]:
    p = Page(browser, (base,))
    yield p
    p.close()


def rows(tab: Any) -> Any:
    return tab.locator(".vlist .row.msg")


# --- the live page ----------------------------------------------------------------------------


def test_session_timeline_message_diff(page: Page, base: str) -> None:
    """Click through: sessions -> a timeline -> a request inside out -> a message -> the diff
    of the two sessions, an exchange side by side with its changed path marked."""
    tab = page.tab
    tab.goto(base)
    sessions = tab.locator("tr.session")
    sessions.first.wait_for()
    assert sorted(sessions.locator("td.name").all_text_contents()) == ["v1", "v2"]
    assert "mcprec-test-server 1.0.0" in sessions.filter(has_text="v1").inner_text()
    page.shot("sessions")

    tab.locator("tr.session", has_text="v1").locator("td.name a").click()
    rows(tab).first.wait_for()
    assert tab.locator(".session-head h1").inner_text() == "v1"
    slow = rows(tab).filter(has_text="slow")
    assert slow.locator(".c-lat").inner_text().endswith("ms")
    slow.locator("button.twisty").click()
    progress = tab.locator(".vlist .row.child", has_text="notifications/progress")
    progress.first.wait_for()
    assert progress.count() == 4
    progress.nth(1).click()
    detail = tab.locator("aside.detail")
    detail.locator(".tree", has_text="step 2 of 4").wait_for()
    assert "sent while handling" in detail.locator(".links").inner_text()
    assert re.search(r"#/s/\d+/m/\d+$", tab.url)

    rows(tab).filter(has_text="add").first.click()
    detail.locator("h3", has_text="Answer").wait_for()
    assert detail.locator("h2").inner_text().startswith("tools/call add")
    detail.locator(".msg-section").first.get_by_role("tab", name="Raw").click()
    assert detail.locator("pre.raw").first.inner_text().startswith('{"')
    page.shot("timeline")

    tab.locator("[data-nav=sessions]").click()
    for name in ("v1", "v2"):
        tab.locator("tr.session", has_text=name).locator("input[type=checkbox]").check()
    tab.locator("button", has_text="Diff the two selected").click()
    verdict = tab.locator(".verdict")
    verdict.wait_for()
    assert verdict.inner_text().startswith("DIFFERENT")
    page.shot("diff-summary")
    assert tab.locator("li.change", has_text="legacy").locator(".badge.sev-breaking").count() == 1
    flagged = tab.locator("table.latency tr.flagged code").all_text_contents()
    assert "tools/call slow" in flagged
    forecast = tab.locator("li.exchange", has_text="tools/call forecast")
    forecast.locator("button.exchange-head").click()
    marked = forecast.locator(".side[data-side=B] .leaf.changed")
    marked.first.wait_for()
    assert marked.first.get_attribute("data-path") == "$.result.content[0].text"
    assert "rain" in marked.first.inner_text()
    assert "sunny" in forecast.locator(".side[data-side=A] .leaf.changed").first.inner_text()
    forecast.scroll_into_view_if_needed()
    page.shot("diff")


def test_search(page: Page, base: str) -> None:
    """Search the cassette from the header; a hit opens its message in its timeline."""
    tab = page.tab
    tab.goto(base)
    box = tab.locator("#search-input")
    box.fill("tool:counter")
    box.press("Enter")
    hits = tab.locator("li.hit")
    hits.first.wait_for()
    tab.locator(".search-status", has_text="found").wait_for()
    assert hits.count() == 6
    page.shot("search")
    hits.first.locator("a").click()
    tab.locator("aside.detail h2", has_text="tools/call counter").wait_for()
    selected = tab.locator(".vlist .row.selected")
    assert "counter" in selected.inner_text()
    assert re.search(rf"#/s/\d+/m/{selected.locator('.c-seq').inner_text()}$", tab.url)


def test_deep_link_inside_a_request(page: Page, base: str) -> None:
    """A link to a message sent while handling a request opens that request, selected inside."""
    tab = page.tab
    tab.goto(base + "#/s/1")
    rows(tab).filter(has_text="slow").locator("button.twisty").click()
    tab.locator(".vlist .row.child").first.wait_for()
    seq = tab.locator(".vlist .row.child", has_text="notifications/message").last.locator(
        ".c-seq").inner_text()
    tab.goto(base + "#/")
    tab.locator("tr.session").first.wait_for()
    tab.goto(base + f"#/s/1/m/{seq}")
    selected = tab.locator(".vlist .row.selected")
    selected.wait_for()
    assert selected.locator(".c-seq").inner_text() == seq
    assert "child" in (selected.get_attribute("class") or "")
    tab.locator("aside.detail h2", has_text="notifications/message").wait_for()


def test_media_and_secrets(browser: Any, tmp_path: Path) -> None:
    """Images and audio in results are shown; what looks like a secret only after a warning."""
    path = gallery(tmp_path / "gallery.db")
    with running_view(path) as url:
        page = Page(browser, (base_of(url),))
        tab = page.tab
        tab.goto(base_of(url) + "#/s/1/m/3")
        image = tab.locator(".media img")
        image.wait_for()
        assert tab.evaluate("document.querySelector('.media img').naturalWidth") > 0
        assert tab.locator(".media audio").count() == 1
        page.shot("media")
        tab.goto(base_of(url) + "#/s/1/m/5")
        warning = tab.locator("aside.detail .warning")
        warning.wait_for()
        assert "GitHub token" in warning.inner_text()
        assert SECRET not in tab.locator("aside.detail").inner_text()
        assert SECRET not in tab.locator(".vlist").inner_text()  # the stderr line
        warning.locator("button.reveal").click()
        tab.locator("aside.detail .tree", has_text=SECRET).wait_for()
        page.close()


def test_large_session_is_virtual(browser: Any, tmp_path: Path) -> None:
    """A 20,000-message session: a few dozen rows in the page, wherever one scrolls."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from bench_view import build

    path = tmp_path / "big.db"
    build(path, 20_000)
    with running_view(path, "big") as url:
        page = Page(browser, (base_of(url),))
        tab = page.tab
        tab.goto(url)
        rows(tab).first.wait_for()
        assert rows(tab).count() < 100
        scroller = tab.locator(".vlist")
        for _ in range(200):  # the whole length comes once the outline is built
            if scroller.evaluate("el => el.scrollHeight") > 5000 * 26:
                break
            tab.wait_for_timeout(50)
        scroller.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        tab.locator(".vlist .row.msg .c-seq", has_text="1999").first.wait_for()
        assert rows(tab).count() < 100
        page.close()


# --- the self-contained file ------------------------------------------------------------------


def test_html_file(browser: Any, cassette: Path, tmp_path: Path) -> None:
    """view --html: one file that works from file:// with no network at all."""
    out = tmp_path / "view.html"
    r = run_mcprec("view", str(cassette), "--html", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert 'http-equiv="Content-Security-Policy"' in text
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(?!data:)', text)
    page = Page(browser, (out.as_uri(),))
    tab = page.tab
    tab.goto(out.as_uri())
    tab.locator("tr.session").first.wait_for()
    assert "saved file" in tab.locator("#cassette-name").inner_text()
    tab.locator("tr.session", has_text="v2").locator("td.name a").click()
    rows(tab).filter(has_text="forecast").click()
    tab.locator("aside.detail .tree", has_text="rain, 12 C").wait_for()
    tab.locator("#search-input").fill("tool:counter")
    tab.locator("#search-input").press("Enter")
    tab.locator(".search-status", has_text="6 messages found").wait_for()
    page.close()


def test_diff_html(browser: Any, cassette: Path, tmp_path: Path) -> None:
    """diff --format html: the diff page in one file, an exchange side by side."""
    r = run_mcprec("diff", f"{cassette}:v1", f"{cassette}:v2", "--format", "html")
    assert r.returncode == 1, r.stderr  # different
    out = tmp_path / "diff.html"
    out.write_bytes(r.stdout)
    page = Page(browser, (out.as_uri(),))
    tab = page.tab
    tab.goto(out.as_uri())
    tab.locator(".verdict", has_text="DIFFERENT").wait_for()
    greet = tab.locator("li.exchange", has_text="tools/call greet")
    assert "error appeared" in greet.inner_text()
    greet.locator("button.exchange-head").click()
    greet.locator(".side[data-side=B] .compare-msg", has_text="Answer").wait_for()
    page.close()


def test_verify_html(browser: Any, cassette: Path, tmp_path: Path) -> None:
    """verify --html writes the report's page next to the usual report."""
    out = tmp_path / "verify.html"
    r = run_mcprec("verify", str(cassette), "-s", "v1", "--html", str(out), "--",
                   sys.executable, str(SDK_SERVER), timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert r.stdout.startswith(b"mcprec verify\n")  # the text report, headed as verify
    page = Page(browser, (out.as_uri(),))
    tab = page.tab
    tab.goto(out.as_uri())
    tab.locator(".verdict").wait_for()
    assert tab.locator("table.sides").inner_text().count("v1") >= 2
    page.close()
