"""mcprec lint: real peers lint clean (or with their documented spec violations), and a
misbehaving server (tests/peers/offender.py), recorded with `mcprec record`, breaks each rule
once and lint names it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import MCPREC, PEERS, REPO, recorded, run_client, run_mcprec
from support.line_client import LineClient, reap_line_clients  # noqa: F401
from mcprec.record.writer import open_session_writer
from mcprec.lint import RULES, LintOptions, lint
from support.replay_helpers import one_line_error

OFFENDER = [sys.executable, str(PEERS / "offender.py")]
V = "2025-11-25"
C2S, S2C = "client_to_server", "server_to_client"
NO_CONFIG = LintOptions(use_config=False)


def codes_of(findings: list[Any]) -> set[str]:
    return {f.code for f in findings}


def code(name: str) -> str:
    """The code of the bundled rule called ``name``."""
    return next(c for c, r in RULES.items() if r.name == name)


# --- a scripted client for the offender ---------------------------------------------------------


def req(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def note(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def initialize(rid: Any = 0) -> dict[str, Any]:
    return req(rid, "initialize", {"protocolVersion": V, "capabilities": {},
                                   "clientInfo": {"name": "lint-test", "version": "1"}})


def ask(c: LineClient, msg: dict[str, Any]) -> dict[str, Any]:
    """Send a request and read up to its answer; the server's own requests get -32601."""
    c.send(msg)
    while True:
        line = c.recv_raw()
        assert line is not None, f"no answer to {msg}"
        try:
            got = json.loads(line)
        except ValueError:
            continue  # the offender's line of garbage
        if not isinstance(got, dict):
            continue
        if "method" in got and "id" in got:
            c.send({"jsonrpc": "2.0", "id": got["id"],
                    "error": {"code": -32601, "message": "Method not found"}})
        elif "method" not in got and got.get("id") == msg["id"]:
            return got


def hello(c: LineClient) -> None:
    ask(c, initialize())
    c.send(note("notifications/initialized"))


def add(rid: Any, args: Any = None, token: Any = None, name: str = "add") -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"a": 1, "b": 2} if args is None else args}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return req(rid, "tools/call", params)


def listed(c: LineClient) -> None:
    hello(c)
    ask(c, req(1, "tools/list"))


def then_ping(c: LineClient, rid: Any = 99) -> None:
    ask(c, req(rid, "ping"))


def only_hello(c: LineClient) -> None:
    hello(c)
    then_ping(c)


def call_add(c: LineClient, **kwargs: Any) -> None:
    listed(c)
    ask(c, add(2, **kwargs))
    then_ping(c)


def batch(c: LineClient) -> None:
    hello(c)
    c.send([req(1, "ping"), req(2, "ping")])  # type: ignore[arg-type]
    c.recv()


def ping_first(c: LineClient) -> None:
    ask(c, req(0, "ping"))
    ask(c, initialize(1))
    c.send(note("notifications/initialized"))


def list_too_early(c: LineClient) -> None:
    ask(c, initialize())
    ask(c, req(1, "tools/list"))
    c.send(note("notifications/initialized"))
    then_ping(c)


def initialize_twice(c: LineClient) -> None:
    hello(c)
    ask(c, initialize(1))


def initialized_twice(c: LineClient) -> None:
    hello(c)
    c.send(note("notifications/initialized"))
    then_ping(c)


def null_id(c: LineClient) -> None:
    hello(c)
    ask(c, req(None, "ping"))


def same_id_twice(c: LineClient) -> None:
    hello(c)
    c.send(req(1, "ping"), req(1, "ping"))
    c.recv()
    then_ping(c)


def reuse_id(c: LineClient) -> None:
    hello(c)
    ask(c, req(0, "ping"))


def answered_twice(c: LineClient) -> None:
    hello(c)
    c.send(req(1, "ping"))
    c.recv()
    c.recv()


def one_ignored(c: LineClient) -> None:
    hello(c)
    c.send(req(5, "ping"))
    ask(c, req(6, "ping"))


def prompts_list(c: LineClient) -> None:
    hello(c)
    ask(c, req(1, "prompts/list"))


