"""`mcprec diff` on real recordings (SDK test server v1/v2, server-everything) and on sessions
written with the cassette writer for the cases a real server cannot be made to produce."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from support.helpers import ClientRun, dump, record_scenario, run_mcprec
from mcprec.cassette import open_cassette
from mcprec.record.writer import open_session_writer
from mcprec.cli.diff import diff_command
from mcprec.diff import DiffResult, assert_no_breaking_changes, diff, diff_sessions

C2S, S2C = "client_to_server", "server_to_client"
EVERYTHING_VOLATILE = [
    "$.result.contents[*].text",  # dynamic resources: "... created at 2:31:03 PM"
    "$.result.contents[*].blob",  # the same text, base64
    "$..resource.text",  # those resources embedded in tool results and prompts
]


# --- recordings -------------------------------------------------------------------------------


async def all_pages(call: Any, field: str) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    items: list[Any] = []
    cursor = None
    while True:
        page = await call(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        items += [dump(x) for x in getattr(page, field)]
        cursor = page.next_cursor
        if not cursor:
            return items


async def sdk_scenario(s: Any, run: ClientRun) -> None:
    """Every catalog (all pages), then calls that v2 answers differently and some it does not."""
    r = run.results

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append((progress, total, message))

    r["tools"] = await all_pages(s.list_tools, "tools")
    r["resources"] = await all_pages(s.list_resources, "resources")
    r["templates"] = await all_pages(s.list_resource_templates, "resource_templates")
    r["prompts"] = await all_pages(s.list_prompts, "prompts")
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["echo"] = dump(await s.call_tool("echo", {"text": "héllo"}))
    r["forecast"] = dump(await s.call_tool("forecast", {"city": "Paris"}))
    r["greet"] = dump(await s.call_tool("greet", {"name": "Bo"}))
    r["legacy"] = dump(await s.call_tool("legacy", {}))
    r["counter 1"] = dump(await s.call_tool("counter", {}))
    r["counter 2"] = dump(await s.call_tool("counter", {}))
    r["slow"] = dump(await s.call_tool("slow", {"steps": 3}, progress_callback=on_progress))
    r["ask_model"] = dump(await s.call_tool("ask_model", {"question": "why?"}))
    r["config"] = dump(await s.read_resource("test://static/config"))
    r["note"] = dump(await s.read_resource("test://users/ann/notes/7"))
    r["opener"] = dump(await s.get_prompt("opener", {"name": "Bo"}))
    r["ping"] = dump(await s.send_ping())


async def everything_scenario(s: Any, run: ClientRun) -> None:
    """The same calls every time, including the dynamic (time-stamped) resources."""
    r = run.results

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append((progress, total, message))

    r["tools"] = dump(await s.list_tools())
    r["echo"] = dump(await s.call_tool("echo", {"message": "hi"}))
    r["sum"] = dump(await s.call_tool("get-sum", {"a": 1, "b": 2}))
    r["structured"] = dump(await s.call_tool("get-structured-content", {"location": "Chicago"}))
    r["image"] = dump(await s.call_tool("get-tiny-image", {}))
    r["reference"] = dump(await s.call_tool("get-resource-reference",
                                            {"resourceType": "Text", "resourceId": 2}))
    r["long"] = dump(await s.call_tool("trigger-long-running-operation",
                                       {"duration": 0.3, "steps": 3}, progress_callback=on_progress))
    r["sampling"] = dump(await s.call_tool("trigger-sampling-request",
                                           {"prompt": "why?", "maxTokens": 20}))
    r["resources"] = dump(await s.list_resources())
    r["templates"] = dump(await s.list_resource_templates())
    r["text"] = dump(await s.read_resource("demo://resource/dynamic/text/1"))
    r["blob"] = dump(await s.read_resource("demo://resource/dynamic/blob/1"))
    r["prompts"] = dump(await s.list_prompts())
    r["args"] = dump(await s.get_prompt("args-prompt", {"city": "Paris"}))
    r["resource prompt"] = dump(await s.get_prompt("resource-prompt",
                                                   {"resourceType": "Text", "resourceId": "3"}))
    r["ping"] = dump(await s.send_ping())


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory, sdk_server: list[str]) -> SimpleNamespace:
    """sdk.db: v1, v1-again, v2 (unpaged); v1-paged, v2-paged (pages of 3 items). Recorded one
    after the other so that their latencies are comparable."""
    cas = tmp_path_factory.mktemp("diff") / "sdk.db"
    runs = {}
    for name, variant, page in (("v1", "v1", 0), ("v1-again", "v1", 0), ("v2", "v2", 0),
                                ("v1-paged", "v1", 3), ("v2-paged", "v2", 3)):
        env = {"MCPREC_TEST_SERVER_VARIANT": variant, "MCPREC_TEST_SERVER_PAGE_SIZE": str(page)}
        runs[name] = record_scenario(cas, name, sdk_server, sdk_scenario, env=env)
    return SimpleNamespace(cassette=cas, runs=runs)


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory,
               everything_server: list[str]) -> Path:
    """everything.db: e1 and e2, the same calls to server-everything, one after the other."""
    cas = tmp_path_factory.mktemp("diff") / "everything.db"
    for name in ("e1", "e2"):
        record_scenario(cas, name, everything_server, everything_scenario)
    return cas


@pytest.fixture(scope="module")
def v1_v2(sdk: SimpleNamespace) -> DiffResult:
    return diff(f"{sdk.cassette}:v1", f"{sdk.cassette}:v2", latency_min_ms=40,
                latency_threshold=3)


def run_cli(*args: str | Path) -> Any:
    return CliRunner().invoke(diff_command, [str(a) for a in args], catch_exceptions=False)


def changes(result: DiffResult) -> set[tuple[str, str, str, bool]]:
    return {(c.category, c.name, c.kind, c.breaking) for c in result.summary.changes}


V1_TO_V2 = {
    ("server", "", "server_info_changed", False),  # serverInfo.version 1.0.0 -> 2.0.0
    ("tool", "legacy", "removed", True),
    ("tool", "fresh", "added", False),
    ("tool", "greet", "required_input_added", True),
    ("tool", "add", "description_changed", False),
}


# --- the SDK server: v1 against v2 --------------------------------------------------------------


def test_the_scenario_saw_v2s_changes(sdk: SimpleNamespace) -> None:
    """The recordings really differ where v2 differs (the diff has something to find)."""
    v1, v2 = sdk.runs["v1"].results, sdk.runs["v2"].results
    assert v1["forecast"] != v2["forecast"] and v2["greet"]["isError"] and v2["legacy"]["isError"]
    assert {t["name"] for t in v1["tools"]} ^ {t["name"] for t in v2["tools"]} == {"legacy", "fresh"}


def test_summary_lists_exactly_v2s_changes(v1_v2: DiffResult) -> None:
    """Server version, tool removed/added, required input added, description: nothing else."""
    assert changes(v1_v2) == V1_TO_V2
    version = next(c for c in v1_v2.summary.changes if c.category == "server")
    assert (version.before, version.after) == ("1.0.0", "2.0.0")
    assert not v1_v2.summary.notes


def test_breaking_changes_are_the_removed_tool_and_the_required_input(v1_v2: DiffResult) -> None:
    """Only the removed tool and the new required parameter are breaking."""
    assert sorted(c.describe() for c in v1_v2.breaking) == [
        "tool greet: required input 'greeting' added", "tool legacy: removed"]


def test_exchanges_are_exactly_the_changed_answers(v1_v2: DiffResult) -> None:
    """forecast's result, greet and legacy failing, the config resource; lists summarized."""
    by_label = {e.label: e for e in v1_v2.exchanges}
    assert set(by_label) == {
        "initialize", "tools/list", 'tools/call forecast {"city":"Paris"}',
        'tools/call greet {"name":"Bo"}', "tools/call legacy",
        "resources/read test://static/config",
    }
    assert by_label["initialize"].summarized and by_label["tools/list"].summarized
    assert not by_label["initialize"].differences and not by_label["tools/list"].differences
    forecast = [(d.path, d.before, d.after) for d in by_label['tools/call forecast {"city":"Paris"}'].differences]
    assert forecast == [
        ("$.result.content[0].text", "Paris: sunny, 21 C", "Paris: rain, 12 C"),
        ("$.result.structuredContent.result", "Paris: sunny, 21 C", "Paris: rain, 12 C"),
    ]
    config = by_label["resources/read test://static/config"].differences
    assert [(d.path, d.before, d.after) for d in config] == [
        ("$.result.contents[0].text.variant", "v1", "v2")]  # JSON in a string, compared as JSON
    assert all(e.status == "changed" and not e.notifications and not e.server_requests
               for e in v1_v2.exchanges)
    assert v1_v2.stats.only_a == v1_v2.stats.only_b == 0 and not v1_v2.moved


