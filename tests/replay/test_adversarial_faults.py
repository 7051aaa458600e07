"""Adversarial faults (poison, rug-pull, schema-violation, oversize, empty): on replay over
stdio and HTTP, and on live traffic through `mcprec record` (the stdio tap and the HTTP proxy),
each seen by the official SDK client; the seed repeats; the report says what the client did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from support.helpers import MCPREC, SDK_SERVER, dump, run_mcprec
from support.http_helpers import run_http_session, run_sync, start_proxy, start_replay, start_sdk_http
from support.replay_helpers import SDK, Run, drive, record, replay_cmd

ADD = {"a": 2, "b": 3}


async def agent(s: Any, run: Any) -> None:
    """What a careful agent does: list the tools, call add and echo, list again (re-reading the
    tools when told they changed), call add again. Each failure is noted, never raised."""
    r = run.results

    async def step(name: str, call: Any) -> None:
        try:
            r[name] = dump(await call)
        except MCPError as e:
            r[name] = {"error": e.error.code, "message": e.error.message}
        except Exception as e:  # noqa: BLE001 - what the SDK raised is what the client saw
            r[name] = {"raised": type(e).__name__, "message": str(e)[:300]}

    await step("list 1", s.list_tools())
    await step("add 1", s.call_tool("add", ADD))
    await step("echo", s.call_tool("echo", {"text": "hello"}))
    await step("list 2", s.list_tools())
    await step("add 2", s.call_tool("add", ADD))


def _tool(listing: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in listing["tools"] if t["name"] == name)


def _texts(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []))


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The agent's session with the SDK server, recorded through `mcprec record`."""
    tmp = tmp_path_factory.mktemp("adversarial")
    return record(tmp / "honest.db", "honest", SDK, agent)


def replayed(rec: Any, *rules: str, seed: int = 7, extra: tuple[str, ...] = ()) -> Run:
    args = [*extra, "--seed", str(seed)]
    for r in rules:
        args += ["--fault", r]
    return drive(replay_cmd(rec.cassette, "-s", rec.session, *args), agent)


# --- replay over stdio ------------------------------------------------------------------------


def test_poison_injection_into_a_tool_result(honest: Any) -> None:
    """poison appends an injection text with a canary to the tool's text content."""
    run = replayed(honest, "tools/call:echo poison")
    text = _texts(run.results["echo"])
    assert text.startswith("hello\n\n") and "mcprec-canary-" in text
    assert run.results["add 1"] == honest.live.results["add 1"]


@pytest.mark.parametrize("kind", ["injection", "exfiltration", "cross-tool"])
def test_poison_kinds_into_a_description(honest: Any, kind: str) -> None:
    """poison=KIND on tools/list:NAME changes that tool's description, and only it."""
    run = replayed(honest, f"tools/list:echo poison={kind}")
    before = _tool(honest.live.results["list 1"], "echo")["description"]
    after = _tool(run.results["list 1"], "echo")["description"]
    assert after.startswith(before + "\n\n") and "mcprec-canary-" in after
    assert _tool(run.results["list 1"], "add") == _tool(honest.live.results["list 1"], "add")


def test_the_seed_repeats_the_texts(honest: Any) -> None:
    """The same seed gives the same bytes; another seed other texts."""
    a = replayed(honest, "tools/call poison=exfiltration", seed=3)
    b = replayed(honest, "tools/call poison=exfiltration", seed=3)
    c = replayed(honest, "tools/call poison=exfiltration", seed=4)
    assert a.results == b.results
    assert a.results["echo"] != c.results["echo"]


def test_rug_pull_changes_the_description_after_the_first_list(honest: Any) -> None:
    """rug-pull: the first list is honest, list_changed comes before the next answer, the
    second list has the tool changed."""
    run = replayed(honest, "tools/list:add rug-pull")
    assert run.results["list 1"] == honest.live.results["list 1"]
    changed = [n for n in run.notifications if n.get("method") ==
               "notifications/tools/list_changed"]
    assert len(changed) == 1
    before = _tool(honest.live.results["list 2"], "add")
    after = _tool(run.results["list 2"], "add")
    assert after["description"] != before["description"]
    assert "mcprec-canary-" in after["description"]


def test_rug_pull_of_the_schema(honest: Any) -> None:
    """rug-pull=schema adds a required argument to the tool's input schema."""
    run = replayed(honest, "tools/list:add rug-pull=schema")
    schema = _tool(run.results["list 2"], "add")["inputSchema"]
    added = [k for k in schema["properties"] if k.startswith("mcprec_")]
    assert len(added) == 1 and added[0] in schema["required"]


def test_schema_violation_of_the_output_schema(honest: Any) -> None:
    """schema-violation breaks add's structured content: the SDK client refuses it."""
    run = replayed(honest, "tools/call:add schema-violation nth=1")
    assert "raised" in run.results["add 1"] or "error" in run.results["add 1"], run.results
    assert run.results["add 2"] == honest.live.results["add 2"]


