"""The timeline read like a network panel, in headless Chromium at 900, 1100 and 1400 px: the
method column never collapses, every row has a status, cancelled and unanswered requests are
badged with open-ended bars and linked both ways to their cancel, the filter works in place,
columns resize and hide, search finds stderr, the waterfall never clips a bar.

Screenshots go to $MCPREC_VIEW_SCREENSHOTS when it is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.view_helpers import CHROMIUM, CHROMIUM_ARGS, base_of, running_view

SHOTS = os.environ.get("MCPREC_VIEW_SCREENSHOTS")
WIDTHS = (900, 1100, 1400)

# a session written with the cassette writer in a process of its own: initialize dominates the
# session, a long tool name, an error, an isError result, a cancelled request and its cancel, a
# request never answered, stderr, and a last answer at the session's very end
WRITE = r'''
import sys, orjson
from mcprec.record.writer import open_session_writer
w = open_session_writer(sys.argv[1], "panel", transport="stdio", target=["panel-server"])
c2s, s2c = "client_to_server", "server_to_client"
def send(d, obj, t):
    w.message(d, orjson.dumps(obj), t)
ms = 1_000_000
send(c2s, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
     "capabilities": {}, "clientInfo": {"name": "panel-client", "version": "1"}}}, 0)
w.stderr_line(b"server: warming the cache (slow start)", 5 * ms)
send(s2c, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
     "serverInfo": {"name": "panel-server", "version": "2.0"}}}, 2000 * ms)
send(c2s, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 2001 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_weather_forecast_for_city",
     "arguments": {"city": "Paris", "days": 5, "units": "metric"}}}, 2010 * ms)
send(s2c, {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "sunny"}]}}, 2013 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "broken", "arguments": {}}}, 2020 * ms)
send(s2c, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "unknown tool: broken"}}, 2021 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "flaky", "arguments": {}}}, 2030 * ms)
send(s2c, {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "upstream down"}], "isError": True}}, 2032 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "slow_report", "arguments": {}}}, 2040 * ms)
w.stderr_line(b"server: report job 17 started", 2041 * ms)
send(c2s, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4, "reason": "user pressed stop"}}, 2500 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "file:///never/answered.txt"}}, 2600 * ms)
send(c2s, {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "get_weather_forecast_for_city",
     "arguments": {"city": "Oslo"}}}, 2990 * ms)
send(s2c, {"jsonrpc": "2.0", "id": 6, "result": {"content": [{"type": "text", "text": "snow"}]}}, 3000 * ms)
w.close(exit_code=0)
'''


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("view-panel") / "panel.db"
    subprocess.run([sys.executable, "-c", WRITE, str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def base(cassette: Path) -> Iterator[str]:
    with running_view(cassette) as url:
        yield base_of(url)


@pytest.fixture(scope="module")
def browser(base: str) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test.sh (it installs Debian's chromium) "
                    "or `apt-get install chromium`", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def until(tab: Any, js: str, arg: Any = None, timeout: float = 10.0) -> None:
    """Wait until the function ``js`` (given ``arg``) is true in the page (polled with
    evaluate: the page's CSP forbids the eval that wait_for_function uses)."""
    import time

    end = time.monotonic() + timeout
    while not tab.evaluate(js, arg):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {js} ({arg!r})")
        tab.wait_for_timeout(50)


class Tab:
    """A tab of the given width that fails the test on a script or console error."""

    def __init__(self, browser: Any, width: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 760})
        self.tab = self.context.new_page()
        self.tab.set_default_timeout(15_000)
        self.width = width
        self.problems: list[str] = []
        self.tab.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        self.tab.on("console", lambda m: self.problems.append(f"console: {m.text}")
                    if m.type == "error" else None)

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.tab.screenshot(path=str(Path(SHOTS) / f"timeline-{name}-{self.width}.png"))

    def close(self) -> None:
        self.context.close()
        assert not self.problems, self.problems


def open_panel(browser: Any, base: str, width: int) -> Tab:
    t = Tab(browser, width)
    t.tab.goto(base)
    t.tab.locator("tr.session td.name a").first.click()
    t.tab.locator(".vlist .row.msg").first.wait_for()
    return t


