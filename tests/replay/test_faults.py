"""Faults on demand: `mcprec replay --fault` makes a recording misbehave on purpose, over stdio,
seen by the official SDK client (errors, tool errors, drops, disconnects, delays) and by a raw
client (malformed answers, conditions, seeds, files, the report)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from support.helpers import dump, run_mcprec
from support.line_client import LineClient, reap_line_clients  # noqa: F401
from support.replay_helpers import Run, drive, one_line_error, replay_cmd

ADD = {"a": 2, "b": 3}


@pytest.fixture(autouse=True)
def _reap(reap_line_clients: Any) -> Any:
    """Kill what a failing test left running."""
    yield


@pytest.fixture(scope="module")
def main(sdk_recordings: SimpleNamespace) -> Any:
    return sdk_recordings.main


def faulty(recording: Any, *rules: str, extra: tuple[str, ...] = ()) -> list[str]:
    args = [*extra]
    for r in rules:
        args += ["--fault", r]
    return replay_cmd(recording.cassette, "-s", recording.session, *args)


async def add_twice(s: Any, run: Run) -> None:
    """Call add twice; note what each call gave (a result, or the error's code)."""
    for i in (1, 2):
        try:
            run.results[f"add {i}"] = dump(await s.call_tool("add", ADD))
        except MCPError as e:
            run.results[f"add {i}"] = {"error": e.error.code, "message": e.error.message}


# --- with the SDK client ----------------------------------------------------------------------


def test_error_reaches_the_client_as_mcp_error(main: Any) -> None:
    """error=CODE:MESSAGE answers with that JSON-RPC error; nth=2 spares the first call."""
    run = drive(faulty(main, "tools/call:add error=-32001:the tool is busy nth=2"), add_twice)
    assert run.results["add 1"] == main.live.results["add"]
    assert run.results["add 2"] == {"error": -32001, "message": "the tool is busy"}


def test_tool_error_is_a_result_with_is_error(main: Any) -> None:
    """tool-error=TEXT answers the call with an isError result carrying the text."""
    run = drive(faulty(main, "tools/call:add tool-error=quota exceeded"), add_twice)
    assert run.results["add 1"]["isError"] is True
    assert run.results["add 1"]["content"] == [{"type": "text", "text": "quota exceeded"}]


def test_drop_leaves_the_client_to_its_own_timeout(main: Any) -> None:
    """drop never answers: the client's read timeout fires, and the session goes on."""
    async def scenario(s: Any, run: Run) -> None:
        try:
            await s.call_tool("add", ADD, read_timeout_seconds=0.5)
            run.results["dropped"] = False
        except MCPError as e:
            run.results["dropped"] = "timed out" in e.error.message.lower()
        run.results["echo"] = dump(await s.call_tool("echo", {"text": "hello"}))

    run = drive(faulty(main, "tools/call:add drop"), scenario)
    assert run.results["dropped"] is True
    assert run.results["echo"] == main.live.results["echo"]


def test_disconnect_ends_the_session(main: Any) -> None:
    """disconnect closes the mock's stdout: the client's pending call fails at once."""
    async def scenario(s: Any, run: Run) -> None:
        started = time.monotonic()
        try:
            with anyio.fail_after(5):
                await s.call_tool("add", ADD)
            run.results["outcome"] = "answered"
        except MCPError:
            run.results["outcome"] = "connection closed"
        run.results["quick"] = time.monotonic() - started < 2

    run = drive(faulty(main, "tools/call:add disconnect"), scenario)
    assert run.results == {"initialize": main.live.results["initialize"],
                           "outcome": "connection closed", "quick": True}


def test_delay_answers_late_with_the_recorded_answer(main: Any) -> None:
    """delay=DURATION holds the recorded answer back that long."""
    async def scenario(s: Any, run: Run) -> None:
        started = time.monotonic()
        run.results["add"] = dump(await s.call_tool("add", ADD))
        run.timings["add"] = time.monotonic() - started

    run = drive(faulty(main, "tools/call:add delay=600ms"), scenario)
    assert run.results["add"] == main.live.results["add"]
    assert run.timings["add"] >= 0.6


# --- with a raw client ------------------------------------------------------------------------


def raw_session(argv: list[str], *calls: dict[str, Any], timeout: float = 5.0
                ) -> tuple[list[Any], int, str]:
    """Initialize, send each request in turn, read one line for each (None at end of file)."""
    client = LineClient(argv)
    client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcp", "version": "0.1.0"}}})
    assert client.recv(timeout) is not None
    got: list[Any] = []
    for call in calls:
        client.send(call)
        try:
            got.append(client.recv_raw(timeout))
        except TimeoutError:
            got.append("timeout")
    code, err = client.close()
    return got, code, err


def add(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "add", "arguments": ADD}}