def test_errors_that_appeared_are_called_out(v1_v2: DiffResult) -> None:
    """greet (missing argument) and legacy (unknown tool) now fail."""
    failed = {e.label: e.error_detail for e in v1_v2.exchanges if e.error == "appeared"}
    assert set(failed) == {'tools/call greet {"name":"Bo"}', "tools/call legacy"}
    assert failed["tools/call legacy"] == 'tool error: "Unknown tool: legacy"'
    assert "Error executing tool greet" in failed['tools/call greet {"name":"Bo"}']


def test_the_slower_tool_is_flagged(v1_v2: DiffResult) -> None:
    """slow waits 5x longer in v2: the only method flagged (3x threshold, 40 ms floor)."""
    assert [r.key for r in v1_v2.latency_regressions] == ["tools/call slow"]
    slow = v1_v2.latency_regressions[0]
    assert slow.ratio is not None and slow.ratio > 3 and slow.p50_b_ms is not None
    assert slow.p50_b_ms >= 300


def test_paged_catalogs_are_compared_whole(sdk: SimpleNamespace) -> None:
    """With pages of 3 items, the summary is the same as without pages."""
    paged = diff(f"{sdk.cassette}:v1-paged", f"{sdk.cassette}:v2-paged")
    assert changes(paged) == V1_TO_V2