def cancel_stranger(c: LineClient) -> None:
    hello(c)
    c.send(note("notifications/cancelled", {"requestId": 77}))
    then_ping(c)


def cancel_initialize(c: LineClient) -> None:
    c.send(initialize(), note("notifications/cancelled", {"requestId": 0}))
    c.recv()
    c.send(note("notifications/initialized"))
    then_ping(c)


def cancel_then_progress(c: LineClient) -> None:
    listed(c)
    c.send(add(2, token="p2"))
    c.recv()  # progress 1
    c.send(note("notifications/cancelled", {"requestId": 2, "reason": "enough"}))
    c.recv()  # progress 2 and 3, after the cancellation
    c.recv()
    then_ping(c)


def custom_method(c: LineClient) -> None:
    hello(c)
    ask(c, req(1, "x-custom/hello"))


def bad_request(c: LineClient) -> None:
    hello(c)
    ask(c, req(1, "tools/call", {"name": 5}))


def sampler(c: LineClient) -> None:
    """A client that can sample, but not with tools."""
    ask(c, req(0, "initialize", {"protocolVersion": V, "capabilities": {"sampling": {}},
                                 "clientInfo": {"name": "lint-test", "version": "1"}}))
    c.send(note("notifications/initialized"))
    then_ping(c)


def task_call(c: LineClient) -> None:
    listed(c)
    ask(c, req(2, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2},
                                 "task": {"ttl": 60000}}))
    then_ping(c)


# rule name (its scenario in offender.py) -> the client that goes with it
CLIENTS: dict[str, Callable[[LineClient], None]] = {
    "clean": lambda c: call_add(c, token="p2"),
    "request-schema": bad_request,
    "result-schema": listed,
    "notification-schema": only_hello,
    "error-schema": lambda c: (hello(c), then_ping(c, 1)),  # type: ignore[func-returns-value]
    "unknown-method": custom_method,
    "not-json-rpc": only_hello,
    "batch": batch,
    "initialize-first": ping_first,
    "before-initialized": list_too_early,
    "negotiated-version": only_hello,
    "initialize-repeated": initialize_twice,
    "initialized-order": initialized_twice,
    "id-type": null_id,
    "id-in-flight": same_id_twice,
    "id-reused": reuse_id,
    "answer-unknown-id": only_hello,
    "answered-twice": answered_twice,
    "unanswered": one_ignored,
    "notification-capability": only_hello,
    "unsubscribed-update": only_hello,
    "client-capability": only_hello,
    "server-capability": prompts_list,
    "sampling-tools": sampler,
    "task-capability": task_call,
    "base64-data": call_add,
    "progress-unknown-token": only_hello,
    "progress-after-answer": lambda c: call_add(c, token="p2"),
    "progress-not-increasing": lambda c: call_add(c, token="p2"),
    "cancel-unknown-request": cancel_stranger,
    "cancel-initialize": cancel_initialize,
    "progress-after-cancel": cancel_then_progress,
    "tool-arguments": lambda c: call_add(c, args={"a": "one"}),
    "structured-content": call_add,
    "structured-content-missing": call_add,
    "error-result-shape": call_add,
    "unlisted-tool": lambda c: call_add(c, name="subtract"),
    "tool-schema": listed,
    "injection-phrasing": listed,
    "instruction-shaped-result": call_add,
    "invisible-characters": listed,
    "duplicate-name": listed,
    "lookalike-name": listed,
    "secret": call_add,
    "changed-since-baseline": listed,
}


def record_offence(cassette: Path, scenario: str, client: Callable[[LineClient], None]) -> None:
    c = LineClient([*MCPREC, "record", "-c", str(cassette), "-s", scenario, "--",
                    *OFFENDER, scenario], cwd=cassette.parent)
    try:
        client(c)
    finally:
        code_, err = c.close()
    assert code_ == 0, err


