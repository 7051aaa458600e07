"""The JSON API of `mcprec view` (docs/view.md), over real recordings of the SDK server, with
httpx against the running command."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from support.helpers import run_mcprec
from support.replay_helpers import one_line_error
from support.view_helpers import BIG, SECRET, base_of, gallery, recordings, running_view

from mcprec.cassette import open_cassette
from mcprec.view.page import SCRIPTS


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sessions v1 and v2 of the SDK server, recorded through `mcprec record`."""
    return recordings(tmp_path_factory.mktemp("view-api"))


@pytest.fixture(scope="module")
def digest(cassette: Path) -> str:
    """The cassette's bytes before the view opened it."""
    return hashlib.sha256(cassette.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def url(cassette: Path, digest: str) -> Iterator[str]:
    with running_view(cassette) as printed:
        yield printed


@pytest.fixture(scope="module")
def api(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_of(url), timeout=30) as client:
        yield client


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    r = api.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def sid(api: httpx.Client, name: str) -> int:
    return next(s["id"] for s in get(api, "/api/sessions")["sessions"] if s["name"] == name)


def timeline(api: httpx.Client, session: int) -> list[dict[str, Any]]:
    """Every entry of a session's timeline, seven at a time."""
    entries: list[dict[str, Any]] = []
    while True:
        page = get(api, f"/api/sessions/{session}/timeline", start=len(entries), count=7)
        entries += page["entries"]
        if not page["entries"] or (page["total"] is not None and len(entries) >= page["total"]):
            return entries


def find(entries: list[dict[str, Any]], method: str, label: str = "") -> dict[str, Any]:
    return next(e for e in entries if e.get("method") == method and e["label"].startswith(label))


# --- serving ----------------------------------------------------------------------------------


def test_url_on_stdout(url: str) -> None:
    """The URL goes to stdout: loopback, the port chosen, the page's start."""
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9]\d*/#/", url)


def test_page_and_its_files(api: httpx.Client) -> None:
    """The page and its own scripts and style are served with a strict CSP; nothing else."""
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe" not in csp and "http" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    assert scripts == [f"static/{name}" for name in SCRIPTS]
    for path in [*scripts, "static/view.css"]:
        r = api.get("/" + path)
        assert r.status_code == 200 and r.headers["content-security-policy"] == csp
        assert "//" not in re.sub(r"//[^\n]*|/\*.*?\*/", "", r.text, flags=re.S).replace(
            "://", ""), f"{path} names another origin"
    assert api.get("/static/../data.py").status_code == 404
    assert api.get("/static/nothing.js").status_code == 404


@pytest.mark.parametrize(("headers", "status"), [
    ({"host": "evil.example"}, 421),
    ({"origin": "http://evil.example"}, 403),
    ({"sec-fetch-site": "cross-site"}, 403),
])
def test_other_sites_refused(api: httpx.Client, headers: dict[str, str], status: int) -> None:
    """Host, Origin and fetch metadata are checked like every mcprec listener's."""
    r = api.get("/api/sessions", headers=headers)
    assert r.status_code == status
    assert "error" in r.json()


def test_own_origin_accepted(api: httpx.Client, url: str) -> None:
    """The page's own origin, as a browser sends it, is let through."""
    origin = base_of(url).rstrip("/")
    r = api.get("/api/sessions", headers={"origin": origin, "sec-fetch-site": "same-origin"})
    assert r.status_code == 200


def test_read_only(api: httpx.Client) -> None:
    """Anything but GET is refused."""
    for method in ("POST", "PUT", "DELETE"):
        assert api.request(method, "/api/sessions").status_code == 405


# --- sessions ---------------------------------------------------------------------------------


def test_sessions(api: httpx.Client, cassette: Path) -> None:
    """Every session with its server, protocol, messages and duration, as the cassette says."""
    found = {s["name"]: s for s in get(api, "/api/sessions")["sessions"]}
    with open_cassette(cassette) as c:
        for s in c.sessions():
            v = found[s.name]
            assert (v["messages"], v["duration_ns"], v["status"]) == (
                s.message_count, s.duration_ns, "complete")
            assert v["server"] == {"name": "mcprec-test-server", "version": s.server_info["version"]}
            assert v["protocol_version"] == s.protocol_version and v["transport"] == "stdio"
            assert v["secrets"] == []
    assert set(found) == {"v1", "v2"}


def test_session_not_found(api: httpx.Client) -> None:
    r = api.get("/api/sessions/999")
    assert r.status_code == 404 and "999" in r.json()["error"]


# --- the timeline -----------------------------------------------------------------------------