@pytest.mark.parametrize("kind, check", [
    ("truncate", lambda line: line.startswith(b'{"jsonrpc"') and not line.endswith(b"}")),
    ("not-json", lambda line: not line.startswith(b"{")),
    ("wrong-id", lambda line: json.loads(line)["id"] == "mcprec-wrong-id-1"),
])
def test_malformed_answers(main: Any, kind: str, check: Any) -> None:
    """malformed=truncate|not-json|wrong-id writes the answer broken in that way."""
    got, code, _ = raw_session(faulty(main, f"tools/call:add malformed={kind}"), add(1))
    assert check(got[0]), got


def test_after_and_probability_with_a_seed_repeat(main: Any, tmp_path: Path) -> None:
    """after=N spares the first N; p= with --seed gives the same faults on every run, and the
    report lists each injected fault."""
    rules = ("tools/call:add error=-32000:flaky p=0.5", "tools/call:add tool-error after=100")
    outcomes = []
    for run in range(2):
        report = tmp_path / f"r{run}.json"
        got, _, err = raw_session(faulty(main, *rules, extra=("--seed", "7", "--report",
                                                              str(report))),
                                  *(add(i) for i in range(1, 13)))
        outcomes.append(["error" in json.loads(line) for line in got])
        data = json.loads(report.read_text())
        assert data["faults"]["seed"] == 7
        assert [f["id"] for f in data["faults"]["injected"]] == [
            i + 1 for i, failed in enumerate(outcomes[-1]) if failed]
        assert data["faults"]["unfired"] == ["tools/call:add tool-error after=100"]
        assert "never fired: 'tools/call:add tool-error after=100'" in err
    assert outcomes[0] == outcomes[1]
    assert 0 < sum(outcomes[0]) < 12


def test_rules_from_a_toml_file_and_an_overlay(main: Any, tmp_path: Path) -> None:
    """--faults reads [[faults]] tables from TOML, and mcp-cassette's JSON overlay as it is."""
    toml = tmp_path / "faults.toml"
    toml.write_text('[[faults]]\nselect = "tools/call:add"\neffect = "error=-32050:from toml"\n'
                    "nth = 1\n")
    got, _, _ = raw_session(faulty(main, extra=("--faults", str(toml))), add(1), add(2))
    assert json.loads(got[0])["error"]["code"] == -32050 and "result" in json.loads(got[1])
    overlay = tmp_path / "c.faults.json"
    overlay.write_text(json.dumps({"faults": [
        {"target": {"method": "tools/call", "nth": 2}, "type": "error",
         "params": {"code": -32099, "message": "overlay says no"}}]}))
    got, _, _ = raw_session(faulty(main, extra=("--faults", str(overlay))), add(1), add(2))
    assert "result" in json.loads(got[0])
    assert json.loads(got[1])["error"] == {"code": -32099, "message": "overlay says no",
                                           "data": {"mcprec": "fault", "rule":
                                                    "tools/call error=-32099:overlay says no "
                                                    "nth=2"}}


def test_rules_from_mcprec_toml(main: Any, tmp_path: Path) -> None:
    """[[replay.faults]] in ./mcprec.toml applies to every replay started there."""
    (tmp_path / "mcprec.toml").write_text('[[replay.faults]]\nrule = "tools/call:add drop"\n')
    client = LineClient([*faulty(main)], cwd=tmp_path)
    client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    assert client.recv(5) is not None
    client.send(add(1))
    assert client.quiet(0.5)
    client.close()


def test_rule_that_selects_nothing_is_a_warning_at_start(main: Any) -> None:
    """A rule whose selector picks no recorded request is said before serving."""
    _, _, err = raw_session(faulty(main, "tools/call:no-such-tool error=-32000"))
    assert "warning: fault 'tools/call:no-such-tool error=-32000' selects no recorded request" \
        in err