def test_paging_alone_changes_no_catalog(sdk: SimpleNamespace) -> None:
    """v1 listed in one page and in pages of 3: same tools, resources, templates, prompts."""
    result = diff(f"{sdk.cassette}:v1", f"{sdk.cassette}:v1-paged")
    assert result.summary.changes == [] and result.stats.only_b > 0


def test_identical_runs_diff_clean(sdk: SimpleNamespace) -> None:
    """Two v1 runs of the same calls are equal, and the CLI exits 0."""
    result = diff(f"{sdk.cassette}:v1", f"{sdk.cassette}:v1-again")
    assert result.equal, result.to_text()
    assert result.stats.same == result.stats.paired == 18  # initialize, 4 lists, 13 calls
    assert result.stats.only_a == result.stats.only_b == 0
    cli = run_cli(f"{sdk.cassette}:v1", f"{sdk.cassette}:v1-again")
    assert cli.exit_code == 0, cli.output
    assert "Result: EQUAL" in cli.stdout


def test_v1_v2_exits_1(sdk: SimpleNamespace) -> None:
    """Different sessions: exit status 1, breaking changes in the text report."""
    cli = run_cli(f"{sdk.cassette}:v1", f"{sdk.cassette}:v2")
    assert cli.exit_code == 1
    assert "BREAKING  legacy: removed" in cli.stdout
    assert "BREAKING  greet: required input 'greeting' added" in cli.stdout
    assert '$.result.content[0].text: "Paris: sunny, 21 C" → "Paris: rain, 12 C"' in cli.stdout


