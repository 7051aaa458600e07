"""Recording @modelcontextprotocol/server-everything (TypeScript SDK), timers and all."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from support.helpers import ClientRun, dump, recorded, run_client, wire_lines, witnessed
from mcprec.cassette import open_cassette

ROOTS = ["file:///tmp/project"]
ROOTS_LOG = "Roots updated: 1 root(s) received from client"


async def scenario(s: Any, run: ClientRun) -> None:
    """List and call a few things, and wait for the server's roots round trip and its log line.

    (Not toggle-simulated-logging: its 5 s timer keeps the server alive after stdin closes.)
    """
    r = run.results
    r["tools/list"] = dump(await s.list_tools())
    r["echo"] = dump(await s.call_tool("echo", {"message": "hello ☃"}))
    r["resources/list"] = dump(await s.list_resources())
    r["prompts/list"] = dump(await s.list_prompts())
    # server-everything asks for roots ~350 ms after `initialized`, then logs what it got
    with anyio.fail_after(10):
        while not any(log.get("data") == ROOTS_LOG for log in run.logs):
            await anyio.sleep(0.02)


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory,
               everything_server: list[str]) -> SimpleNamespace:
    """The scenario run directly and, at the same time, through `mcprec record` (+ a witness)."""
    tmp = tmp_path_factory.mktemp("everything")
    cas, wire = tmp / "everything.db", tmp / "wire"
    target = witnessed(wire, *everything_server)
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(run_client, everything_server, scenario, roots=ROOTS)
        tapped = pool.submit(run_client, recorded(cas, *target), scenario, roots=ROOTS)
        ns = SimpleNamespace(direct=direct.result(), tapped=tapped.result(), wire=wire)
    with open_cassette(cas) as c:
        ns.session = c.session()
        ns.messages = list(c.messages(ns.session))
    return ns


@pytest.mark.parametrize("name", ["initialize", "tools/list", "echo", "resources/list",
                                  "prompts/list"])
def test_results_equal_through_the_tap(everything: SimpleNamespace, name: str) -> None:
    """The client gets the same result from server-everything through the tap as directly."""
    assert everything.tapped.results[name] == everything.direct.results[name]


def test_roots_round_trip_through_the_tap(everything: SimpleNamespace) -> None:
    """The server's roots/list request reaches the client and its answer the server."""
    for run in (everything.direct, everything.tapped):
        assert any(log.get("data") == ROOTS_LOG for log in run.logs)


def test_unsolicited_notifications_reach_the_client(everything: SimpleNamespace) -> None:
    """Notifications the server sends on its own (list_changed, log messages) get through."""
    methods = {n.get("method") for n in everything.tapped.notifications}
    assert {"notifications/tools/list_changed", "notifications/message"} <= methods


@pytest.mark.parametrize("direction,file", [("client_to_server", "c2s.bin"),
                                            ("server_to_client", "s2c.bin")])
def test_every_message_recorded_byte_exact(everything: SimpleNamespace, direction: str,
                                          file: str) -> None:
    """The cassette holds exactly the lines the witness saw in each direction."""
    on_wire = wire_lines((everything.wire / file).read_bytes())
    assert [m.raw for m in everything.messages if m.direction == direction] == on_wire


@pytest.mark.parametrize("method", ["notifications/tools/list_changed", "notifications/message"])
def test_cassette_holds_unsolicited_notifications(everything: SimpleNamespace,
                                                  method: str) -> None:
    """Timer-driven notifications from the server are recorded as such."""
    found = [m for m in everything.messages if m.method == method]
    assert found and all(m.direction == "server_to_client" and m.kind == "notification"
                         for m in found)


def test_cassette_pairs_the_server_request(everything: SimpleNamespace) -> None:
    """The server-to-client roots/list request is paired with the client's response."""
    (ask,) = [m for m in everything.messages if m.method == "roots/list" and m.kind == "request"]
    assert ask.direction == "server_to_client"
    (answer,) = [m for m in everything.messages if m.reply_to == ask.seq]
    assert (answer.direction, answer.kind, answer.method) == ("client_to_server", "response",
                                                              "roots/list")
    assert json.loads(answer.raw)["result"]["roots"][0]["uri"] == ROOTS[0]


def test_typescript_ids_paired(everything: SimpleNamespace) -> None:
    """Responses pair with requests though the TypeScript server numbers its own from 0."""
    seqs = {m.seq: m for m in everything.messages}
    for m in everything.messages:
        if m.kind in ("response", "error"):
            req = seqs[m.reply_to]
            assert (req.rpc_id, req.method) == (m.rpc_id, m.method)
            assert req.direction != m.direction


def test_session_knows_the_server(everything: SimpleNamespace) -> None:
    """The session row has server-everything's serverInfo and capabilities, and ended complete."""
    s = everything.session
    init = everything.direct.results["initialize"]
    assert s.server_info == init["serverInfo"]
    assert s.server_capabilities == init["capabilities"]
    assert s.client_capabilities.get("roots") == {"listChanged": True}
    assert (s.status, s.exit_code) == ("complete", 0)