# the method text each row must show whole, at least up to the tool's name
WANT = ["initialize", "notifications/initialized", "tools/call get_weather_forecast_for_city",
        "tools/call broken", "tools/call flaky", "tools/call slow_report",
        "notifications/cancelled", "resources/read", "tools/call get_weather_forecast_for_city"]


def visible_text(tab: Any, cell: Any) -> str:
    """The part of a cell's text not cut off: the text of its children up to the cell's edge."""
    return str(cell.evaluate("""(cell) => {
      const box = cell.getBoundingClientRect();
      const edge = Math.min(box.right, cell.closest(".vlist").getBoundingClientRect().right);
      const range = document.createRange();
      let out = "";
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        for (let i = 0; i < n.length; i++) {
          range.setStart(n, i); range.setEnd(n, i + 1);
          const r = range.getBoundingClientRect();
          if (r.width && r.right <= edge + 0.5) out += n.data[i];
          else if (r.width) return out;
        }
      }
      return out;
    }"""))


@pytest.mark.parametrize("width", WIDTHS)
def test_method_visible_status_everywhere(browser: Any, base: str, width: int) -> None:
    """At each width, with nothing selected and with a message selected: every row's method
    (and tool name) in sight, a status cell for every message row, no bar clipped."""
    t = open_panel(browser, base, width)
    tab = t.tab
    rows = tab.locator(".vlist .row.msg")
    assert tab.locator(".vlist .row.stderr .c-method").first.inner_text().startswith("server: warming")
    assert rows.count() == len(WANT)
    assert tab.locator("aside.detail").is_hidden()  # no message selected: no pane
    t.shot("closed")
    for selected in (False, True):
        if selected:
            rows.nth(3).click()
            tab.locator("aside.detail h2").wait_for()
            t.shot("open")
        for i, want in enumerate(WANT):
            cell = rows.nth(i).locator(".c-method")
            seen = visible_text(tab, cell).replace("▸", "").strip()
            seen = " ".join(seen.split())
            assert seen.startswith(want), (width, selected, i, seen)
        statuses = rows.locator(".c-status").all_inner_texts()
        assert statuses == ["ok", "", "ok", "-32602", "isError", "cancelled", "cancels #9",
                            "no answer", "ok"], statuses
        # every bar ends inside its column
        clipped = tab.evaluate("""() => [...document.querySelectorAll('.vlist .row .c-fall')].filter((c) => {
          const b = c.querySelector('.bar'); if (!b) return false;
          const cr = c.getBoundingClientRect(), br = b.getBoundingClientRect();
          return br.left < cr.left - 0.5 || br.right > cr.right + 0.5 || br.width < 1.5; }).length""")
        assert clipped == 0
    t.close()


def test_cancel_linked_both_ways(browser: Any, base: str) -> None:
    """The cancelled request is badged with an open-ended bar; its badge goes to the cancel,
    and the cancel's goes back to the request; the unanswered request has an open bar too."""
    t = open_panel(browser, base, 1400)
    tab = t.tab
    cancelled = tab.locator(".vlist .row.msg", has_text="slow_report")
    assert "is-cancelled" in (cancelled.get_attribute("class") or "")
    assert cancelled.locator(".bar.open").count() == 1
    assert cancelled.locator(".c-lat").inner_text() == "—"
    never = tab.locator(".vlist .row.msg", has_text="resources/read")
    assert never.locator(".bar.open").count() == 1
    cancelled.locator("button.st").click()
    tab.locator("aside.detail h2", has_text="notifications/cancelled").wait_for()
    assert "cancels request #9" in tab.locator("aside.detail .links").inner_text()
    assert tab.locator(".vlist .row.selected .c-method").inner_text().startswith("notifications/cancelled")
    tab.locator(".vlist .row.selected button.st").click()
    tab.locator("aside.detail h2", has_text="tools/call slow_report").wait_for()
    assert "cancelled by #" in tab.locator("aside.detail .links").inner_text()
    t.shot("cancel")
    tab.locator("aside.detail button.close").click()
    assert tab.locator("aside.detail").is_hidden()
    t.close()