def test_assert_no_breaking_changes(sdk: SimpleNamespace) -> None:
    """The pytest helper passes for equal runs and lists the breaking changes otherwise."""
    assert_no_breaking_changes(f"{sdk.cassette}:v1", f"{sdk.cassette}:v1-again")
    with pytest.raises(AssertionError) as info:
        assert_no_breaking_changes(f"{sdk.cassette}:v1", f"{sdk.cassette}:v2")
    message = str(info.value)
    assert message.startswith("2 breaking change(s) from ")
    assert "  - tool legacy: removed" in message
    assert "  - tool greet: required input 'greeting' added" in message


def test_diff_sessions_takes_session_objects(sdk: SimpleNamespace) -> None:
    """The Python API takes an open cassette and Session objects too."""
    with open_cassette(sdk.cassette) as c:
        result = diff_sessions(c, c.session("v1"), c, "v2")
    assert changes(result) == V1_TO_V2


def test_one_cassette_compares_its_last_two_sessions(sdk: SimpleNamespace) -> None:
    """`mcprec diff CASSETTE` is its last two sessions (v1-paged, v2-paged)."""
    result = diff(str(sdk.cassette))
    assert (result.a.session, result.b.session) == ("v1-paged", "v2-paged")


# --- server-everything ------------------------------------------------------------------------


def _matches(path: str, pattern: str) -> bool:
    regex = re.escape(pattern).replace(r"\[\*\]", r"\[\d+\]").replace(r"\$\.\.", r"\$\..*")
    return re.fullmatch(regex, path) is not None


def test_everything_runs_diff_clean_after_ignoring_its_volatile_fields(everything: Path) -> None:
    """Two runs of server-everything with the same calls are equal once timestamps are ignored."""
    result = diff(str(everything), ignore=EVERYTHING_VOLATILE)
    assert result.equal, result.to_text()
    cli = run_cli(everything, *[a for p in EVERYTHING_VOLATILE for a in ("--ignore", p)])
    assert cli.exit_code == 0, cli.output


def test_everything_differs_only_in_its_volatile_fields(everything: Path) -> None:
    """Without ignores, every reported difference is one of the time-stamped fields."""
    result = diff(str(everything))
    assert result.summary.changes == []
    for e in result.exchanges:
        assert e.status == "changed" and not e.notifications and not e.error, e
        for d in e.differences:
            assert any(_matches(d.path, p) for p in EVERYTHING_VOLATILE), d


# --- sessions written directly ----------------------------------------------------------------


def request(rid: int, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(rid: int, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


Script = list[tuple[str, dict[str, Any], float]]


def handshake(server: str = "syn") -> Script:
    return [
        (C2S, request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}}), 0.0),
        (S2C, result(0, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                         "serverInfo": {"name": server, "version": "1"}}), 1.0),
        (C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 1.5),
    ]


def write(cassette: Path, name: str, script: Script) -> None:
    writer = open_session_writer(cassette, name, transport="stdio", target=["synthetic"])
    for direction, obj, t_ms in script:
        writer.message(direction, orjson.dumps(obj), int(t_ms * 1e6))
    writer.close()


def exchange(rid: int, params: Any, answer: Any, t0: float, *, latency: float = 1.0,
             during: tuple[dict[str, Any], ...] = ()) -> Script:
    """A tools/call sent at t0 ms, answered ``latency`` ms later, ``during`` sent in between."""
    out: Script = [(C2S, request(rid, "tools/call", params), t0)]
    out += [(S2C, m, t0 + latency / 2) for m in during]
    out.append((S2C, answer if "error" in answer else result(rid, answer), t0 + latency))
    return out


def pair(tmp_path: Path, a: Script, b: Script, **options: Any) -> DiffResult:
    cassette = tmp_path / "syn.db"
    write(cassette, "a", a)
    write(cassette, "b", b)
    return diff(f"{cassette}:a", f"{cassette}:b", **options)