@pytest.mark.parametrize("rule, part", [
    ("tools/call", "write SELECTOR EFFECT"),
    ("tools/call explode", "effect 'explode' is not one of"),
    ("tools/call delay=soon", "'soon' is not a duration"),
    ("tools/call error=busy", "give a JSON-RPC error code"),
    ("tools/call drop nth=0", "'nth=0' is not a condition"),
    ("tools/call http=503", "http= needs --http"),
    ("calls drop", "selector 'calls' is not"),
])
def test_bad_rule_is_a_one_line_usage_error(main: Any, rule: str, part: str) -> None:
    """A bad rule exits 2 with one line naming the part that is wrong."""
    out = run_mcprec("replay", str(main.cassette), "--fault", rule, input=b"")
    assert out.returncode == 2, out.stderr
    assert part in one_line_error(out.stderr)


# --- over HTTP --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK's HTTP server recorded through the proxy: add, then echo."""
    from support.http_helpers import run_http_session, run_sync, start_proxy, start_sdk_http

    cassette = tmp_path_factory.mktemp("http-faults") / "h.db"

    async def scenario(s: Any, run: Any) -> None:
        run.results["add"] = dump(await s.call_tool("add", ADD))
        run.results["echo"] = dump(await s.call_tool("echo", {"text": "hi"}))

    upstream = start_sdk_http()
    try:
        proxy = start_proxy(upstream.url, cassette, session="h")
        try:
            run_sync(lambda: run_http_session(proxy.url, scenario))
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    return cassette


def http_outcome(cassette: Path, *rules: str) -> dict[str, Any]:
    """What an SDK client over Streamable HTTP sees of add then echo, with these faults."""
    from support.http_helpers import run_http_session, run_sync, start_replay

    extra: list[str] = []
    for r in rules:
        extra += ["--fault", r]
    replay = start_replay(cassette, "h", extra=extra)

    async def scenario(s: Any, run: Any) -> None:
        for name, args in (("add", ADD), ("echo", {"text": "hi"})):
            try:
                with anyio.fail_after(5):
                    run.results[name] = dump(await s.call_tool(name, args))
            except MCPError as e:
                run.results[name] = {"error": e.error.code, "message": e.error.message}
            except Exception as e:  # noqa: BLE001 - the transport's own failure is the outcome
                run.results[name] = {"failed": type(e).__name__}

    try:
        return dict(run_sync(lambda: run_http_session(replay.url, scenario)).results)
    except BaseException as e:  # noqa: BLE001 - a session that broke off is an outcome too
        return {"session": type(e).__name__}
    finally:
        replay.stop()


def test_http_error_and_delay(http_recording: Path) -> None:
    """Over HTTP: error= reaches the SDK client as its error; delay= answers late."""
    got = http_outcome(http_recording, "tools/call:add error=-32042:nope", "tools/call:echo "
                       "delay=300ms")
    assert got["add"] == {"error": -32042, "message": "nope"}
    assert got["echo"]["content"][0]["text"] == "hi"


def test_http_status_fault_answers_with_that_status(http_recording: Path) -> None:
    """http=503 answers the POST with 503, an empty body and Retry-After."""
    import httpx

    from support.http_helpers import start_replay

    replay = start_replay(http_recording, "h", extra=["--fault", "tools/call http=503"])
    try:
        headers = {"accept": "application/json, text/event-stream"}
        init = httpx.post(replay.url, headers=headers, timeout=10, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
        sid = init.headers.get("mcp-session-id")
        call = httpx.post(replay.url, timeout=10, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "add", "arguments": ADD}},
            headers={**headers, **({"mcp-session-id": sid} if sid else {})})
    finally:
        replay.stop()
    assert (call.status_code, call.content, call.headers.get("retry-after")) == (503, b"", "1")


def test_http_disconnect_cuts_the_call(http_recording: Path) -> None:
    """disconnect over HTTP cuts the response: the client's call fails instead of hanging."""
    got = http_outcome(http_recording, "tools/call:add disconnect")
    assert "content" not in got.get("add", {}), got