def test_schema_violation_of_the_protocol(honest: Any) -> None:
    """schema-violation=protocol makes content a string: the SDK client cannot read it."""
    run = replayed(honest, "tools/call:echo schema-violation=protocol")
    assert "raised" in run.results["echo"] or "error" in run.results["echo"], run.results


def test_oversize_answer_has_the_size_asked(honest: Any, tmp_path: Path) -> None:
    """oversize=SIZE pads the answer to SIZE bytes; the client gets all of it."""
    run = replayed(honest, "tools/call:echo oversize=2M")
    text = _texts(run.results["echo"])
    assert text.startswith("hello") and 2_000_000 < len(text) < 2 * 1024 * 1024


def test_empty_content_and_empty_result(honest: Any) -> None:
    """empty gives a tool result with no content; empty on tools/list no tools."""
    run = replayed(honest, "tools/call:echo empty", "tools/list empty nth=2")
    assert run.results["echo"].get("content", []) == [], run.results["echo"]
    assert run.results["list 2"]["tools"] == []
    assert run.results["list 1"] == honest.live.results["list 1"]


def test_report_tells_what_the_client_did(honest: Any, tmp_path: Path) -> None:
    """--report: after each fault, the client's next requests, classified."""
    report = tmp_path / "report.json"
    replayed(honest, "tools/call:add empty nth=1", "tools/list rug-pull",
             extra=("--report", str(report)))
    faults = json.loads(report.read_text())["faults"]
    by = {(f["effect"], f.get("notification")): f for f in faults["injected"]}
    assert by[("empty", None)]["client"]["did"] == "moved on"
    assert by[("empty", None)]["client"]["next"][0] == "tools/call:echo"
    assert by[("rug-pull", "notifications/tools/list_changed")]["client"]["did"] in (
        "listed tools again", "moved on")
    assert by[("rug-pull", None)]["client"]["next"] == ["tools/call:add"]


@pytest.mark.parametrize("rule, part", [
    ("tools/call rug-pull", "rug-pull selects tools/list"),
    ("tools/list rug-pull nth=2", "rug-pull takes after=N"),
    ("initialize poison", "poison goes into the answer of"),
    ("tools/call poison=shouting", "use poison or poison="),
    ("tools/call oversize=big", "give a size in bytes"),
    ("tools/call empty=nothing", "use empty or empty="),
])
def test_bad_adversarial_rule_is_a_one_line_usage_error(honest: Any, rule: str,
                                                        part: str) -> None:
    """A bad adversarial rule: exit 2, one line naming what is wrong."""
    r = run_mcprec("replay", str(honest.cassette), "--fault", rule, input=b"")
    assert r.returncode == 2
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcprec: ") and part in lines[0], lines


# --- replay over HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def honest_http(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The agent's session with the SDK HTTP peer, recorded through the proxy."""
    tmp = tmp_path_factory.mktemp("adversarial-http")
    upstream = start_sdk_http()
    cas = tmp / "honest-http.db"
    proxy = start_proxy(upstream.url, cas, session="honest")
    try:
        live = run_sync(lambda: run_http_session(proxy.url, agent))
    finally:
        proxy.stop()
    yield SimpleNamespace(cassette=cas, session="honest", live=live, upstream=upstream)
    upstream.stop()


def http_replayed(rec: Any, *rules: str, seed: int = 7) -> Any:
    args = ["--seed", str(seed)]
    for r in rules:
        args += ["--fault", r]
    proc = start_replay(rec.cassette, rec.session, extra=args)
    try:
        return run_sync(lambda: run_http_session(proc.url, agent))
    finally:
        proc.stop()


def test_http_replay_poison_rug_pull_and_empty(honest_http: Any) -> None:
    """Over HTTP replay: a poisoned result, a rug pull announced before the next answer (an
    SSE stream), an empty result."""
    run = http_replayed(honest_http, "tools/call:echo poison=cross-tool",
                        "tools/list:add rug-pull", "tools/call:add empty nth=2")
    assert "mcprec-canary-" in _texts(run.results["echo"])
    assert [n for n in run.notifications if isinstance(n, dict) and n.get("method") ==
            "notifications/tools/list_changed"]
    assert _tool(run.results["list 2"], "add") != _tool(honest_http.live.results["list 2"],
                                                         "add")
    assert run.results["add 2"].get("content", []) == []
    assert run.results["add 1"] == honest_http.live.results["add 1"]


def test_http_replay_schema_violation_and_oversize(honest_http: Any) -> None:
    """Over HTTP replay: add's structured content broken (the SDK refuses it), an echo answer
    of 1 MB."""
    run = http_replayed(honest_http, "tools/call:add schema-violation nth=1",
                        "tools/call:echo oversize=1MB")
    assert "raised" in run.results["add 1"] or "error" in run.results["add 1"]
    assert 900_000 < len(_texts(run.results["echo"])) < 1_000_000
    assert http_replayed(honest_http, "tools/call:echo poison", seed=5).results == \
        http_replayed(honest_http, "tools/call:echo poison", seed=5).results