@pytest.fixture(scope="module")
def offences(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One cassette per scenario of tests/peers/offender.py, each recorded with mcprec record."""
    tmp = tmp_path_factory.mktemp("offences")
    paths = {name: tmp / f"{name}.db" for name in CLIENTS}
    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(record_offence, paths[n], n, CLIENTS[n]) for n in CLIENTS]:
            f.result()
    return paths


def lint_one(path: Path, **options: Any) -> list[Any]:
    return lint([path], options=LintOptions(use_config=False, **options)).findings


def test_every_rule_is_documented() -> None:
    """docs/lint.md has a table row for each rule: its code, name and severity."""
    text = (REPO / "docs" / "lint.md").read_text(encoding="utf-8")
    for c, r in RULES.items():
        assert f"| `{c}` | {r.name} | {r.severity} |" in text, c


def test_every_rule_has_an_offence() -> None:
    """Each bundled rule has its scenario in offender.py and a client here."""
    assert {r.name for r in RULES.values()} == set(CLIENTS) - {"clean"}


def test_the_clean_offender_is_clean(offences: dict[str, Path]) -> None:
    """The offender's clean scenario (tools, a call with progress, ping) has no finding."""
    assert lint_one(offences["clean"]) == []


@pytest.mark.parametrize("name", sorted(set(CLIENTS) - {"clean", "changed-since-baseline"}))
def test_each_offence_is_named(offences: dict[str, Path], name: str) -> None:
    """A session breaking one rule gets findings of that rule alone."""
    findings = lint_one(offences[name], select=["all"] if name != "unlisted-tool" else ())
    assert codes_of(findings) == {code(name)}, [(f.code, f.message) for f in findings]
    for f in findings:
        assert f.rule == name and f.path.startswith("$") and f.session == name


def test_changed_description_against_a_baseline(offences: dict[str, Path]) -> None:
    """--baseline: a tool whose description changed since the baseline recording is named."""
    alone = lint_one(offences["changed-since-baseline"])
    assert alone == []
    findings = lint_one(offences["changed-since-baseline"],
                        baseline=str(offences["clean"]))
    assert codes_of(findings) == {"SEC007"}
    assert findings[0].path == "$.result.tools[0].description"
    assert "Add two integers." in findings[0].message


def test_several_offences_in_one_session(tmp_path: Path) -> None:
    """A server breaking several rules at once gets each of them named."""
    scenarios = ["structured-content", "notification-capability", "progress-unknown-token",
                 "duplicate-name", "answer-unknown-id"]
    cassette = tmp_path / "many.db"
    record_offence(cassette, ",".join(scenarios), call_add)
    findings = lint_one(cassette)
    assert codes_of(findings) == {code(n) for n in scenarios}


# --- what each finding says ----------------------------------------------------------------------


def test_finding_names_message_rule_and_path(offences: dict[str, Path]) -> None:
    """A finding carries seq, direction, method, id, code, severity and a JSON path."""
    [f] = lint_one(offences["structured-content"])
    assert (f.direction, f.method, f.id, f.code, f.severity) == (S2C, "tools/call", "2",
                                                                 "TOOL002", "error")
    assert f.path == "$.result.structuredContent.sum"
    assert f.seq > 0 and "not of type integer" in f.message


def test_arguments_path_points_into_the_request(offences: dict[str, Path]) -> None:
    """TOOL001 points at the argument that breaks the inputSchema."""
    paths = {f.path for f in lint_one(offences["tool-arguments"])}
    assert paths == {"$.params.arguments.a", "$.params.arguments"}


# --- real peers ----------------------------------------------------------------------------------

SDK_LOG_WITHOUT_CAPABILITY = ("CAP001", "notifications/message")
"""mcp 2.3.0's MCPServer sends log messages (ctx.info) without advertising the logging
capability: a real violation of the spec ("Servers that emit log message notifications MUST
declare the logging capability"), written down in docs/lint.md."""


def test_sdk_server_lints_clean_but_for_its_log_messages(sdk_recordings: Any) -> None:
    """The SDK server's main recording: no finding but the documented logging one."""
    rec = sdk_recordings.main
    findings = lint([rec.cassette], session=rec.session, options=NO_CONFIG).findings
    assert findings, "the SDK server no longer logs without the capability: update the docs"
    assert {(f.code, f.method) for f in findings} == {SDK_LOG_WITHOUT_CAPABILITY}


def test_sdk_client_errors_are_the_scenarios_own(sdk_recordings: Any) -> None:
    """The second SDK recording: a cancelled call lints clean; its deliberate logging/setLevel
    to a server without logging and its call of an unknown tool are named."""
    rec = sdk_recordings.extra
    findings = lint([rec.cassette], session=rec.session, options=NO_CONFIG).findings
    assert {(f.code, f.method) for f in findings} == {
        SDK_LOG_WITHOUT_CAPABILITY, ("CAP004", "logging/setLevel"), ("TOOL005", "tools/call")}


async def everything_scenario(s: Any, run: Any) -> None:
    """List and call server-everything's tools, prompts and resources."""
    import anyio

    await s.list_tools()
    await s.call_tool("echo", {"message": "hello"})
    await s.call_tool("get-sum", {"a": 2, "b": 3})
    await s.call_tool("get-structured-content", {"location": "Chicago"})
    await s.list_resources()
    await s.list_resource_templates()
    await s.list_prompts()
    await s.send_ping()
    with anyio.fail_after(10):  # its roots round trip
        while not any("Roots" in str(log.get("data")) for log in run.logs):
            await anyio.sleep(0.02)


@pytest.fixture(scope="module")
def everything_recording(tmp_path_factory: pytest.TempPathFactory,
                         everything_server: list[str]) -> Path:
    cassette = tmp_path_factory.mktemp("everything") / "everything.db"
    run_client(recorded(cassette, *everything_server, extra=["-s", "everything"]),
               everything_scenario, roots=["file:///tmp/project"])
    return cassette


def test_server_everything_lints_clean(everything_recording: Path) -> None:
    """@modelcontextprotocol/server-everything, listed and called, has no finding."""
    from mcprec.cassette import open_cassette

    with open_cassette(everything_recording) as c:
        methods = {m.method for m in c.messages(c.session())}
    assert {"roots/list", "notifications/tools/list_changed", "notifications/message",
            "tools/call", "prompts/list"} <= methods  # what the rules had to look at
    findings = lint([everything_recording], options=NO_CONFIG).findings
    assert [(f.code, f.method, f.message) for f in findings] == []


async def cancel_long_operation(s: Any, run: Any) -> None:
    """Start server-everything's long-running operation with progress, cancel it after the
    first steps, then wait past its end."""
    import anyio

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append(progress)

    with anyio.move_on_after(0.7):
        await s.call_tool("trigger-long-running-operation", {"duration": 2, "steps": 8},
                          progress_callback=on_progress)
    await anyio.sleep(2)
    await s.send_ping()


def test_server_everything_works_on_after_a_cancellation(tmp_path: Path,
                                                         everything_server: list[str]) -> None:
    """server-everything's long-running operation goes on reporting progress after the client
    cancelled it: a real (SHOULD-level) violation, named PRG006, written down in docs/lint.md."""
    cassette = tmp_path / "cancelled.db"
    run_client(recorded(cassette, *everything_server, extra=["-s", "cancelled"]),
               cancel_long_operation)
    findings = lint([cassette], options=NO_CONFIG).findings
    assert {(f.code, f.method) for f in findings} == {("PRG006", "notifications/progress")}
    assert "went on after its cancellation" in findings[0].message


# --- the command line ----------------------------------------------------------------------------


def test_exit_codes(offences: dict[str, Path], tmp_path: Path) -> None:
    """Exit 0 clean, 1 with findings, 2 for a missing cassette; errors are one line."""
    assert run_mcprec("lint", str(offences["clean"]), cwd=tmp_path).returncode == 0
    done = run_mcprec("lint", str(offences["batch"]), cwd=tmp_path)
    assert done.returncode == 1 and b"SCH007" in done.stdout
    missing = run_mcprec("lint", str(tmp_path / "nope.db"), cwd=tmp_path)
    assert missing.returncode == 2
    assert "nope.db not found" in one_line_error(missing.stderr)


@pytest.mark.parametrize("args,message", [
    (["--select", "NOPE"], "no such rule"),
    (["-s", "x", "--all"], "not both"),
    (["--severity", "SCH001=fatal"], "RULE=LEVEL"),
    (["--fail-on", "worst"], "worst"),
    (["--patterns", "missing.toml"], "not found"),
])
def test_usage_errors_are_one_line(offences: dict[str, Path], tmp_path: Path, args: list[str],
                                   message: str) -> None:
    """Bad options exit 2 with one line and no traceback."""
    done = run_mcprec("lint", str(offences["clean"]), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in one_line_error(done.stderr)


def test_info_findings_pass_unless_fail_on_info(offences: dict[str, Path], tmp_path: Path) -> None:
    """TOOL005 is info: shown, exit 0; --fail-on info makes it fail."""
    path = str(offences["unlisted-tool"])
    shown = run_mcprec("lint", path, cwd=tmp_path)
    assert shown.returncode == 0 and b"TOOL005" in shown.stdout
    assert run_mcprec("lint", path, "--fail-on", "info", cwd=tmp_path).returncode == 1


def test_skip_and_severity_from_the_command_line(offences: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """--skip drops a rule; --severity lowers one below --fail-on."""
    path = str(offences["secret"])
    assert run_mcprec("lint", path, cwd=tmp_path).returncode == 1
    assert run_mcprec("lint", path, "--skip", "security", cwd=tmp_path).returncode == 0
    assert run_mcprec("lint", path, "--severity", "SEC006=info", cwd=tmp_path).returncode == 0


def test_config_selects_and_packs_extend(offences: dict[str, Path], tmp_path: Path) -> None:
    """[lint] in mcprec.toml skips rules and loads a user pattern pack, whose code is named."""
    (tmp_path / "acme.toml").write_text(
        '[pack]\nname = "acme"\n\n[[pattern]]\ncode = "ACME001"\nname = "adds"\n'
        'regex = "\\\\bintegers\\\\b"\nmessage = "talks about integers"\nseverity = "error"\n',
        encoding="utf-8")
    (tmp_path / "mcprec.toml").write_text(
        '[lint]\nskip = ["TOOL003"]\npatterns = ["acme.toml"]\n', encoding="utf-8")
    done = run_mcprec("lint", str(offences["structured-content-missing"]), "--format", "json",
                      cwd=tmp_path)
    report = json.loads(done.stdout)
    assert {f["code"] for f in report["findings"]} == {"ACME001"}
    assert report["findings"][0]["path"] == "$.result.tools[0].description"


def test_unknown_config_key_is_a_usage_error(offences: dict[str, Path], tmp_path: Path) -> None:
    """A typo in [lint] is exit 2, not a silently ignored setting."""
    (tmp_path / "mcprec.toml").write_text('[lint]\nselct = ["SCH"]\n', encoding="utf-8")
    done = run_mcprec("lint", str(offences["clean"]), cwd=tmp_path)
    assert done.returncode == 2 and "selct" in one_line_error(done.stderr)


def test_github_annotations(offences: dict[str, Path], tmp_path: Path) -> None:
    """--format github writes one ::error workflow command per finding, on the cassette."""
    done = run_mcprec("lint", str(offences["structured-content"]), "--format", "github",
                      cwd=tmp_path)
    first = done.stdout.decode().splitlines()[0]
    assert first.startswith("::error file=") and "title=TOOL002 structured-content::" in first


def test_sarif_has_the_required_structure(offences: dict[str, Path], tmp_path: Path) -> None:
    """--format sarif writes a SARIF 2.1.0 log: version, runs, tool.driver with rules, and
    results with ruleId, level, message and a location in the cassette."""
    out = tmp_path / "lint.sarif"
    done = run_mcprec("lint", str(offences["injection-phrasing"]), "--format", "sarif",
                      "-o", str(out), cwd=tmp_path)
    assert done.returncode == 1
    log = json.loads(out.read_text())
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mcprec" and driver["rules"]
    assert all({"id", "shortDescription"} <= set(r) for r in driver["rules"])
    assert run["results"]
    for r in run["results"]:
        assert r["ruleId"] == "SEC001" and r["level"] == "error" and r["message"]["text"]
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]
        assert loc["physicalLocation"]["artifactLocation"]["uri"].endswith("injection-phrasing.db")
        assert loc["logicalLocations"][0]["name"].startswith("$.result.tools[0]")


def test_markdown_report(offences: dict[str, Path], tmp_path: Path) -> None:
    """--format markdown: a verdict line and a table row per finding."""
    done = run_mcprec("lint", str(offences["duplicate-name"]), "--format", "markdown",
                      cwd=tmp_path)
    text = done.stdout.decode()
    assert text.startswith("### mcprec lint: 1 finding(s)")
    assert "| warning | `SEC004` duplicate-name |" in text


def test_all_sessions(tmp_path: Path) -> None:
    """--all lints every session of a cassette; the default is the latest only."""
    cassette = tmp_path / "two.db"
    record_offence(cassette, "batch", batch)
    record_offence(cassette, "clean", CLIENTS["clean"])
    assert run_mcprec("lint", str(cassette), cwd=tmp_path).returncode == 0
    done = run_mcprec("lint", str(cassette), "--all", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert [s["session"] for s in report["sessions"]] == ["batch", "clean"]


# --- cases written directly into a cassette ------------------------------------------------------


def write_session(path: Path, messages: list[tuple[str, Any]], name: str = "s") -> None:
    w = open_session_writer(path, name, transport="stdio", target=["x"])
    for i, (direction, obj) in enumerate(messages):
        raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        w.message(direction, raw, (i + 1) * 1000)
    w.close()


def handshake(version: str = V, server_caps: Any = None) -> list[tuple[str, Any]]:
    return [(C2S, initialize()),
            (S2C, {"jsonrpc": "2.0", "id": 0, "result": {
                "protocolVersion": version, "capabilities": server_caps or {"tools": {}},
                "serverInfo": {"name": "s", "version": "1"}}}),
            (C2S, note("notifications/initialized"))]


def test_known_secret_formats_come_from_the_redaction_engine(tmp_path: Path) -> None:
    """SEC006 names what redact.Redactor.scan names (here a GitHub token) at its path."""
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"
    path = tmp_path / "secret.db"
    write_session(path, [*handshake(), (C2S, req(1, "tools/call", {"name": "t", "arguments": {
        "note": f"use {token}"}})), (S2C, {"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "ok"}]}})])
    [f] = lint_one(path, select=["SEC006"])
    assert f.path == "$.params.arguments.note" and "GitHub token" in f.message
    assert token not in f.message


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_revision_validates_against_its_own_schema(tmp_path: Path, version: str) -> None:
    """A 2025-06-18 feature (structuredContent... here an elicitation request) is unknown to
    the revisions before it and valid from it on."""
    path = tmp_path / "v.db"
    caps = {"elicitation": {}}
    msgs = handshake(version)
    msgs[0] = (C2S, req(0, "initialize", {"protocolVersion": version, "capabilities": caps,
                                          "clientInfo": {"name": "c", "version": "1"}}))
    msgs += [(S2C, req("e1", "elicitation/create", {"message": "Name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}}})),
             (C2S, {"jsonrpc": "2.0", "id": "e1", "result": {"action": "decline"}})]
    found = codes_of(lint_one(path_with(path, msgs)))
    assert found == (set() if version >= "2025-06-18" else {"SCH005"})


def path_with(path: Path, messages: list[tuple[str, Any]]) -> Path:
    write_session(path, messages)
    return path


def test_stateless_session_is_checked_per_request(tmp_path: Path) -> None:
    """A 2026-07-28 session (no initialize) is validated per request's own version: a request
    without the _meta envelope is named, an enveloped one is not; no lifecycle finding."""
    env = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}}
    msgs = [(C2S, req(1, "tools/list", {"_meta": env})),
            (S2C, {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "tools": [],
                                                   "ttlMs": 0, "cacheScope": "private"}}),
            (C2S, req(2, "tools/list", {})),
            (S2C, {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "tools": [],
                                                   "ttlMs": 0, "cacheScope": "private"}})]
    path = tmp_path / "modern.db"
    write_session(path, msgs)
    from mcprec.cassette import open_cassette

    with open_cassette(path, read_only=False) as c:
        c.update_session(c.session("s"), protocol_version="2026-07-28")
    findings = lint_one(path)
    assert {(f.code, f.seq) for f in findings} == {("SCH001", 2)}


def test_invisible_characters_spare_emoji(tmp_path: Path) -> None:
    """A zero-width joiner inside an emoji sequence is not hidden text."""
    from mcprec.lint.patterns import invisible

    assert invisible("family: \U0001f468\u200d\U0001f469\u200d\U0001f467") == []
    assert invisible("a\u200db") == ["U+200D ZERO WIDTH JOINER"]


def test_lookalike_skeleton() -> None:
    """A Cyrillic letter inside a Latin name is folded to the Latin one it looks like."""
    from mcprec.lint.patterns import scripts, skeleton

    assert skeleton("\u0430dd") == "add" and scripts("\u0430dd") == ["CYRILLIC", "LATIN"]


def test_entropy_heuristic_spares_identifiers() -> None:
    """Keys look random; identifiers, hex digests and base64 of words do not."""
    from mcprec.lint.patterns import looks_random

    assert looks_random("xK9mQ2vL7pR4tN8wZ3bY6cH1jF5dG0sA")
    for text in ("get_weather_forecast_2024", "0123456789abcdef0123456789abcdef",
                 "longRunningOperation12345", "dGVzdCBzdHJpbmcgaGVsbG8gd29ybGQ="):
        assert not looks_random(text), text


def test_bench_runs_quickly(tmp_path: Path) -> None:
    """bench/bench_lint.py builds and lints a small session, clean."""
    import subprocess

    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_lint.py"), "--messages",
                           "2000", "--rounds", "1", "--keep", str(tmp_path)],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert b"0 finding(s)" in done.stdout


def test_http_recording_of_the_sdk_server(tmp_path: Path) -> None:
    """A Streamable HTTP session recorded through the proxy lints like a stdio one: the SDK
    server's log messages without the logging capability, nothing else."""
    from support.http_helpers import run_http_session, run_sync, sdk_scenario, start_proxy, \
        start_sdk_http

    cassette = tmp_path / "http.db"
    upstream = start_sdk_http()
    try:
        proxy = start_proxy(upstream.url, cassette, session="http")
        try:
            run_sync(lambda: run_http_session(proxy.url, sdk_scenario))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    result = lint([cassette], options=NO_CONFIG)
    assert result.sessions[0].messages >= 10
    assert {(f.code, f.method) for f in result.findings} == {SDK_LOG_WITHOUT_CAPABILITY}


@pytest.mark.parametrize("mode,transport", [("streamableHttp", "streamable"), ("sse", "sse")])
def test_http_recording_of_server_everything(tmp_path: Path, everything_server: list[str],
                                             mode: str, transport: str) -> None:
    """server-everything over Streamable HTTP and the legacy HTTP+SSE, recorded through the
    proxy: clean."""
    from support.http_helpers import run_http_session, run_sync, start_everything, start_proxy

    async def scenario(s: Any, run: Any) -> None:
        await s.list_tools()
        await s.call_tool("echo", {"message": "hello"})
        await s.call_tool("get-structured-content", {"location": "Chicago"})
        await s.list_prompts()
        await s.send_ping()

    cassette = tmp_path / "http.db"
    upstream = start_everything(mode)
    try:
        proxy = start_proxy(upstream.url, cassette, session="everything")
        try:
            run_sync(lambda: run_http_session(proxy.url, scenario, transport=transport))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    result = lint([cassette], options=NO_CONFIG)
    assert result.sessions[0].messages >= 10
    assert [(f.code, f.method, f.message) for f in result.findings] == []


async def probing_client(argv: list[str], calls: list[tuple[str, dict[str, Any]]]) -> None:
    """The SDK's Client in its default mode: it probes server/discover first."""
    import warnings

    from mcp import StdioServerParameters
    from mcp.client import Client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:])) as c:
            await c.list_tools()
            for name, args in calls:
                await c.call_tool(name, args)
            await c.list_prompts()


def test_stateless_sdk_session_lints_clean(tmp_path: Path, sdk_server: list[str]) -> None:
    """A 2026-07-28 session (server/discover, every request enveloped, every result stamped)
    between the SDK's Client and MCPServer: clean, each message against 2026-07-28."""
    import asyncio

    cassette = tmp_path / "modern.db"
    asyncio.run(probing_client(recorded(cassette, *sdk_server),
                               [("add", {"a": 2, "b": 3}), ("echo", {"text": "hi"})]))
    result = lint([cassette], options=NO_CONFIG)
    assert result.sessions[0].version == "2026-07-28" and result.sessions[0].messages >= 10
    assert [(f.code, f.method, f.message) for f in result.findings] == []


def test_probe_then_initialize_lints_clean(tmp_path: Path, everything_server: list[str]) -> None:
    """A probing client falls back to initialize when server-everything answers
    server/discover with -32601: the probe does not count as the first message, and the rest
    is checked as the handshake session it is."""
    import asyncio

    cassette = tmp_path / "fallback.db"
    asyncio.run(probing_client(recorded(cassette, *everything_server),
                               [("echo", {"message": "hi"})]))
    result = lint([cassette], options=NO_CONFIG)
    from mcprec.cassette import open_cassette

    with open_cassette(cassette) as c:
        requests = [m.method for m in c.messages(c.session()) if m.kind == "request"]
    assert requests[:2] == ["server/discover", "initialize"]
    assert [(f.code, f.method, f.message) for f in result.findings] == []


def test_rules_of_the_handshake_apply_after_a_probe(tmp_path: Path) -> None:
    """After a server/discover probe answered -32601 and an initialize, the session is held to
    the handshake's rules: a list_changed the server did not advertise is named."""
    env = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}}
    msgs = [(C2S, req(9, "server/discover", {"_meta": env})),
            (S2C, {"jsonrpc": "2.0", "id": 9, "error": {"code": -32601,
                                                        "message": "Method not found"}}),
            *handshake(server_caps={"tools": {}}),
            (S2C, note("notifications/tools/list_changed"))]
    findings = lint_one(path_with(tmp_path / "probe.db", msgs))
    assert {(f.code, f.method) for f in findings} == {("CAP001", "notifications/tools/list_changed")}