def test_repeated_identical_requests_pair_in_order(tmp_path: Path) -> None:
    """The n-th identical request of A meets the n-th of B: swapped answers show as changes."""
    first = exchange(1, call("next"), text("one"), 10) + exchange(2, call("next"), text("two"), 20)
    swapped = exchange(1, call("next"), text("two"), 10) + exchange(2, call("next"), text("one"), 20)
    assert pair(tmp_path / "same", handshake() + first, handshake() + first).equal
    result = pair(tmp_path / "swap", handshake() + first, handshake() + swapped)
    assert [(e.seq_a, e.seq_b, e.differences[0].before, e.differences[0].after)
            for e in result.exchanges] == [(3, 3, "one", "two"), (5, 5, "two", "one")]


def test_requests_on_one_side_only(tmp_path: Path) -> None:
    """A request only A made and one only B made, each reported where it happened."""
    common = exchange(1, call("x"), text("x"), 10)
    a = handshake() + exchange(5, call("old"), text("o"), 5) + common
    b = handshake() + common + exchange(9, call("new"), text("n"), 30)
    result = pair(tmp_path, a, b)
    assert [(e.status, e.label) for e in result.exchanges] == [
        ("only_a", "tools/call old"), ("only_b", "tools/call new")]
    assert (result.stats.paired, result.stats.only_a, result.stats.only_b) == (2, 1, 1)


def test_notifications_that_disappeared(tmp_path: Path) -> None:
    """Log notifications sent while handling a request in A and not in B are reported."""
    log = notification("notifications/message", {"level": "info", "data": "step"})
    a = handshake() + exchange(1, call("work"), text("done"), 10, during=(log, log))
    b = handshake() + exchange(1, call("work"), text("done"), 10)
    (e,) = pair(tmp_path, a, b).exchanges
    assert [(c.method, c.count_a, c.count_b) for c in e.notifications] == [
        ("notifications/message", 2, 0)]


def test_server_request_that_appeared(tmp_path: Path) -> None:
    """A sampling request the server now sends while handling a tool call is reported."""
    sampling = request(77, "sampling/createMessage", {"messages": [], "maxTokens": 5})
    a = handshake() + exchange(1, call("ask"), text("a"), 10)
    b = handshake() + exchange(1, call("ask"), text("a"), 10, during=(sampling,))
    (e,) = pair(tmp_path, a, b).exchanges
    assert [(c.method, c.count_a, c.count_b) for c in e.server_requests] == [
        ("sampling/createMessage", 0, 1)]


def test_notification_payloads_compare_and_ignore(tmp_path: Path) -> None:
    """A changed log line shows with its notification; --ignore '$.params.data' hides it."""
    a = handshake() + exchange(1, call("w"), text("d"), 10, during=(
        notification("notifications/message", {"level": "info", "data": "at 10:00"}),))
    b = handshake() + exchange(1, call("w"), text("d"), 10, during=(
        notification("notifications/message", {"level": "info", "data": "at 10:01"}),))
    (e,) = pair(tmp_path / "1", a, b).exchanges
    assert [(d.where, d.path) for d in e.differences] == [
        ("notifications/message #1", "$.params.data")]
    assert pair(tmp_path / "2", a, b, ignore=["$.params.data"]).equal


def test_progress_tokens_and_ids_do_not_count(tmp_path: Path) -> None:
    """Progress notifications that differ only by token (the request id) are equal."""
    def progress(token: int) -> dict[str, Any]:
        return notification("notifications/progress", {"progressToken": token, "progress": 1})
    a = handshake() + exchange(1, {**call("w"), "_meta": {"progressToken": 1}}, text("d"), 10,
                               during=(progress(1),))
    b = handshake() + exchange(7, {**call("w"), "_meta": {"progressToken": 7}}, text("d"), 10,
                               during=(progress(7),))
    assert pair(tmp_path, a, b).equal