# --- live traffic through `mcprec record` ------------------------------------------------------


def _injected(cassette: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(cassette) as db:
        return db.execute("SELECT s.name, f.seq, f.rule, f.effect, f.request_id, f.detail, "
                          "m.raw FROM injected_faults f JOIN sessions s ON s.id = f.session_id "
                          "JOIN messages m ON m.session_id = f.session_id AND m.seq = f.seq "
                          "ORDER BY f.seq").fetchall()


def test_record_stdio_rewrites_and_marks_the_faults(tmp_path: Path) -> None:
    """record --fault over stdio: the client gets the poisoned and rug-pulled answers, the
    cassette records them as received and marks each; the seed repeats."""
    rules = ["--fault", "tools/call:echo poison", "--fault", "tools/list:add rug-pull",
             "--seed", "11"]
    runs = []
    for i in (1, 2):
        cas = tmp_path / f"live{i}.db"
        argv = [*MCPREC, "record", "-c", str(cas), "-s", "live", *rules, "--", *SDK]
        runs.append((cas, drive(argv, agent)))
    (cas, run), (_, again) = runs
    assert run.results == again.results
    echo = _texts(run.results["echo"])
    assert echo.startswith("hello\n\n") and "mcprec-canary-" in echo
    assert "mcprec-canary-" in _tool(run.results["list 2"], "add")["description"]
    marks = _injected(cas)
    assert [(m[3], json.loads(m[5])["what"]) for m in marks] == [
        ("rug-pull", "notification"), ("poison", "answer"), ("rug-pull", "answer")]
    assert json.loads(marks[0][6])["method"] == "notifications/tools/list_changed"
    recorded = json.loads(marks[1][6])
    assert recorded["result"]["content"][0]["text"] == echo
    from mcprec.cassette import Cassette
    from mcprec.cassette.injected import injected_faults

    with Cassette.open(cas) as c:
        listed = injected_faults(c, c.session("live"))
    assert [(f["seq"], f["effect"], f["detail"]["what"]) for f in listed] == [
        (m[1], m[3], json.loads(m[5])["what"]) for m in marks]


def test_record_stdio_report_and_other_effects(tmp_path: Path) -> None:
    """record --fault: schema-violation, empty and error on live answers; --report says what
    the client did after each."""
    cas, report = tmp_path / "live.db", tmp_path / "report.json"
    argv = [*MCPREC, "record", "-c", str(cas), "-s", "live", "--report", str(report),
            "--fault", "tools/call:add schema-violation nth=1", "--fault",
            "tools/call:echo empty", "--fault", "tools/list error=-32000:busy nth=2",
            "--", *SDK]
    run = drive(argv, agent)
    assert "raised" in run.results["add 1"] or "error" in run.results["add 1"]
    assert run.results["echo"].get("content", []) == []
    assert run.results["list 2"] == {"error": -32000, "message": "busy"}
    assert run.results["add 2"]["structuredContent"] == {"result": 5}
    injected = json.loads(report.read_text())["faults"]["injected"]
    assert [(f["effect"], f["client"]["did"]) for f in injected] == [
        ("schema-violation", "moved on"), ("empty", "listed tools again"),
        ("error", "moved on")]
    assert "3 faults injected" in run.stderr


def test_record_http_rewrites_and_marks_the_faults(tmp_path: Path) -> None:
    """record --target --fault: through the proxy, the client gets poison, a rug pull with its
    notification and an oversize answer; the cassette marks each."""
    upstream = start_sdk_http()
    cas = tmp_path / "live-http.db"
    proxy = start_proxy(upstream.url, cas, session="live", extra=[
        "--fault", "tools/call:echo poison=exfiltration", "--fault", "tools/list:add rug-pull",
        "--fault", "tools/call:add oversize=300KB nth=2", "--seed", "3"])
    try:
        run = run_sync(lambda: run_http_session(proxy.url, agent))
    finally:
        proxy.stop()
        upstream.stop()
    assert "mcprec-canary-" in _texts(run.results["echo"])
    assert [n for n in run.notifications if isinstance(n, dict) and n.get("method") ==
            "notifications/tools/list_changed"]
    assert "mcprec-canary-" in _tool(run.results["list 2"], "add")["description"]
    assert 250_000 < len(_texts(run.results["add 2"])) < 300_000
    marks = _injected(cas)
    assert [m[3] for m in marks] == ["rug-pull", "poison", "rug-pull", "oversize"]
    assert len(marks[3][6]) == 300_000


def test_record_refuses_replay_only_effects(tmp_path: Path) -> None:
    """record --fault with delay or disconnect: exit 2, one line, nothing recorded."""
    cas = tmp_path / "x.db"
    r = run_mcprec("record", "-c", str(cas), "--fault", "tools/call delay=1s", "--", *SDK,
                   input=b"")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "delay is for replay" in lines[0], lines
