"""Recording a real SDK server driven by the real SDK client: transparent, complete, paired."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import ClientRun, dump, page_through, recorded, run_client, wire_lines, witnessed
from mcprec.cassette import Message, open_cassette

PAYLOAD_SIZE = 300_000
TRICKY_TEXT = 'héllo ☃ \u2028 "quoted" \\ back\nslash \U0001f600'


async def scenario(s: Any, run: ClientRun) -> None:
    """Exercise every feature of tests/peers/sdk_server.py once, in a fixed order."""
    r = run.results

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append((progress, total, message))

    r["tools/list"] = dump(await s.list_tools())
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["echo"] = dump(await s.call_tool("echo", {"text": TRICKY_TEXT}))
    r["counter 1"] = dump(await s.call_tool("counter", {}))
    r["counter 2"] = dump(await s.call_tool("counter", {}))
    r["slow"] = dump(await s.call_tool("slow", {"steps": 3}, progress_callback=on_progress))
    r["ask_model"] = dump(await s.call_tool("ask_model", {"question": "why?"}))
    r["payload"] = dump(await s.call_tool("payload", {"size": PAYLOAD_SIZE}))
    r["complain"] = dump(await s.call_tool("complain", {"text": "too loud"}))
    r["resources/list"] = dump(await s.list_resources())
    r["resources/templates/list"] = dump(await s.list_resource_templates())
    r["read static"] = dump(await s.read_resource("test://static/config"))
    r["read template"] = dump(await s.read_resource("test://users/ann/notes/7"))
    r["prompts/list"] = dump(await s.list_prompts())
    r["prompts/get"] = dump(await s.get_prompt("opener", {"name": "Bo"}))
    r["ping"] = dump(await s.send_ping())


C2S, S2C = "client_to_server", "server_to_client"


def _req(method: str) -> list[tuple[str, str, str]]:
    return [(C2S, "request", method), (S2C, "response", method)]


EXPECTED_FLOW = [
    *_req("initialize"),
    (C2S, "notification", "notifications/initialized"),
    *_req("tools/list"),
    *_req("tools/call") * 4,  # add, echo, counter, counter
    (C2S, "request", "tools/call"),  # slow: progress and a log line per step
    *[(S2C, "notification", "notifications/progress"),
      (S2C, "notification", "notifications/message")] * 3,
    (S2C, "response", "tools/call"),
    (C2S, "request", "tools/call"),  # ask_model: the server asks the client's model
    (S2C, "request", "sampling/createMessage"),
    (C2S, "response", "sampling/createMessage"),
    (S2C, "response", "tools/call"),
    *_req("tools/call") * 2,  # payload, complain
    *_req("resources/list"),
    *_req("resources/templates/list"),
    *_req("resources/read") * 2,
    *_req("prompts/list"),
    *_req("prompts/get"),
    *_req("ping"),
]


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory, sdk_server: list[str]) -> SimpleNamespace:
    """The scenario run directly and, at the same time, through `mcprec record` (+ a witness)."""
    tmp = tmp_path_factory.mktemp("sdk")
    cas, wire = tmp / "sdk.db", tmp / "wire"
    target = witnessed(wire, *sdk_server)
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(run_client, sdk_server, scenario)
        tapped = pool.submit(run_client, recorded(cas, *target), scenario)
        ns = SimpleNamespace(direct=direct.result(), tapped=tapped.result())
    with open_cassette(cas) as c:
        (session,) = c.sessions()
        ns.session = session
        ns.messages = list(c.messages(session))
        ns.stderr = [e.line for e in c.stderr(session)]
    ns.target, ns.wire = target, wire
    return ns


def by_seq(messages: list[Message]) -> dict[int, Message]:
    return {m.seq: m for m in messages}


# --- what the client sees ---------------------------------------------------------------------


@pytest.mark.parametrize("part", ["results", "logs", "progress", "sampling", "notifications"])
def test_client_sees_the_same_through_the_tap(sdk: SimpleNamespace, part: str) -> None:
    """Every result, log, progress update, sampling request and notification is as direct."""
    assert getattr(sdk.tapped, part) == getattr(sdk.direct, part)


def test_scenario_saw_every_feature(sdk: SimpleNamespace) -> None:
    """The direct run really exercised logs, progress, sampling and a large payload."""
    run = sdk.direct
    assert len(run.logs) == 3 and len(run.progress) == 3 and len(run.sampling) == 1
    assert len(run.results["payload"]["content"][0]["text"]) == PAYLOAD_SIZE
    assert run.results["echo"]["content"][0]["text"] == TRICKY_TEXT


def test_server_stderr_reaches_the_client(sdk: SimpleNamespace) -> None:
    """What the server writes on stderr still reaches the client's stderr through the tap."""
    assert "complaint: too loud" in sdk.tapped.stderr
    assert "mcprec test server v1 starting" in sdk.tapped.stderr