def test_filter_in_place(browser: Any, base: str) -> None:
    """The filter keeps the timeline: by status, tool, method and words (stderr too)."""
    t = open_panel(browser, base, 1100)
    tab = t.tab
    f = tab.locator("input.tl-filter")
    rows = tab.locator(".vlist .row.msg, .vlist .row.stderr")

    def shown(text: str, count: int) -> list[str]:
        f.fill(text)
        until(tab, "(t) => document.querySelector('.list-pane').dataset.filter === t", text)
        until(tab, "(n) => document.querySelectorAll('.vlist .row.msg, .vlist .row.stderr').length === n", count)
        return [" ".join(x.split()) for x in rows.locator(".c-method").all_inner_texts()]

    assert len(shown("status:error", 2)) == 2
    assert shown("status:cancelled", 1)[0].startswith("tools/call slow_report")
    assert shown('status:"no answer"', 1)[0].startswith("resources/read")
    assert len(shown("tool:get_weather_forecast_for_city", 2)) == 2
    assert shown("method:notifications/*", 2)[0] == "notifications/initialized"
    assert shown("snow", 1)[0].startswith("tools/call get_weather")  # in the answer's text
    assert shown("job 17", 1) == ["server: report job 17 started"]  # a stderr line
    t.shot("filtered")
    f.fill("")
    until(tab, "() => document.querySelectorAll('.vlist .row.msg').length === 9")
    t.close()


def test_columns_resize_and_hide(browser: Any, base: str) -> None:
    """Dragging the method header's edge widens it; the Columns menu hides the id column;
    the layout is kept across a reload."""
    t = open_panel(browser, base, 1100)
    tab = t.tab
    head = tab.locator(".row.columns .c-method")
    before = head.bounding_box()["width"]
    grip = head.locator(".grip").bounding_box()
    tab.mouse.move(grip["x"] + 3, grip["y"] + 10)
    tab.mouse.down()
    tab.mouse.move(grip["x"] + 3 + 220, grip["y"] + 10, steps=5)
    tab.mouse.up()
    after = head.bounding_box()["width"]
    assert after > before + 100
    row = tab.locator(".vlist .row.msg").first.locator(".c-method").bounding_box()["width"]
    assert abs(row - after) < 2
    tab.locator(".columns-menu summary").click()
    tab.locator(".columns-menu input[data-col=id]").uncheck()
    assert tab.locator(".vlist .row.msg .c-id").first.is_hidden()
    t.shot("columns")
    tab.reload()
    tab.locator(".vlist .row.msg").first.wait_for()
    assert tab.locator(".vlist .row.msg .c-id").first.is_hidden()
    assert tab.locator(".row.columns .c-method").bounding_box()["width"] > before + 100
    tab.locator(".columns-menu summary").click()
    tab.locator(".columns-menu button", has_text="reset").click()
    assert tab.locator(".vlist .row.msg .c-id").first.is_visible()
    t.close()