def test_timeline_groups_by_request(api: httpx.Client, cassette: Path) -> None:
    """Requests carry their answer and latency; answers and what the server sent while
    handling a request are not entries of their own; stderr lines are."""
    v1 = sid(api, "v1")
    entries = timeline(api, v1)
    messages = [e for e in entries if e["type"] == "message"]
    with open_cassette(cassette) as c:
        rows = list(c.messages("v1"))
    inside = {m.seq for m in rows if m.direction == "server_to_client" and m.context_seq is not None}
    answers = {m.seq for m in rows if m.kind in ("response", "error") and m.reply_to is not None}
    assert {e["seq"] for e in messages} == {m.seq for m in rows} - inside - answers
    assert {e["answer"]["seq"] for e in messages if "answer" in e} <= answers
    assert [e["seq"] for e in messages] == sorted(e["seq"] for e in messages)
    assert all(e["kind"] != "response" for e in messages)
    for e in messages:
        if e["kind"] == "request":
            assert e["answer"]["latency_ns"] > 0 and not e["answer"]["failure"]
    assert any(e["type"] == "stderr" and "starting" in e["line"] for e in entries)
    slow = find(messages, "tools/call", "slow")
    assert slow["children"] == 8 and slow["answer"]["latency_ns"] > 4 * 150e6


def test_timeline_head_first(cassette: Path) -> None:
    """A session's first page comes from its head at once, before its outline is built (in a
    thread of its own); the head is the outline's beginning."""
    from mcprec.cassette import Cassette
    from mcprec.redact import Redactor
    from mcprec.view.data import ViewData

    data = ViewData(Cassette.open(cassette, read_only=True), Redactor(),
                    reopen=lambda: Cassette.open(cassette, read_only=True))
    try:
        head = data.timeline(1, 0, 5)
        assert head["total"] is None and head["known"] >= 5 and len(head["entries"]) == 5
        data._building[1].result(timeout=30)
        whole = data.timeline(1, 0, 500)
        assert whole["total"] == data.session(1)["entries"] == len(whole["entries"])
        assert whole["entries"][:5] == head["entries"]
    finally:
        data.close()
        data.cassette.close()


def test_timeline_page_is_bounded(api: httpx.Client) -> None:
    """However many entries are asked for, one answer holds at most 500."""
    page = get(api, f"/api/sessions/{sid(api, 'v1')}/timeline", start=0, count=100_000)
    assert len(page["entries"]) == min(500, page["total"])
    assert api.get(f"/api/sessions/{sid(api, 'v1')}/timeline", params={"start": -1}).status_code == 400


def test_during(api: httpx.Client) -> None:
    """Inside a request: its progress and log notifications, and a sampling request with the
    client's answer."""
    v1 = sid(api, "v1")
    entries = timeline(api, v1)
    slow = find(entries, "tools/call", "slow")
    inside = get(api, f"/api/sessions/{v1}/messages/{slow['seq']}/during")
    assert inside["total"] == 8
    assert [e["method"] for e in inside["entries"]] == [
        "notifications/progress", "notifications/message"] * 4
    assert inside["entries"][0]["label"] == "1/4 step 1 of 4"
    ask = find(entries, "tools/call", "ask_model")
    sampling = get(api, f"/api/sessions/{v1}/messages/{ask['seq']}/during")["entries"]
    assert [(e["dir"], e["kind"], e["method"]) for e in sampling] == [
        ("s2c", "request", "sampling/createMessage")]
    assert sampling[0]["answer"]["latency_ns"] > 0


def test_message(api: httpx.Client, cassette: Path) -> None:
    """A message's text exactly as recorded, its links, and its answer's seq."""
    v1 = sid(api, "v1")
    add = find(timeline(api, v1), "tools/call", "add")
    m = get(api, f"/api/sessions/{v1}/messages/{add['seq']}")
    with open_cassette(cassette) as c:
        s = c.session("v1")
        raw = c.message(s, add["seq"]).raw
        answer = c.answer(s, add["seq"])
    assert m["text"].encode() == raw and m["complete"] and m["utf8"]
    assert m["answer_seq"] == answer.seq and m["label"] == 'add {"a":2,"b":3}'
    a = get(api, f"/api/sessions/{v1}/messages/{answer.seq}")
    assert a["reply_to"] == add["seq"] and a["kind"] == "response" and a["secrets"] == []
    download = api.get(f"/api/sessions/{v1}/messages/{answer.seq}/raw")
    assert download.content == answer.raw
    assert "attachment" in download.headers["content-disposition"]
    assert api.get(f"/api/sessions/{v1}/messages/99999").status_code == 404