# --- what the cassette holds ------------------------------------------------------------------


@pytest.mark.parametrize("direction,file", [(C2S, "c2s.bin"), (S2C, "s2c.bin")])
def test_every_message_recorded_byte_exact(sdk: SimpleNamespace, direction: str,
                                          file: str) -> None:
    """The cassette holds exactly the lines the witness saw on the wire, in order, byte for byte."""
    on_wire = wire_lines((sdk.wire / file).read_bytes())
    in_cassette = [m.raw for m in sdk.messages if m.direction == direction]
    assert in_cassette == on_wire


def test_message_flow_is_recorded_in_order(sdk: SimpleNamespace) -> None:
    """Direction, kind and method of each message follow the scenario's exchange order."""
    flow = [(m.direction, m.kind, m.method) for m in sdk.messages]
    assert flow == EXPECTED_FLOW


def test_seq_is_dense_and_time_does_not_go_back(sdk: SimpleNamespace) -> None:
    """seq counts 0, 1, 2, ... and t_ns never decreases along it."""
    assert [m.seq for m in sdk.messages] == list(range(len(sdk.messages)))
    times = [m.t_ns for m in sdk.messages]
    assert times == sorted(times) and times[0] >= 0


def _kind_of(obj: Any) -> str:
    if isinstance(obj, dict) and "method" in obj:
        return "request" if "id" in obj else "notification"
    if isinstance(obj, dict) and "result" in obj:
        return "response"
    return "error" if isinstance(obj, dict) and "error" in obj else "invalid"


def test_kind_and_id_match_the_json(sdk: SimpleNamespace) -> None:
    """Each message's kind and rpc_id agree with its own JSON."""
    for m in sdk.messages:
        obj = json.loads(m.raw)
        assert m.kind == _kind_of(obj), m.raw[:200]
        assert m.rpc_id == (json.dumps(obj["id"]) if "id" in obj else None)
        if "method" in obj:
            assert m.method == obj["method"]


def test_every_request_has_exactly_one_paired_response(sdk: SimpleNamespace) -> None:
    """Each request is answered once: reply_to is its seq, in the other direction, same id."""
    msgs = by_seq(sdk.messages)
    answers: dict[int, int] = {}
    for m in sdk.messages:
        if m.kind in ("response", "error"):
            req = msgs[m.reply_to]
            assert req.kind == "request" and req.seq < m.seq
            assert req.rpc_id == m.rpc_id and req.direction != m.direction
            assert m.method == req.method
            answers[req.seq] = answers.get(req.seq, 0) + 1
    requests = [m.seq for m in sdk.messages if m.kind == "request"]
    assert answers == {seq: 1 for seq in requests}


def test_requests_carry_match_keys(sdk: SimpleNamespace) -> None:
    """Requests have a match key; notifications and responses have none."""
    for m in sdk.messages:
        assert (m.match_key is not None) == (m.kind == "request")