def test_log_scale_and_search_stderr(browser: Any, base: str) -> None:
    """The log scale spreads the bars initialize squeezes; the search page finds stderr
    lines and opens the timeline filtered on them."""
    t = open_panel(browser, base, 1400)
    tab = t.tab
    bar = tab.locator(".vlist .row.msg", has_text="flaky").locator(".bar")
    linear = bar.bounding_box()
    assert linear["width"] < 3  # a sliver next to initialize's 2 s
    tab.locator("select.scale-mode").select_option("log")
    tab.wait_for_timeout(150)
    log = bar.bounding_box()
    assert log["width"] > linear["width"] * 10
    t.shot("log")
    # zoom: drag across 1.8 s to 2.25 s of the header, then across 2.025 s to 2.04 s of that
    tab.locator("select.scale-mode").select_option("session")
    head = tab.locator(".row.columns .scale").bounding_box()
    y = head["y"] + head["height"] / 2
    for a, b in ((0.6, 0.75), (0.5, 0.5333)):
        tab.mouse.move(head["x"] + head["width"] * a, y)
        tab.mouse.down()
        tab.mouse.move(head["x"] + head["width"] * b, y, steps=4)
        tab.mouse.up()
        tab.wait_for_timeout(150)
    zoomed = bar.bounding_box()
    assert zoomed["width"] > linear["width"] * 10
    assert "2.025 s" in tab.locator(".row.columns .scale").inner_text()
    t.shot("zoomed")
    tab.locator(".row.columns .scale").dblclick()
    tab.wait_for_timeout(150)
    assert bar.bounding_box()["width"] < 3
    tab.locator("#search-input").fill("warming")
    tab.locator("#search-input").press("Enter")
    hit = tab.locator("li.hit.stderr-hit")
    hit.wait_for()
    assert "warming the cache" in hit.inner_text()
    hit.locator("a").click()
    until(tab, "() => document.querySelectorAll('.vlist .row.stderr').length === 1 && "
               "document.querySelectorAll('.vlist .row.msg').length === 0")
    assert tab.locator("input.tl-filter").input_value() == "warming"
    t.close()


# --- the same, through the JSON API and from a file ---------------------------------------------


def test_api_status_cancel_and_filter(base: str) -> None:
    """Entries carry their status (and code), cancel and cancels; the filter answers indices."""
    import httpx

    with httpx.Client(base_url=base, timeout=10) as api:
        entries = api.get("/api/sessions/1/timeline", params={"count": 50}).json()["entries"]
        msgs = {e["seq"]: e for e in entries if e["type"] == "message"}
        assert [msgs[s]["status"] for s in (0, 2, 3, 5, 7, 9, 10, 11, 12)] == [
            "ok", "", "ok", "error", "isError", "cancelled", "", "no answer", "ok"]
        assert msgs[5]["code"] == -32602
        assert msgs[9]["cancel"] == 10 and msgs[10]["cancels"] == 9
        assert msgs[3]["tool"] == "get_weather_forecast_for_city"
        assert api.get("/api/sessions/1/messages/9").json()["cancel"] == 10
        f = api.get("/api/sessions/1/filter", params={"q": "status:-32602"}).json()
        assert [entries[i]["seq"] for i in f["indices"]] == [5] and f["total"] == len(entries)
        f = api.get("/api/sessions/1/filter", params={"q": "kind:stderr"}).json()
        assert [entries[i]["type"] for i in f["indices"]] == ["stderr", "stderr"]
        hits = api.get("/api/search", params={"q": "job 17"}).json()["hits"]
        assert [(h["type"], h["snippet"]) for h in hits] == [("stderr", "server: report job 17 started")]


def test_file_filters_too(browser: Any, cassette: Path, tmp_path: Path) -> None:
    """view --html: the same status column and filter, from file:// with no server."""
    from support.helpers import run_mcprec

    out = tmp_path / "panel.html"
    r = run_mcprec("view", str(cassette), "--html", str(out))
    assert r.returncode == 0, r.stderr
    t = Tab(browser, 1100)
    tab = t.tab
    tab.goto(out.as_uri())
    tab.locator("tr.session td.name a").first.click()
    tab.locator(".vlist .row.msg").first.wait_for()
    assert tab.locator(".vlist .row.msg .c-status").all_inner_texts()[5] == "cancelled"
    tab.locator("input.tl-filter").fill("status:cancelled")
    until(tab, "() => document.querySelector('.list-pane').dataset.filter === 'status:cancelled'")
    assert [x.split()[1] for x in tab.locator(".vlist .row.msg .c-method").all_inner_texts()] == ["slow_report"]
    tab.locator("input.tl-filter").fill("snow")
    until(tab, "() => document.querySelector('.list-pane').dataset.filter === 'snow'")
    assert tab.locator(".vlist .row.msg").count() == 1
    tab.locator("#search-input").fill("warming")
    tab.locator("#search-input").press("Enter")
    tab.locator("li.hit.stderr-hit").wait_for()
    t.close()