def test_locate(api: httpx.Client) -> None:
    """A message inside a request is found at its request's entry."""
    v1 = sid(api, "v1")
    entries = timeline(api, v1)
    slow = find(entries, "tools/call", "slow")
    progress = get(api, f"/api/sessions/{v1}/messages/{slow['seq']}/during")["entries"][2]
    where = get(api, f"/api/sessions/{v1}/locate", seq=progress["seq"])
    assert where["index"] == entries.index(slow)
    assert where["chain"] == [progress["seq"], slow["seq"]]
    answer = get(api, f"/api/sessions/{v1}/locate", seq=slow["answer"]["seq"])
    assert answer["index"] == entries.index(slow)


# --- search -----------------------------------------------------------------------------------


def test_search_text(api: httpx.Client, cassette: Path) -> None:
    """Text anywhere in a message, any case, across every session, in order."""
    found = get(api, "/api/search", q="COUNTER", limit=200)
    with open_cassette(cassette) as c:
        want = [(s.name, m.seq) for s in c.sessions() for m in c.messages(s)
                if b"counter" in m.raw.lower()]
    assert [(h["session_name"], h["seq"]) for h in found["hits"]] == want
    assert found["next"] is None
    assert all("counter" in h["snippet"].lower() for h in found["hits"])


def test_search_pages(api: httpx.Client) -> None:
    """A search goes on from the cursor of its last answer, to the same hits."""
    whole = [(h["session"], h["seq"]) for h in get(api, "/api/search", q="tools", limit=200)["hits"]]
    paged: list[tuple[int, int]] = []
    cursor = None
    while True:
        page = get(api, "/api/search", q="tools", limit=3, **({"cursor": cursor} if cursor else {}))
        assert len(page["hits"]) <= 3
        paged += [(h["session"], h["seq"]) for h in page["hits"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert paged == whole and len(whole) > 3


@pytest.mark.parametrize(("query", "check"), [
    ("method:tools/call kind:request", lambda h: h["method"] == "tools/call" and h["kind"] == "request"),
    ("tool:counter", lambda h: h["method"] == "tools/call" and h["kind"] == "request"),
    ("method:notifications/* dir:s2c", lambda h: h["method"].startswith("notifications/")
     and h["dir"] == "s2c"),
    ("session:v2 forecast", lambda h: h["session_name"] == "v2"),
    ('"rain, 12 C"', lambda h: h["session_name"] == "v2"),
])
def test_search_fields(api: httpx.Client, query: str, check: Any) -> None:
    """Fields narrow a search: method (a prefix with *), tool, kind, dir, session."""
    hits = get(api, "/api/search", q=query, limit=200)["hits"]
    assert hits and all(check(h) for h in hits)


def test_search_tool_count(api: httpx.Client) -> None:
    """tool:NAME finds the calls of that tool: three counter calls in each session."""
    hits = get(api, "/api/search", q="tool:counter", limit=200)["hits"]
    assert sorted(h["session_name"] for h in hits) == ["v1"] * 3 + ["v2"] * 3


def test_search_bad_cursor(api: httpx.Client) -> None:
    assert api.get("/api/search", params={"q": "x", "cursor": "nope"}).status_code == 400


# --- diff -------------------------------------------------------------------------------------


def test_diff(api: httpx.Client) -> None:
    """The diff's JSON, as `mcprec diff --format json` gives it, with the sessions' ids."""
    a, b = sid(api, "v1"), sid(api, "v2")
    d = get(api, "/api/diff", a=a, b=b)
    assert d["format"] == "mcprec-diff" and d["session_ids"] == {"a": a, "b": b}
    changes = {(c["name"], c["kind"], c["breaking"]) for c in d["summary"]["changes"]}
    assert ("legacy", "removed", True) in changes and ("fresh", "added", False) in changes
    forecast = next(e for e in d["exchanges"] if e["label"].startswith("tools/call forecast"))
    assert [x["path"] for x in forecast["differences"]][0].startswith("$.result.")
    greet = next(e for e in d["exchanges"] if e["label"].startswith("tools/call greet"))
    assert greet["error"] == "appeared"
    assert any(r["key"] == "tools/call slow" and r["flagged"] for r in d["latency"]["rows"])
    assert api.get("/api/diff", params={"a": a}).status_code == 400


# --- the cassette is only read ----------------------------------------------------------------


def test_cassette_untouched(api: httpx.Client, cassette: Path, digest: str) -> None:
    """After serving every kind of answer, the cassette's bytes are what they were."""
    v1 = sid(api, "v1")
    timeline(api, v1)
    get(api, "/api/search", q="x")
    get(api, "/api/diff", a=v1, b=sid(api, "v2"))
    assert hashlib.sha256(cassette.read_bytes()).hexdigest() == digest


def test_query_only(cassette: Path) -> None:
    """The view's connection cannot write."""
    from mcprec.cassette import Cassette
    from mcprec.errors import CassetteError

    with Cassette.open(cassette, read_only=True) as c:
        with pytest.raises(Exception, match="readonly"):
            c.connection.execute("CREATE TABLE x (a)")
    with pytest.raises(CassetteError, match="no cassette"):
        Cassette.open(cassette.with_name("missing.db"), read_only=True)


# --- secrets, media and exact numbers ---------------------------------------------------------


@pytest.fixture(scope="module")
def gallery_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    path = gallery(tmp_path_factory.mktemp("view-gallery") / "gallery.db")
    with running_view(path, "gallery") as printed:
        assert printed.endswith("#/s/1")
        with httpx.Client(base_url=base_of(printed), timeout=30) as client:
            yield client


def test_secrets_marked(gallery_api: httpx.Client) -> None:
    """What scan would flag is marked: in a message, a stderr line; a snippet is withheld."""
    whoami = get(gallery_api, "/api/sessions/1/messages/6")
    assert whoami["secrets"] == ["GitHub token"]
    line = next(e for e in get(gallery_api, "/api/sessions/1/timeline")["entries"]
                if e["type"] == "stderr")
    assert line["secrets"] == ["GitHub token"]
    hits = get(gallery_api, "/api/search", q="token")["hits"]
    assert hits and all(h["snippet"] is None and h["secrets"] for h in hits)
    assert SECRET not in orjson.dumps(get(gallery_api, "/api/search", q="token")).decode()


def test_rows_say_no_secret(gallery_api: httpx.Client) -> None:
    """A row of the timeline never quotes a secret: no label, a failure without its words."""
    page = get(gallery_api, "/api/sessions/1/timeline")
    whoami = next(e for e in page["entries"] if e.get("label") == "whoami")
    assert whoami["answer"]["secrets"] == ["GitHub token"]
    login = page["entries"][-1]
    assert login["label"] == "" and "GitHub token" in login["secrets"]
    assert login["answer"]["failure"] == "error -32000"
    assert SECRET not in orjson.dumps(page).decode().replace(
        next(e["line"] for e in page["entries"] if e["type"] == "stderr"), "")


def test_diff_says_no_secret(tmp_path: Path) -> None:
    """In a diff for a file, labels, errors and values that look like secrets are left out."""
    from mcprec.cassette import Cassette
    from mcprec.redact import Redactor
    from mcprec.view.data import ViewData

    with Cassette.open(gallery(tmp_path / "g.db"), read_only=True) as c:
        data = ViewData(c, Redactor(), withhold=True)
        d: dict[str, Any] = {"summary": {"changes": []}, "exchanges": [{
            "method": "tools/call", "label": f"tools/call login {SECRET}",
            "error_detail": f"error -1: {SECRET}",
            "differences": [{"path": "$.result", "before": SECRET, "after": "x"}]}]}
        data.guard_diff(d)
    assert SECRET not in orjson.dumps(d).decode()
    assert d["exchanges"][0]["differences"][0]["withheld"]


def test_exact_text(gallery_api: httpx.Client) -> None:
    """An integer past 64 bits and base64 media come as recorded."""
    big = get(gallery_api, "/api/sessions/1/messages/8")
    assert str(BIG) in big["text"]
    picture = get(gallery_api, "/api/sessions/1/messages/4")
    assert '"type":"image"' in picture["text"] and '"mimeType":"audio/wav"' in picture["text"]


def test_failures_marked(gallery_api: httpx.Client) -> None:
    """An error answer and a transport failure the recorder noted are marked in the timeline."""
    entries = get(gallery_api, "/api/sessions/1/timeline")["entries"]
    broken = next(e for e in entries if e.get("label") == "broken")
    assert broken["answer"]["failure"] == "error -32603: \"it broke\""
    assert any(e.get("transport_failure", "").startswith("upstream dropped") for e in entries)


# --- the command ------------------------------------------------------------------------------


def test_missing_cassette(tmp_path: Path) -> None:
    r = run_mcprec("view", str(tmp_path / "nope.db"), "--no-open")
    assert r.returncode == 1
    assert "no cassette at" in one_line_error(r.stderr)


def test_missing_session(cassette: Path) -> None:
    r = run_mcprec("view", str(cassette), "nope", "--no-open")
    assert r.returncode == 1
    assert "has no session 'nope'" in one_line_error(r.stderr)


def test_opens_on_session_and_diff(cassette: Path) -> None:
    """SESSION and --diff A B choose the page the URL opens."""
    with running_view(cassette, "v2") as printed:
        assert re.search(r"#/s/\d+$", printed)
    with running_view(cassette, "--diff", "v1", "v2") as printed:
        assert re.search(r"#/diff\?a=\d+&b=\d+$", printed)