def test_notifications_moved_by_timing_are_not_a_difference(tmp_path: Path) -> None:
    """list_changed sent during a request in A, between requests in B: same count, equal."""
    changed = notification("notifications/tools/list_changed", {})
    a = handshake() + exchange(1, call("x"), text("x"), 10, during=(changed,))
    b = handshake() + [(S2C, changed, 5.0)] + exchange(1, call("x"), text("x"), 10)
    result = pair(tmp_path, a, b)
    assert result.equal
    assert [(c.method, c.count_a) for c in result.moved] == [("notifications/tools/list_changed", 1)]


def test_json_rpc_error_that_appeared(tmp_path: Path) -> None:
    """A result in A that is an error in B is called out with the error."""
    err = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params"}}
    a = handshake() + exchange(1, call("x"), text("x"), 10)
    b = handshake() + exchange(1, call("x"), err, 10)
    (e,) = pair(tmp_path, a, b).exchanges
    assert (e.error, e.error_detail) == ("appeared", 'error -32602: "Invalid params"')


def test_unanswered_request(tmp_path: Path) -> None:
    """A request B never answered (the session ended first) is reported."""
    a = handshake() + exchange(1, call("x"), text("x"), 10)
    b = handshake() + [(C2S, request(1, "tools/call", call("x")), 10.0)]
    (e,) = pair(tmp_path, a, b).exchanges
    assert e.unanswered == "b"


@pytest.mark.parametrize("b_text, equal", [
    ('{"b": 2, "a": 1}', True),  # same JSON, other key order and spacing
    ('{"a":1,"b":3}', False),
])
def test_json_in_strings_compares_structurally(tmp_path: Path, b_text: str, equal: bool) -> None:
    """Text content holding JSON compares as JSON, with paths into it."""
    a = handshake() + exchange(1, call("j"), text('{"a":1,"b":2}'), 10)
    b = handshake() + exchange(1, call("j"), text(b_text), 10)
    result = pair(tmp_path, a, b)
    assert result.equal is equal
    if not equal:
        assert [d.path for d in result.exchanges[0].differences] == ["$.result.content[0].text.b"]
        assert pair(tmp_path / "i", a, b, ignore=["$.result.content[*].text.b"]).equal


def test_ignore_applies_to_requests_when_aligning(tmp_path: Path) -> None:
    """Requests that differ only in an ignored argument are paired."""
    a = handshake() + exchange(1, call("t", ts=1, q="x"), text("x"), 10)
    b = handshake() + exchange(1, call("t", ts=2, q="x"), text("x"), 10)
    assert {e.status for e in pair(tmp_path / "1", a, b).exchanges} == {"only_a", "only_b"}
    assert pair(tmp_path / "2", a, b, ignore=["$.params.arguments.ts"]).equal


def test_different_servers_are_compared_with_a_warning(tmp_path: Path) -> None:
    """serverInfo.name differs: a warning line in the report, and still a diff."""
    x = exchange(1, call("x"), text("x"), 10)
    result = pair(tmp_path, handshake("alpha") + x, handshake("beta") + x)
    assert result.warnings == ["different servers: A is 'alpha', B is 'beta'; compared anyway"]
    assert "warning: different servers" in result.to_text()
    assert [c.message for c in result.summary.changes] == ['serverInfo.name: "alpha" → "beta"']


def test_latency_alone_fails_only_with_fail_on_latency(tmp_path: Path) -> None:
    """A 10x slower method is flagged; exit 0, or 1 with --fail-on-latency."""
    cassette = tmp_path / "lat.db"
    write(cassette, "a", handshake() + exchange(1, call("x"), text("x"), 10, latency=10))
    write(cassette, "b", handshake() + exchange(1, call("x"), text("x"), 10, latency=100))
    result = diff(str(cassette))
    assert result.equal and [r.key for r in result.latency_regressions] == ["tools/call x"]
    assert run_cli(cassette).exit_code == 0
    assert run_cli(cassette, "--fail-on-latency").exit_code == 1
    assert run_cli(cassette, "--fail-on-latency", "--latency-min-ms", "500").exit_code == 0
    assert run_cli(cassette, "--fail-on-latency", "--latency-threshold", "20").exit_code == 0


