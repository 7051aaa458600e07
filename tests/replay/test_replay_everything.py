"""Replaying a recorded @modelcontextprotocol/server-everything session (TypeScript SDK) to the
Python SDK client: list_changed storms, a server-initiated roots/list, completion, logging level,
subscriptions and time-dependent resources, all with the server gone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference

from support.helpers import dump
from support.replay_helpers import Run, drive, progress_recorder, quietly, record, replay_cmd

ROOTS = ["file:///tmp/project"]
ROOTS_LOG = "Roots updated: 1 root(s) received from client"
DOC = "demo://resource/static/document/architecture.md"
DYNAMIC = "demo://resource/dynamic/text/1"


async def wait_for_roots_log(run: Run) -> None:
    """server-everything asks for roots ~350 ms after `initialized`, then logs what it got."""
    with anyio.fail_after(10):
        while not any(log.get("data") == ROOTS_LOG for log in run.logs):
            await anyio.sleep(0.02)


async def scenario(s: Any, run: Run) -> None:
    r = run.results
    await wait_for_roots_log(run)
    r["tools/list"] = dump(await s.list_tools())
    r["echo"] = dump(await s.call_tool("echo", {"message": "hello ☃"}))
    r["get-sum"] = dump(await s.call_tool("get-sum", {"a": 2, "b": 40}))
    r["resources/list"] = dump(await s.list_resources())
    r["resources/templates/list"] = dump(await s.list_resource_templates())
    r["read dynamic"] = dump(await s.read_resource(DYNAMIC))
    r["prompts/list"] = dump(await s.list_prompts())
    r["prompts/get"] = dump(await s.get_prompt("args-prompt", {"city": "Lyon"}))
    r["completion/complete"] = dump(await s.complete(
        PromptReference(type="ref/prompt", name="completable-prompt"),
        {"name": "department", "value": "E"}))
    r["logging/setLevel"] = dump(await quietly(s.set_logging_level, "debug"))
    r["resources/subscribe"] = dump(await quietly(s.subscribe_resource, DOC))
    r["logs when subscribe returned"] = len(run.logs)
    r["resources/unsubscribe"] = dump(await quietly(s.unsubscribe_resource, DOC))
    r["long-running"] = dump(await s.call_tool(
        "trigger-long-running-operation", {"duration": 0.3, "steps": 3},
        progress_callback=progress_recorder(run)))
    r["sampling"] = dump(await s.call_tool("trigger-sampling-request", {"prompt": "why?"}))
    r["elicitation"] = dump(await s.call_tool("trigger-elicitation-request", {}))
    r["ping"] = dump(await s.send_ping())


CLIENT = {"roots": ROOTS, "elicitation": True}


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory,
               everything_server: list[str]) -> SimpleNamespace:
    """The scenario recorded live through `mcprec record`, then replayed with the server gone."""
    cassette = tmp_path_factory.mktemp("everything-replay") / "everything.db"
    rec = record(cassette, "everything", everything_server, scenario, **CLIENT)
    replayed = drive(replay_cmd(cassette), scenario, **CLIENT)
    return SimpleNamespace(rec=rec, live=rec.live, replayed=replayed)


RESULTS = ["initialize", "tools/list", "echo", "get-sum", "resources/list",
           "resources/templates/list", "read dynamic", "prompts/list", "prompts/get",
           "completion/complete", "logging/setLevel", "resources/subscribe",
           "logs when subscribe returned", "resources/unsubscribe", "long-running", "sampling",
           "elicitation", "ping"]


@pytest.mark.parametrize("name", RESULTS)
def test_replayed_result_equals_live(everything: SimpleNamespace, name: str) -> None:
    """Each result the client got from the replay is the one it got from the real server."""
    assert everything.replayed.results[name] == everything.live.results[name]


def test_live_results_are_real(everything: SimpleNamespace) -> None:
    """The live run really talked to server-everything: tools ran and completion completed."""
    r = everything.live.results
    assert r["get-sum"]["content"][0]["text"] == "The sum of 2 and 40 is 42."
    assert r["completion/complete"]["completion"]["values"] == ["Engineering"]
    assert r["initialize"]["serverInfo"]["name"] == "mcp-servers/everything"
    assert "declined" in r["elicitation"]["content"][0]["text"]
    assert "you asked: " in r["sampling"]["content"][0]["text"]


def test_time_dependent_resource_is_replayed_as_recorded(everything: SimpleNamespace) -> None:
    """A dynamic resource replays with the content recorded then, not regenerated now."""
    live = everything.live.results["read dynamic"]["contents"][0]
    replayed = everything.replayed.results["read dynamic"]["contents"][0]
    assert replayed["uri"] == live["uri"] == DYNAMIC
    assert replayed["text"] == live["text"]


def test_log_messages_replayed_in_order(everything: SimpleNamespace) -> None:
    """The roots log and the subscribe/unsubscribe acknowledgements arrive, in order."""
    assert everything.replayed.logs == everything.live.logs
    assert len(everything.live.logs) >= 3


def test_subscribe_log_arrives_before_its_response(everything: SimpleNamespace) -> None:
    """The log message sent while handling resources/subscribe reaches the client first."""
    logs = everything.replayed.logs[: everything.replayed.results["logs when subscribe returned"]]
    assert any("Subscribe Resource request" in str(log.get("data")) for log in logs)


def test_list_changed_notifications_replayed(everything: SimpleNamespace) -> None:
    """The burst of tools/list_changed after `initialized` is replayed, as many as recorded."""
    def count(run: Run) -> int:
        return sum(n.get("method") == "notifications/tools/list_changed"
                   for n in run.notifications)

    assert count(everything.live) >= 1
    assert count(everything.replayed) == count(everything.live)


@pytest.mark.parametrize("part", ["progress", "sampling", "elicitations"])
def test_progress_and_server_requests_replayed(everything: SimpleNamespace, part: str) -> None:
    """Progress, sampling and elicitation requests sent while handling tools replay as live."""
    assert getattr(everything.live, part)
    assert getattr(everything.replayed, part) == getattr(everything.live, part)


def test_server_initiated_roots_request_reaches_the_client(everything: SimpleNamespace) -> None:
    """The server's own roots/list request (not part of any client request) is replayed once."""
    assert everything.live.roots_asked == 1
    assert everything.replayed.roots_asked == 1


def test_other_logging_level_is_answered(everything: SimpleNamespace) -> None:
    """logging/setLevel with a level never recorded still gets an empty result."""

    async def set_error_level(s: Any, run: Run) -> None:
        run.results["level"] = dump(await quietly(s.set_logging_level, "error"))

    run = drive(replay_cmd(everything.rec.cassette), set_error_level, **CLIENT)
    assert run.results["level"] == {}


def test_other_completion_is_unmatched(everything: SimpleNamespace) -> None:
    """A completion request never recorded gets the no-match error, not another completion."""

    async def complete_sales(s: Any, run: Run) -> None:
        try:
            await s.complete(PromptReference(type="ref/prompt", name="completable-prompt"),
                             {"name": "department", "value": "S"})
        except MCPError as e:
            run.results["error"] = e.error.message

    run = drive(replay_cmd(everything.rec.cassette), complete_sales, **CLIENT)
    assert "no recorded response matches" in run.results["error"]
    assert 'params.argument.value: recorded "E", got "S"' in run.stderr
