"""OTel export, seen from the side whose spans they are: the resource is the client (the spans
are its), the server→client requests it handled get the receiver's duration histogram, HTTP
spans say the protocol's version, the conventions' schema is named in `schema_url`, a cancel
links to the request it cancels, and each histogram's description says what it measures.
Sent with `mcprec export --otlp` to the OTLP receiver of tests/otlp_receiver.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import run_mcprec
from support.otlp_receiver import Receiver, attributes, serve_receiver

# an HTTP session written with the cassette writer in a process of its own: a tool call during
# which the server asks the client for a sampling, and a call the client cancels
WRITE = r'''
import sys, orjson
from mcprec.record.writer import open_session_writer
w = open_session_writer(sys.argv[1], "sides", transport="http", target="http://127.0.0.1:8000/mcp")
c2s, s2c = "client_to_server", "server_to_client"
ms = 1_000_000
def send(d, obj, t):
    w.message(d, orjson.dumps(obj), t * ms, http={"headers": {"mcp-session-id": "sess-1"}})
send(c2s, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
     "capabilities": {"sampling": {}}, "clientInfo": {"name": "travel-agent", "version": "3.2.1"}}}, 1)
send(s2c, {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
     "serverInfo": {"name": "weather", "version": "2.0.0"}}}, 5)
send(c2s, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 6)
send(c2s, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "advise", "arguments": {}}}, 10)
send(s2c, {"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}, 12)
send(c2s, {"jsonrpc": "2.0", "id": 0, "result": {"role": "assistant", "model": "m",
     "content": {"type": "text", "text": "umbrella"}}}, 42)
send(s2c, {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "take one"}]}}, 50)
send(c2s, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}, 60)
send(c2s, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}, 90)
w.close(exit_code=0)
'''

SCHEMA = "https://opentelemetry.io/schemas/1.45.0"


@pytest.fixture(scope="module")
def received(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    cassette = tmp_path_factory.mktemp("otel-sides") / "sides.db"
    subprocess.run([sys.executable, "-c", WRITE, str(cassette)], check=True)
    with serve_receiver() as receiver:
        r = run_mcprec("export", str(cassette), "--otlp", receiver.url)
        assert r.returncode == 0, r.stderr
        yield receiver


def test_resource_is_the_client(received: Receiver) -> None:
    """service.name and service.version are the client's; the server is on the root span."""
    spans = received.spans()
    assert {r.resource["service.name"] for r in spans} == {"travel-agent"}
    assert {r.resource["service.version"] for r in spans} == {"3.2.1"}
    root = next(r for r in spans if r.span.name == "mcprec session")
    assert root.attrs["mcprec.server.name"] == "weather"
    assert root.attrs["mcprec.server.version"] == "2.0.0"
    for request in received.metrics:
        for rm in request.resource_metrics:
            assert attributes(rm.resource.attributes)["service.name"] == "travel-agent"


def test_server_to_client_requests_are_measured(received: Receiver) -> None:
    """The sampling request the client handled: a SERVER span and one value in
    mcp.server.operation.duration (30 ms); the client's own requests in the client's."""
    points = received.data_points("mcp.server.operation.duration")
    assert len(points) == 1
    assert attributes(points[0].attributes)["mcp.method.name"] == "sampling/createMessage"
    assert points[0].count == 1 and abs(points[0].sum - 0.030) < 1e-9
    client = {attributes(p.attributes)["mcp.method.name"]
              for p in received.data_points("mcp.client.operation.duration")}
    assert client == {"initialize", "tools/call"}  # notifications are not operations timed


def test_descriptions_say_what_is_measured(received: Receiver) -> None:
    """Each histogram's description names what it measures: requests, not notifications."""
    described = {m.name: m.description for request in received.metrics
                 for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert set(described) == {"mcp.client.operation.duration", "mcp.server.operation.duration",
                              "mcp.client.session.duration"}
    assert "notification" not in described["mcp.client.operation.duration"]
    assert "request" in described["mcp.client.operation.duration"]
    assert "from the server" in described["mcp.server.operation.duration"]


def test_http_spans_name_the_protocol_version(received: Receiver) -> None:
    """Every span of the HTTP session has network.protocol.name http, version 1.1."""
    for r in received.spans():
        if r.span.name == "mcprec session":
            continue
        assert r.attrs["network.protocol.name"] == "http"
        assert r.attrs["network.protocol.version"] == "1.1"


def test_schema_url(received: Receiver) -> None:
    """The conventions' version is the schema_url of every resource and scope, not an
    attribute of the scope."""
    for request in received.traces:
        for rs in request.resource_spans:
            assert rs.schema_url == SCHEMA
            for ss in rs.scope_spans:
                assert ss.schema_url == SCHEMA and not list(ss.scope.attributes)
    for request in received.metrics:
        for rm in request.resource_metrics:
            assert rm.schema_url == SCHEMA
            assert all(sm.schema_url == SCHEMA for sm in rm.scope_metrics)


def test_cancel_links_to_the_request(received: Receiver) -> None:
    """The notifications/cancelled span links to the span of the request it cancels, which
    ends there with error.type cancelled."""
    spans = received.spans()
    cancel = next(r for r in spans if r.span.name == "notifications/cancelled")
    slow = next(r for r in spans if r.span.name == "tools/call slow")
    assert [(link.trace_id, link.span_id) for link in cancel.span.links] == [
        (slow.span.trace_id, slow.span.span_id)]
    assert slow.attrs["error.type"] == "cancelled"
    assert slow.span.end_time_unix_nano == cancel.span.start_time_unix_nano