def test_tiny_latencies_are_not_flagged(tmp_path: Path) -> None:
    """0.5 ms -> 4 ms is 8x but under the 5 ms floor on both sides."""
    cassette = tmp_path / "lat.db"
    write(cassette, "a", handshake() + exchange(1, call("x"), text("x"), 10, latency=0.5))
    write(cassette, "b", handshake() + exchange(1, call("x"), text("x"), 10, latency=4))
    assert diff(str(cassette)).latency_regressions == []


# --- reports ----------------------------------------------------------------------------------


def test_json_report_is_well_formed(sdk: SimpleNamespace) -> None:
    """--format json parses and carries the same findings as the library result."""
    cli = run_cli(f"{sdk.cassette}:v1", f"{sdk.cassette}:v2", "--format", "json")
    data = json.loads(cli.stdout)
    assert data["format"] == "mcprec-diff" and data["equal"] is False and data["breaking"] == 2
    assert {(c["category"], c["name"], c["kind"], c["breaking"])
            for c in data["summary"]["changes"]} == V1_TO_V2
    assert {e["label"] for e in data["exchanges"]} >= {"tools/call legacy"}
    assert data["a"]["session"] == "v1" and data["b"]["session"] == "v2"


def test_markdown_report_is_well_formed(v1_v2: DiffResult) -> None:
    """Headings, tables with a constant number of columns, balanced code spans."""
    md = v1_v2.to_markdown()
    assert md.startswith("## ❌ mcprec diff: ") and "### Summary" in md and "### Latency" in md
    assert "- **BREAKING** tool `legacy`: `removed`" in md
    table: list[int] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            table.append(len(re.findall(r"(?<!\\)\|", line)))
        elif table:
            assert len(set(table)) == 1, table
            table = []
        stripped = re.sub(r"(`+)(.*?)\1", "", line)  # remove complete code spans
        assert "`" not in stripped, line
    assert md.count("<details>") == md.count("</details>") == 1


def test_text_report_colours_only_when_asked(sdk: SimpleNamespace) -> None:
    """No ANSI codes when stdout is not a terminal; --color forces them."""
    args = (f"{sdk.cassette}:v1", f"{sdk.cassette}:v2")
    assert "\x1b[" not in run_cli(*args).stdout
    assert "\x1b[31mBREAKING\x1b[0m" in run_cli(*args, "--color").stdout


# --- configuration ----------------------------------------------------------------------------


@pytest.fixture
def volatile(tmp_path: Path) -> Path:
    """A cassette whose two sessions differ only in a timestamp field of a tool result."""
    cassette = tmp_path / "vol.db"
    for name, ts in (("a", 1), ("b", 2)):
        answer = {"content": [], "structuredContent": {"timestamp": ts, "v": 1}}
        write(cassette, name, handshake() + exchange(1, call("now"), answer, 10))
    return cassette