def test_identical_requests_share_a_key_but_keep_their_own_answers(sdk: SimpleNamespace) -> None:
    """The two identical counter calls have one match key and two different recorded results."""
    calls = [m for m in sdk.messages
             if m.method == "tools/call" and m.kind == "request"
             and json.loads(m.raw)["params"]["name"] == "counter"]
    assert len(calls) == 2 and calls[0].match_key == calls[1].match_key
    msgs = by_seq(sdk.messages)
    answers = [next(r for r in sdk.messages if r.reply_to == q.seq) for q in calls]
    results = [json.loads(msgs[a.seq].raw)["result"]["structuredContent"] for a in answers]
    assert results == [{"result": "call 1"}, {"result": "call 2"}]


def test_large_payload_recorded_whole(sdk: SimpleNamespace) -> None:
    """The response carrying the large payload is stored whole and parses."""
    biggest = max(sdk.messages, key=lambda m: m.size)
    text = json.loads(biggest.raw)["result"]["content"][0]["text"]
    assert len(text) == PAYLOAD_SIZE


# --- the session row --------------------------------------------------------------------------


def test_session_complete_with_server_exit_code(sdk: SimpleNamespace) -> None:
    """The session ends 'complete' with the server's exit code 0 and an end time."""
    s = sdk.session
    assert (s.status, s.exit_code, s.transport) == ("complete", 0, "stdio")
    assert s.ended_at is not None and s.ended_at >= s.started_at


def test_session_target_is_the_server_command(sdk: SimpleNamespace) -> None:
    """target is the argv after `--`."""
    assert sdk.session.target == sdk.target


def test_session_protocol_version_is_the_negotiated_one(sdk: SimpleNamespace) -> None:
    """protocol_version is what the server answered to initialize."""
    assert sdk.session.protocol_version == sdk.direct.results["initialize"]["protocolVersion"]


@pytest.mark.parametrize("column,key", [
    ("server_info", "serverInfo"),
    ("server_capabilities", "capabilities"),
    ("instructions", "instructions"),
])
def test_session_keeps_the_initialize_result(sdk: SimpleNamespace, column: str, key: str) -> None:
    """serverInfo, server capabilities and instructions are those the client got."""
    assert getattr(sdk.session, column) == sdk.direct.results["initialize"][key]


@pytest.mark.parametrize("column,key", [
    ("client_info", "clientInfo"),
    ("client_capabilities", "capabilities"),
])
def test_session_keeps_the_initialize_request(sdk: SimpleNamespace, column: str, key: str) -> None:
    """clientInfo and client capabilities are those the client sent (sampling included)."""
    first = json.loads(wire_lines((sdk.wire / "c2s.bin").read_bytes())[0])
    assert first["method"] == "initialize"
    assert getattr(sdk.session, column) == first["params"][key]
    assert "sampling" in sdk.session.client_capabilities


def test_session_counts_messages(sdk: SimpleNamespace) -> None:
    """message_count and duration_ns summarise the messages."""
    assert sdk.session.message_count == len(sdk.messages) == len(EXPECTED_FLOW)
    assert sdk.session.duration_ns == sdk.messages[-1].t_ns


@pytest.mark.parametrize("line", ["mcprec test server v1 starting", "complaint: too loud"])
def test_stderr_lines_recorded(sdk: SimpleNamespace, line: str) -> None:
    """Each line the server wrote on stderr is in the cassette, without its newline."""
    assert line in sdk.stderr


# --- pagination -------------------------------------------------------------------------------


def test_paged_listing_through_the_tap(sdk: SimpleNamespace, sdk_server: list[str],
                                       cassette: Path) -> None:
    """Pages followed by cursor through the tap add up to the unpaged list; cursors are recorded."""
    run = run_client(recorded(cassette, *sdk_server), page_through,
                     env={"MCPREC_TEST_SERVER_PAGE_SIZE": "5"})
    pages = run.results["pages"]
    assert len(pages) == 3
    everything = [r for p in pages for r in p["resources"]]
    assert everything == sdk.direct.results["resources/list"]["resources"]
    with open_cassette(cassette) as c:
        cursors = [json.loads(m.raw).get("params", {}).get("cursor")
                   for m in c.messages() if m.method == "resources/list" and m.kind == "request"]
    assert cursors == [None, "5", "10"]