# --- whatever a peer sends, lint reports and does not crash --------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8)
_methods = st.sampled_from(["initialize", "notifications/initialized", "tools/list", "tools/call",
                            "notifications/progress", "notifications/cancelled", "ping",
                            "sampling/createMessage", "resources/subscribe", "server/discover",
                            "notifications/message", "x/custom"])
_ids = st.none() | st.integers(0, 3) | st.sampled_from(["a", 1.5, True])
_message = st.one_of(
    st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p},
              _ids, _methods, _json),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, _methods, _json),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, _ids, _json),
    st.builds(lambda i, e: {"jsonrpc": "2.0", "id": i, "error": e}, _ids, _json),
    _json)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([C2S, S2C]), _message), max_size=12),
       st.sampled_from([None, "2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28", "2099"]))
def test_any_traffic_is_linted_without_crashing(messages: list[tuple[str, Any]],
                                               version: str | None) -> None:
    """Arbitrary JSON in either direction, under any version, gives findings, never an error."""
    from mcprec import wire
    from mcprec.cassette import Session
    from mcprec.lint.api import checkers, prepare
    from mcprec.lint.walk import Context, Item, Walk

    run = prepare(LintOptions(use_config=False))
    session = Session(1, "s", "stdio", [], "", None, "complete", 0, version, None, None, None,
                      None, None, {}, "0")
    walk = Walk(Context("c.db", session, run.enabled, run), checkers(run))
    for seq, (direction, obj) in enumerate(messages):
        raw = wire.dumps(obj)
        c = wire.classify(raw)
        if c.kind == wire.BATCH:
            for i, element in enumerate(obj):
                e = wire.classify_obj(element)
                walk.step(Item(seq, direction, e.kind, e.method, e.rpc_id, element, f"$[{i}]"))
        else:
            walk.step(Item(seq, direction, c.kind, c.method, c.rpc_id, obj, raw=raw))
    for checker in walk.checkers:
        checker.finish()
    for f in walk.ctx.findings:
        assert f.code in run.enabled and f.path.startswith("$")