@pytest.mark.parametrize("file, content", [
    ("mcprec.toml", '[diff]\nignore = ["result.structuredContent.timestamp"]\n'),
    ("pyproject.toml", '[tool.mcprec.diff]\nignore = ["$..timestamp"]\n'),
])
def test_config_file_in_the_working_directory(volatile: Path, tmp_path: Path, file: str,
                                              content: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """./mcprec.toml and [tool.mcprec.diff] in ./pyproject.toml supply ignores."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert run_cli(volatile).exit_code == 1
    (work / file).write_text(content)
    assert run_cli(volatile).exit_code == 0


def test_explicit_config_file(volatile: Path, tmp_path: Path) -> None:
    """--config FILE with a [diff] table: ignores and latency settings."""
    config = tmp_path / "diff.toml"
    config.write_text('[diff]\nignore = ["$.result.structuredContent.timestamp"]\n'
                      "latency-threshold = 3.0\nfail-on-latency = true\n")
    cli = run_cli(volatile, "--config", config)
    assert cli.exit_code == 0, cli.output
    assert "flagged at >= 3x" in cli.stdout


@pytest.mark.parametrize("content, message", [
    ("[diff\n", "is not valid TOML"),
    ('[diff]\nignores = ["x"]\n', "unknown diff setting(s) ignores"),
    ("[diff]\nignore = 3\n", "ignore must be a list"),
    ('[other]\nx = 1\n', "has no [diff]"),
    ('[diff]\nignore = ["a["]\n', "cannot parse JSON path 'a['"),
])
def test_bad_config_exits_2(volatile: Path, tmp_path: Path, content: str, message: str) -> None:
    """A broken config file is a usage error with a one-line message."""
    config = tmp_path / "bad.toml"
    config.write_text(content)
    cli = run_cli(volatile, "--config", config)
    assert cli.exit_code == 2
    assert cli.stderr.startswith("mcprec: ") and message in cli.stderr
    assert cli.stderr.count("\n") == 1


# --- bad input --------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """A cassette with one normal session 'a' and one with no messages, 'empty'."""
    cassette = tmp_path / "small.db"
    write(cassette, "a", handshake() + exchange(1, call("x"), text("x"), 10))
    write(cassette, "empty", [])
    return cassette


@pytest.mark.parametrize("args, message", [
    (["{c}:a", "{c}:nope"], "has no session 'nope'"),
    (["{c}:a", "{c}:empty"], "session 'empty' in {c} is empty; nothing to compare"),
    (["{d}/missing.db", "{c}:a"], "no cassette at {d}/missing.db"),
    (["{c}:a"], "only one session given"),
    (["{d}/one.db"], "holds 1 session(s)"),
    (["{c}:a", "{c}:a", "--ignore", "$.result[x]"], "cannot parse JSON path '$.result[x]'"),
    (["{c}:a", "{c}:a", "--config", "{d}/none.toml"], "config file {d}/none.toml not found"),
    (["{c}:a", "{c}:a", "--latency-threshold", "0"], "latency threshold must be a positive"),
])
def test_bad_input_exits_2_with_one_line(small: Path, tmp_path: Path, args: list[str],
                                        message: str) -> None:
    """Unknown session, empty session, missing cassette...: exit 2, one line `mcprec: ...`."""
    write(tmp_path / "one.db", "only", handshake())
    fill = {"c": small, "d": tmp_path}
    cli = run_cli(*[a.format(**fill) for a in args])
    assert cli.exit_code == 2, cli.output
    assert cli.stderr.startswith("mcprec: ") and cli.stderr.count("\n") == 1, cli.stderr
    assert message.format(**fill) in cli.stderr
    assert cli.stdout == ""


def test_mcprec_diff_through_the_main_cli(sdk: SimpleNamespace, tmp_path: Path) -> None:
    """`python -m mcprec diff`: 0 equal, 1 different, 2 with one line for a missing cassette."""
    assert run_mcprec("diff", f"{sdk.cassette}:v1", f"{sdk.cassette}:v1-again",
                      cwd=tmp_path).returncode == 0
    assert run_mcprec("diff", f"{sdk.cassette}:v1", f"{sdk.cassette}:v2",
                      cwd=tmp_path).returncode == 1
    missing = run_mcprec("diff", str(tmp_path / "missing.db"), cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.decode() == (f"mcprec: no cassette at {tmp_path / 'missing.db'}; record one "
                                       f"with `mcprec record -c {tmp_path / 'missing.db'} -- SERVER...`\n")


def test_help_documents_the_command() -> None:
    """--help explains the arguments, exit codes and every option."""
    out = run_cli("--help").stdout
    for needle in ("CASSETTE[:SESSION]", "Exit status", "--ignore", "--config", "--format",
                   "--latency-threshold", "--latency-min-ms", "--fail-on-latency", "--color"):
        assert needle in out
