"""`mcprec export --otlp`: a recording of the SDK server and client, sent as OpenTelemetry spans
and histograms to a real OTLP/HTTP receiver (tests/otlp_receiver.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags, Status

from support.helpers import MCPREC, run_mcprec
from mcprec import wire
from mcprec.cassette import Message, Session, open_cassette
from mcprec.otel import otlp
from mcprec.otel.spans import SessionTracer, traceparent, wall_clock_ns
from support.otlp_receiver import Received, Receiver, serve_receiver
from support.replay_helpers import SDK, Recording, Run, one_line_error, progress_recorder, quietly, record

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
CLIENT, SERVER, INTERNAL = (Span.SpanKind.SPAN_KIND_CLIENT, Span.SpanKind.SPAN_KIND_SERVER,
                            Span.SpanKind.SPAN_KIND_INTERNAL)


async def otel_scenario(s: Any, run: Run) -> None:
    """Tools (one failing, one with progress, one sampling, one in the caller's trace), a
    JSON-RPC error, a resource, a prompt, a call the client gives up on, and a ping."""
    await s.list_tools()
    await s.call_tool("add", {"a": 2, "b": 3})
    await s.call_tool("slow", {"steps": 2, "delay_ms": 50}, progress_callback=progress_recorder(run))
    await s.call_tool("no-such-tool", {})
    await s.call_tool("add", {"a": 1, "b": 1},
                      meta={"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"})
    with pytest.raises(MCPError):
        await quietly(s.set_logging_level, "debug")
    await s.call_tool("ask_model", {"question": "why?"})
    await s.read_resource("test://static/config")
    await s.get_prompt("opener", {"name": "Bo"})
    with anyio.move_on_after(0.3):
        await s.call_tool("slow", {"steps": 20, "delay_ms": 50})
    await s.send_ping()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """One session of tests/peers/sdk_server.py driven by the SDK client, recorded."""
    return record(tmp_path_factory.mktemp("otel") / "otel.db", "s1", SDK, otel_scenario)


@pytest.fixture(scope="module")
def exported(recording: Recording) -> Iterator[Receiver]:
    """What a receiver got from one `mcprec export --otlp` of the recording."""
    with serve_receiver() as receiver:
        result = run_mcprec("export", str(recording.cassette), "s1", "--otlp", receiver.url)
        assert result.returncode == 0, result.stderr.decode()
        yield receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A fresh receiver for one test."""
    with serve_receiver() as r:
        yield r


def recorded(recording: Recording) -> tuple[Session, list[Message]]:
    with open_cassette(recording.cassette) as c:
        session = c.session("s1")
        return session, list(c.messages(session))


def client_spans(receiver: Receiver) -> list[Received]:
    return [r for r in receiver.spans() if r.span.kind == CLIENT and "jsonrpc.request.id" in r.attrs]


def span_named(receiver: Receiver, name: str) -> Received:
    found = [r for r in receiver.spans() if r.span.name == name]
    assert len(found) == 1, [r.span.name for r in receiver.spans()]
    return found[0]


def root(receiver: Receiver) -> Any:
    return span_named(receiver, "mcprec session").span


# --- the spans ---------------------------------------------------------------------------------


def test_one_client_span_per_client_request(recording: Recording, exported: Receiver) -> None:
    """Each request the client sent is one CLIENT span with the conventions' attributes."""
    session, messages = recorded(recording)
    requests = [m for m in messages
                if m.kind == wire.REQUEST and m.direction == wire.CLIENT_TO_SERVER]
    spans = client_spans(exported)
    assert sorted(r.attrs["jsonrpc.request.id"] for r in spans) == sorted(
        m.rpc_id for m in requests)
    for r in spans:
        assert r.attrs["mcp.method.name"] in {m.method for m in requests}
        assert r.attrs["mcp.protocol.version"] == session.protocol_version
        assert r.attrs["network.transport"] == "pipe"
        assert r.attrs["mcp.session.id"]
        assert r.resource["service.name"] == "mcp"  # the client's: the spans are its
        assert r.resource["service.version"] == session.client_info["version"]
        assert r.resource["telemetry.distro.name"] == "mcprec"


def test_tool_prompt_and_resource_spans_name_their_target(exported: Receiver) -> None:
    """tools/call spans carry the tool's name (in the span's name too), prompts/get the
    prompt's, resources/read the resource's URI."""
    add = [r for r in exported.spans() if r.span.name == "tools/call add"]
    assert len(add) == 2
    assert all(r.attrs["gen_ai.tool.name"] == "add" for r in add)
    assert all(r.attrs["gen_ai.operation.name"] == "execute_tool" for r in add)
    assert span_named(exported, "prompts/get opener").attrs["gen_ai.prompt.name"] == "opener"
    read = span_named(exported, "resources/read")
    assert read.attrs["mcp.resource.uri"] == "test://static/config"
    assert "gen_ai.operation.name" not in read.attrs
    assert span_named(exported, "tools/list").attrs["mcp.method.name"] == "tools/list"


def test_the_failing_tool_and_the_json_rpc_error_are_errors(exported: Receiver) -> None:
    """A tool result with isError is error.type tool_error; a JSON-RPC error is its code, with
    its message as the status; the other spans have no error status."""
    tool = span_named(exported, "tools/call no-such-tool")
    assert tool.attrs["error.type"] == "tool_error"
    assert tool.span.status.code == Status.STATUS_CODE_ERROR
    level = span_named(exported, "logging/setLevel")
    assert level.attrs["error.type"] == level.attrs["rpc.response.status_code"] == "-32601"
    assert level.span.status.code == Status.STATUS_CODE_ERROR
    assert level.span.status.message == "Method not found"
    fine = span_named(exported, "tools/call ask_model")
    assert "error.type" not in fine.attrs
    assert fine.span.status.code == Status.STATUS_CODE_UNSET


def test_the_call_the_client_gave_up_on_ends_when_it_cancelled(
        recording: Recording, exported: Receiver) -> None:
    """A request the client cancelled is error.type cancelled, ending at its
    notifications/cancelled; that notification is a span of its own."""
    session, messages = recorded(recording)
    epoch = wall_clock_ns(session.started_at)
    cancel = next(m for m in messages if m.method == "notifications/cancelled")
    slow = [r for r in exported.spans() if r.span.name == "tools/call slow"]
    cancelled = [r for r in slow if r.attrs.get("error.type") == "cancelled"]
    assert len(slow) == 2 and len(cancelled) == 1
    assert cancelled[0].span.end_time_unix_nano == epoch + cancel.t_ns
    notice = span_named(exported, "notifications/cancelled")
    assert notice.span.kind == CLIENT
    assert notice.span.start_time_unix_nano == notice.span.end_time_unix_nano


def test_span_times_are_the_recorded_ones(recording: Recording, exported: Receiver) -> None:
    """Each client span starts at the session's wall-clock start plus its request's recorded
    time, and lasts exactly the recorded latency."""
    session, messages = recorded(recording)
    epoch = wall_clock_ns(session.started_at)
    by_seq = {m.seq: m for m in messages}
    answers = {m.reply_to: m for m in messages if m.reply_to is not None}
    requests = {m.rpc_id: m for m in messages
                if m.kind == wire.REQUEST and m.direction == wire.CLIENT_TO_SERVER}
    checked = 0
    for r in client_spans(exported):
        request = requests[r.attrs["jsonrpc.request.id"]]
        assert r.span.start_time_unix_nano == epoch + request.t_ns
        answer = answers.get(request.seq)
        if answer is not None and r.attrs.get("error.type") != "cancelled":
            latency = answer.t_ns - by_seq[request.seq].t_ns
            assert r.span.end_time_unix_nano - r.span.start_time_unix_nano == latency
            checked += 1
    assert checked >= 10
    slow = next(r for r in exported.spans() if r.span.name == "tools/call slow"
                and "error.type" not in r.attrs)
    assert slow.span.end_time_unix_nano - slow.span.start_time_unix_nano >= 100_000_000


def test_a_session_is_one_trace_under_a_root_span(exported: Receiver) -> None:
    """Every span not in a caller's trace shares the root's trace id and lies within it."""
    top = root(exported)
    assert top.kind == INTERNAL
    own = [r.span for r in exported.spans()
           if r.span.trace_id != bytes.fromhex(CALLER_TRACE)]
    assert len(own) == len(exported.spans()) - 1
    assert {s.trace_id for s in own} == {top.trace_id}
    assert [s for s in own if not s.parent_span_id] == [top]
    for s in own:
        assert top.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano
        assert s.end_time_unix_nano <= top.end_time_unix_nano


def test_server_messages_nest_under_the_request_they_served(exported: Receiver) -> None:
    """Progress and log notifications, and the sampling request, are SERVER spans (the client
    receives them) under the tools/call span that was being handled."""
    slow = next(r.span for r in exported.spans() if r.span.name == "tools/call slow"
                and "error.type" not in r.attrs)
    children = [r for r in exported.spans() if r.span.parent_span_id == slow.span_id]
    assert sorted(r.span.name for r in children) == [
        "notifications/message", "notifications/message",
        "notifications/progress", "notifications/progress"]
    assert all(r.span.kind == SERVER for r in children)
    ask = span_named(exported, "tools/call ask_model").span
    sampling = span_named(exported, "sampling/createMessage").span
    assert sampling.kind == SERVER and sampling.parent_span_id == ask.span_id
    assert ask.start_time_unix_nano < sampling.start_time_unix_nano
    assert sampling.end_time_unix_nano < ask.end_time_unix_nano


def test_a_traceparent_in_meta_joins_the_callers_trace(exported: Receiver) -> None:
    """A request carrying params._meta.traceparent is a child of that remote span, keeps its
    tracestate, and links back to the session's root."""
    joined = [r.span for r in exported.spans()
              if r.span.trace_id == bytes.fromhex(CALLER_TRACE)]
    assert [s.name for s in joined] == ["tools/call add"]
    span = joined[0]
    assert span.parent_span_id == bytes.fromhex(CALLER_SPAN)
    assert span.trace_state == "rojo=00f067aa0ba902b7"
    assert span.flags & SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
    top = root(exported)
    assert [(link.trace_id, link.span_id) for link in span.links] == [
        (top.trace_id, top.span_id)]


def test_duration_histograms_per_method(recording: Recording, exported: Receiver) -> None:
    """mcp.client.operation.duration has a point per method (and tool, error), with the
    conventions' buckets, summing the spans' durations; the session's duration has one."""
    points = exported.data_points("mcp.client.operation.duration")
    by_key = {}
    for p in points:
        attrs = {kv.key: kv.value.string_value for kv in p.attributes}
        by_key[(attrs["mcp.method.name"], attrs.get("gen_ai.tool.name"),
                attrs.get("error.type"))] = (p, attrs)
    add, attrs = by_key[("tools/call", "add", None)]
    assert add.count == 2 and attrs["network.transport"] == "pipe"
    assert "mcp.session.id" not in attrs and "jsonrpc.request.id" not in attrs
    assert list(add.explicit_bounds) == list(otlp.DURATION_BOUNDS)
    assert sum(add.bucket_counts) == 2
    spans = [r.span for r in exported.spans() if r.span.name == "tools/call add"]
    total = sum(s.end_time_unix_nano - s.start_time_unix_nano for s in spans) / 1e9
    assert add.sum == pytest.approx(total)
    assert ("tools/call", "no-such-tool", "tool_error") in by_key
    assert ("logging/setLevel", None, "-32601") in by_key
    assert ("tools/call", "slow", "cancelled") in by_key
    assert sum(p.count for p in points) == len(client_spans(exported))
    (session_point,) = exported.data_points("mcp.client.session.duration")
    top = root(exported)
    assert session_point.start_time_unix_nano == top.start_time_unix_nano
    assert session_point.sum == pytest.approx(
        (top.end_time_unix_nano - top.start_time_unix_nano) / 1e9)


def test_exporting_twice_gives_the_same_ids(recording: Recording, receiver: Receiver) -> None:
    """Ids derive from the session, so a second export repeats the first one's trace."""
    with open_cassette(recording.cassette) as c:
        for _ in range(2):
            otlp.export_otlp(c, [c.session("s1")], otlp.OtlpTarget(receiver.url))
    first, second = receiver.traces
    assert first == second


# --- delivery ----------------------------------------------------------------------------------


def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_endpoint_is_one_line_and_a_non_zero_exit(recording: Recording) -> None:
    """Nobody listening: after its retries, export says so in one line and exits 1."""
    url = f"http://127.0.0.1:{free_port()}"
    result = run_mcprec("export", str(recording.cassette), "--otlp", url,
                        "--otlp-retries", "1")
    assert result.returncode == 1
    line = one_line_error(result.stderr)
    assert f"{url}/v1/traces" in line and "cannot connect" in line
    assert "after 2 attempts" in line and "nothing was sent" in line


@pytest.mark.parametrize("answer", [503, (429, {"Retry-After": "0"}), 502],
                         ids=["503", "429-retry-after-0", "502"])
def test_a_busy_collector_is_retried(recording: Recording, receiver: Receiver,
                                     answer: Any) -> None:
    """A 503 (or 429, 502) is retried after a back-off, and the export then succeeds."""
    receiver.answers = [answer]
    result = run_mcprec("export", str(recording.cassette), "--otlp", receiver.url)
    assert result.returncode == 0, result.stderr.decode()
    status = answer[0] if isinstance(answer, tuple) else answer
    assert receiver.posts == [("/v1/traces", status), ("/v1/traces", 200), ("/v1/metrics", 200)]
    assert len(receiver.spans()) > 10
    assert b"exported 1 session(s)" in result.stderr


def test_a_refusal_is_not_retried(recording: Recording, receiver: Receiver) -> None:
    """A 400 is final: one request, one line naming the status."""
    receiver.answers = [400]
    result = run_mcprec("export", str(recording.cassette), "--otlp", receiver.url)
    assert result.returncode == 1
    assert "HTTP 400 Bad Request" in one_line_error(result.stderr)
    assert receiver.posts == [("/v1/traces", 400)]


def test_spans_go_in_batches_and_a_failure_says_what_was_sent(
        recording: Recording, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans leave in batches of BATCH_SPANS; when one fails, the error counts what the
    collector had accepted before it."""
    monkeypatch.setattr(otlp, "BATCH_SPANS", 5)
    target = otlp.OtlpTarget(receiver.url, retries=0)
    with open_cassette(recording.cassette) as c:
        report = otlp.export_otlp(c, c.sessions(), target)
        assert report.requests == -(-report.spans // 5) > 3
        assert all(len(r.resource_spans[0].scope_spans[0].spans) <= 5 for r in receiver.traces)
        receiver.answers = [200, 200, 400]
        with pytest.raises(otlp.OtlpError, match=r"10 span\(s\) in 2 request\(s\) were accepted"):
            otlp.export_otlp(c, c.sessions(), target)


def test_headers_reach_the_collector(recording: Recording, receiver: Receiver) -> None:
    """--header KEY=VALUE goes with every request, and the body is protobuf."""
    result = run_mcprec("export", str(recording.cassette), "--otlp", receiver.url + "/v1/traces",
                        "--header", "x-api-key=s3cret")
    assert result.returncode == 0, result.stderr.decode()
    assert all(h["x-api-key"] == "s3cret" for h in receiver.headers)
    assert all(h["content-type"] == "application/x-protobuf" for h in receiver.headers)


def test_spans_the_collector_rejects_are_reported(recording: Recording,
                                                  receiver: Receiver) -> None:
    """A partial success (some spans rejected) is a warning, not silence."""
    receiver.rejected_spans = 2
    result = run_mcprec("export", str(recording.cassette), "--otlp", receiver.url)
    assert result.returncode == 0
    assert b"mcprec: warning: the collector rejected 2 span(s): too old" in result.stderr


@pytest.mark.parametrize("args", [
    ["--header", "a=b"],
    ["--otlp", "http://127.0.0.1:1", "-o", "out.jsonl"],
    ["--otlp", "http://127.0.0.1:1", "--header", "novalue"],
    ["--otlp", "localhost:4318"],
])
def test_usage_errors(recording: Recording, args: list[str], tmp_path: Path) -> None:
    """Options that make no sense together, a bad header or URL: exit 2 before sending."""
    result = run_mcprec("export", str(recording.cassette), *args, cwd=tmp_path)
    assert result.returncode == 2
    assert not (tmp_path / "out.jsonl").exists()


def test_without_the_extra_the_error_says_what_to_install(recording: Recording) -> None:
    """Without opentelemetry-proto, --otlp fails in one line naming mcprec[otel]."""
    code = ("import sys; sys.modules['opentelemetry.proto'] = None; "
            "from mcprec._entry import main; sys.argv[0] = 'mcprec'; main()")
    result = subprocess.run(
        [sys.executable, "-c", code, "export", str(recording.cassette), "--otlp",
         "http://127.0.0.1:1"], capture_output=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "pip install 'mcprec[otel]'" in one_line_error(result.stderr)


# --- the span model, without a recording --------------------------------------------------------


@pytest.mark.parametrize("meta, expected", [
    ({"traceparent": TRACEPARENT}, (CALLER_TRACE, CALLER_SPAN, "")),
    ({"traceparent": TRACEPARENT, "tracestate": "a=1"}, (CALLER_TRACE, CALLER_SPAN, "a=1")),
    ({"traceparent": f"01-{CALLER_TRACE}-{CALLER_SPAN}-01-future"}, (CALLER_TRACE, CALLER_SPAN, "")),
    ({"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01-extra"}, None),
    ({"traceparent": f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01"}, None),
    ({"traceparent": f"00-{'0' * 32}-{CALLER_SPAN}-01"}, None),
    ({"traceparent": f"00-{CALLER_TRACE}-{'0' * 16}-01"}, None),
    ({"traceparent": f"00-{CALLER_TRACE.upper()}-{CALLER_SPAN}-01"}, None),
    ({"traceparent": 7}, None),
    ({}, None),
])
def test_traceparent(meta: dict[str, Any], expected: tuple[str, str, str] | None) -> None:
    """W3C traceparent in params._meta: valid ones are read, anything else is ignored."""
    got = traceparent({"_meta": meta})
    assert (got if got is None else (got[0].hex(), got[1].hex(), got[2])) == expected


def message(seq: int, t_ms: int, direction: str, obj: dict[str, Any], *,
            reply_to: int | None = None, http: dict[str, Any] | None = None) -> Message:
    raw = wire.dumps(obj)
    c = wire.classify(raw)
    method = c.method
    return Message(seq, 1, seq, t_ms * 1_000_000, direction, c.kind, c.rpc_id, method,
                   reply_to, None, None, None, raw, http)


def test_http_sessions_name_the_server_and_the_mcp_session() -> None:
    """Over HTTP: network.transport tcp, the upstream's address and port, and the
    Mcp-Session-Id the server gave as mcp.session.id."""
    session = Session(1, "h", "http", "https://mcp.example.com/mcp", "2026-01-02T03:04:05.000006Z",
                      None, "complete", None, None, None, None, None, None, None, {}, "0.1.0")
    tracer = SessionTracer(session)
    c2s, s2c = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "serverInfo": {"name": "weather", "version": "2.0"}}}
    assert tracer.feed(message(0, 1, c2s, init, http={"headers": {}})) == []
    (span,) = tracer.feed(message(1, 4, s2c, answer, reply_to=0,
                                  http={"headers": {"Mcp-Session-Id": "abc123"}}))
    assert span.attributes == {
        "mcp.method.name": "initialize", "jsonrpc.request.id": "1",
        "mcp.session.id": "abc123", "network.transport": "tcp",
        "network.protocol.name": "http", "network.protocol.version": "1.1",
        "server.address": "mcp.example.com",
        "server.port": 443, "mcp.protocol.version": "2025-06-18"}
    assert span.start_ns == wall_clock_ns(session.started_at) + 1_000_000
    assert span.end_ns - span.start_ns == 3_000_000
    assert tracer.resource()["service.name"] == "c"
    *_, top = tracer.finish()
    assert top.attributes["mcprec.client.name"] == "c"
    assert top.attributes["mcprec.server.name"] == "weather"


def test_a_request_never_answered_lasts_until_the_session_ends() -> None:
    """A request without an answer by the end is error.type no_response, ending with the
    session."""
    session = Session(1, "x", "stdio", ["srv"], "2026-01-02T03:04:05Z", "2026-01-02T03:04:07Z",
                      "complete", 0, "2025-06-18", None, None, None, None, None, {}, "0.1.0")
    tracer = SessionTracer(session)
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "hang"}}
    assert tracer.feed(message(0, 10, wire.CLIENT_TO_SERVER, call)) == []
    hung, top = tracer.finish()
    assert hung.name == "tools/call hang" and hung.attributes["error.type"] == "no_response"
    assert hung.failed and hung.end_ns == top.end_ns == wall_clock_ns(session.ended_at or "")
