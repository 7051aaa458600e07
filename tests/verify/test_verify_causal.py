"""verify sends each client message in its causal place: a cancel after the live server's
second progress notification, as the recorded client did."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.helpers import (
    MCPREC, PEERS, REPO, SDK_SERVER, ClientRun, copy_cassette, record_scenario, run_mcprec, sqlite,
)

import sys

SERVER = [sys.executable, str(SDK_SERVER)]


async def cancel_after_two_progress(s: Any, run: ClientRun) -> None:
    """Call ``slow`` (50 steps of 100 ms) and cancel it after the 2nd progress notification."""
    second = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.progress.append((progress, total, message))
        if len(run.progress) == 2:
            second.set()

    async with anyio.create_task_group() as tg:
        async def call() -> None:
            with anyio.CancelScope() as scope:
                run.results["scope"] = scope
                await s.call_tool("slow", {"steps": 50, "delay_ms": 100},
                                  progress_callback=on_progress)

        tg.start_soon(call)
        await second.wait()
        run.results["scope"].cancel()
    run.results.pop("scope")
    run.results["add"] = await s.call_tool("add", {"a": 1, "b": 2})


@pytest.fixture(scope="module")
def cancelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session of the SDK server whose client cancelled ``slow`` after two progress
    notifications."""
    cassette = tmp_path_factory.mktemp("causal") / "c.db"
    run = record_scenario(cassette, "cancel", SERVER, cancel_after_two_progress)
    assert len(run.progress) == 2
    return cassette


def test_a_cancel_goes_after_the_live_second_progress(cancelled: Path, tmp_path: Path) -> None:
    """verify against the unchanged server exits 0, five runs out of five."""
    for i in range(5):
        c = copy_cassette(cancelled, tmp_path / f"c{i}.db")
        out = run_mcprec("verify", str(c), "--format", "json", "--", *SERVER)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def client_waits(path: Path) -> dict[str, int | None]:
    """The stored waits_for of the session's client notifications, by method."""
    with sqlite(path) as db:
        return {m: w for m, w in db.execute(
            "SELECT method, waits_for FROM messages WHERE direction = 'client_to_server' "
            "AND kind = 'notification' AND session_id = (SELECT id FROM sessions "
            "WHERE name = 'cancel')")}


def test_the_recorder_stores_what_a_client_message_came_after(cancelled: Path) -> None:
    """The cancel's waits_for is the last server message of the cancelled call before it."""
    waits = client_waits(cancelled)
    with sqlite(cancelled) as db:
        method, context = db.execute(
            "SELECT method, context_seq FROM messages WHERE seq = ? AND session_id = "
            "(SELECT id FROM sessions WHERE name = 'cancel')",
            (waits["notifications/cancelled"],)).fetchone()
    assert method in ("notifications/progress", "notifications/message")
    assert context is not None
    assert waits["notifications/initialized"] is None


def test_older_cassettes_are_backfilled(cancelled: Path, tmp_path: Path) -> None:
    """A cassette of format 8 (no client waits_for) gets it computed when opened."""
    c = copy_cassette(cancelled, tmp_path / "old.db")
    want = client_waits(c)
    with sqlite(c) as db:
        db.execute("UPDATE messages SET waits_for = NULL WHERE direction = 'client_to_server'")
        db.execute("DELETE FROM migrations WHERE name = '0009_client_waits_for'")
        db.execute("UPDATE meta SET value = '8' WHERE key = 'format_version'")
        db.execute("PRAGMA user_version = 8")
    assert client_waits(c)["notifications/cancelled"] is None
    from mcprec.cassette import Cassette

    with Cassette.open(c):
        pass
    assert client_waits(c) == want


def test_the_report_says_when_the_cancel_went(cancelled: Path, tmp_path: Path) -> None:
    """The JSON report names the live message the cancel was sent after."""
    c = copy_cassette(cancelled, tmp_path / "c.db")
    out = run_mcprec("verify", str(c), "--format", "json", "--", *SERVER)
    report = json.loads(out.stdout)
    order = report["verify"]["client_order"]
    assert len(order) == 1 and "sent after the live server's notifications/" in order[0], order


# --- minted values ------------------------------------------------------------------------------

MINTED = [sys.executable, str(PEERS / "minted_server.py")]


async def page_create_get(s: Any, run: ClientRun) -> None:
    """Page through resources/list (random cursors), create a note, get it by its id, read it
    by a URI that holds the id."""
    import inspect

    from mcp_types import PaginatedRequestParams

    by_cursor = "cursor" in inspect.signature(s.list_resources).parameters  # mcp.client.Client
    pages, cursor = 0, None
    while True:
        if by_cursor:
            page = await s.list_resources(cursor=cursor)
        else:
            page = await s.list_resources(
                params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        pages += 1
        cursor = page.next_cursor
        if not cursor:
            break
    assert pages == 3
    created = await s.call_tool("create", {"title": "hello"})
    nid = created.structured_content["id"]
    got = await s.call_tool("get", {"id": nid})
    assert got.structured_content == {"id": nid, "title": "hello"}, got
    read = await s.read_resource(f"notes://{nid}")
    assert read.contents[0].text == "hello", read


@pytest.fixture(scope="module")
def minted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session of the minted server: paged resources/list, create then get."""
    cassette = tmp_path_factory.mktemp("minted") / "m.db"
    record_scenario(cassette, "minted", MINTED, page_create_get)
    return cassette


def test_minted_values_are_sent_as_the_live_server_minted_them(minted: Path,
                                                               tmp_path: Path) -> None:
    """verify against the unchanged minted server: exit 0, five runs out of five."""
    for i in range(5):
        c = copy_cassette(minted, tmp_path / f"m{i}.db")
        out = run_mcprec("verify", str(c), "--format", "json", "--", *MINTED)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
        assert json.loads(out.stdout)["verify"]["minted"] == 3  # two cursors, one id


def test_a_changed_result_is_named(minted: Path, tmp_path: Path) -> None:
    """Against a server whose get changed: exit 1, the change named, not the minted values."""
    c = copy_cassette(minted, tmp_path / "m.db")
    out = run_mcprec("verify", str(c), "--", *MINTED,
                     env={"MCPREC_TEST_SERVER_VARIANT": "v2"})
    text = out.stdout.decode()
    assert out.returncode == 1, text + out.stderr.decode()
    changes = text.split("Latency")[0]
    assert "tools/call get" in changes and '"HELLO"' in changes, text
    assert "resources/read notes://" in changes, text
    assert "tools/call create" not in changes and "resources/list" not in changes, text


# --- tasks --------------------------------------------------------------------------------------

TS_TASK_CLIENT = PEERS / "ts_task_list_client.mjs"


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, everything_server: list[str]) -> Path:
    """server-everything's simulate-research-query called as a task by the TypeScript SDK's
    callToolStream (polled to completion, then tasks/result and tasks/list), through record."""
    cassette = tmp_path_factory.mktemp("task") / "t.db"
    done = subprocess.run(["node", str(TS_TASK_CLIENT), *MCPREC, "record", "-c", str(cassette),
                           "-s", "task", "--", *everything_server],
                          capture_output=True, timeout=120, check=True, cwd=REPO)
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["status"] == "completed" and seen["listed"] == ["completed"], seen
    return cassette


def test_verify_polls_a_live_task_to_its_end(task: Path, tmp_path: Path,
                                             everything_server: list[str]) -> None:
    """verify against the unchanged server-everything exits 0, five runs out of five: the live
    task is polled until it completes, and the number of polls is not compared."""
    runs = []
    for i in range(5):
        c = copy_cassette(task, tmp_path / f"t{i}.db")
        runs.append(subprocess.Popen([*MCPREC, "verify", str(c), "--format", "json", "--",
                                      *everything_server], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=REPO))
    for p in runs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out.decode() + err.decode()
        report = json.loads(out)
        assert report["verify"]["minted"] == 1  # the task id


def test_a_cause_the_live_server_never_sends(cancelled: Path, tmp_path: Path) -> None:
    """A cancel whose recorded cause the live server never sends goes at the recorded delay once
    verify stops waiting (here --timeout 2), and the report says so."""
    c = copy_cassette(cancelled, tmp_path / "c.db")
    with sqlite(c) as db:  # the cancel came after a message this server never sends
        seq = client_waits(c)["notifications/cancelled"]
        db.execute("UPDATE messages SET method = 'notifications/never', raw = replace(raw, "
                   "'\"method\":\"notifications/', '\"method\":\"notifications/never-') "
                   "WHERE seq = ? AND session_id = (SELECT id FROM sessions WHERE name = "
                   "'cancel')", (seq,))
    out = run_mcprec("verify", str(c), "--format", "json", "--timeout", "2", "--", *SERVER)
    report = json.loads(out.stdout)
    order = report["verify"]["client_order"]
    assert len(order) == 1 and "as recorded: the live server never sent " \
        "notifications/never #1" in order[0], order
    assert out.returncode == 1  # meanwhile, the live call went on: more progress than recorded


def test_an_accepted_run_is_a_reference_with_its_own_minted_values(minted: Path,
                                                                   tmp_path: Path) -> None:
    """verify --update accepts the run (its minted-values tag dropped); the next verify of the
    accepted reference follows its values and exits 0."""
    c = copy_cassette(minted, tmp_path / "m.db")
    out = run_mcprec("verify", str(c), "--update", "--", *MINTED)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    from mcprec.cassette import Cassette

    with Cassette.open(c) as cassette:
        assert [s.tags for s in cassette.sessions()] == [{}]
    out = run_mcprec("verify", str(c), "--", *MINTED)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_what_client_messages_came_after() -> None:
    """The client side's rule: an answer came after the request, a cancel after the last
    message of the cancelled call, roots/list_changed after the last roots/list."""
    from mcprec import wire
    from mcprec.cassette.causality import Causality

    c, s = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
    t = Causality()
    seen = [
        t.observe(0, c, wire.REQUEST, "tools/call", "1", None, None, {}),
        t.observe(1, s, wire.NOTIFICATION, "notifications/progress", None, None, 0, {}),
        t.observe(2, s, wire.REQUEST, "roots/list", "7", None, 0, {}),
        t.observe(3, c, wire.RESPONSE, None, "7", 2, None, {}),
        t.observe(4, s, wire.NOTIFICATION, "notifications/progress", None, None, 0, {}),
        t.observe(5, c, wire.NOTIFICATION, "notifications/roots/list_changed", None, None,
                  None, {}),
        t.observe(6, c, wire.NOTIFICATION, "notifications/cancelled", None, None, None,
                  {"params": {"requestId": 1}}),
        t.observe(7, c, wire.NOTIFICATION, "notifications/initialized", None, None, None, {}),
    ]
    assert seen == [None, None, None, 2, 3, 2, 4, None]


def test_minted_values_over_stateless_http(tmp_path: Path) -> None:
    """The minted server stateless over HTTP (2026-07-28, the SDK's Client): verify --target
    follows the cursors and the id (the Mcp-Name of the resource read too), exit 0; against
    the changed server, exit 1 naming get and the read."""
    import asyncio
    import warnings

    from support.http_helpers import Proc, _first_stdout_url, clean_env, start_proxy

    def start(variant: str) -> Proc:
        return Proc([*MINTED, "--http"], env=clean_env(MCPREC_TEST_SERVER_VARIANT=variant),
                    ready=_first_stdout_url, what="the minted HTTP server")

    cassette = tmp_path / "h.db"
    server = start("v1")
    try:
        proxy = start_proxy(server.url, cassette, "h")
        try:
            async def drive() -> None:
                from mcp.client import Client

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    async with Client(proxy.url, mode="2026-07-28") as c:
                        await page_create_get(c, ClientRun())

            asyncio.run(drive())
        finally:
            proxy.stop()
        for _ in range(5):
            out = run_mcprec("verify", str(cassette), "-s", "h", "--target", server.url)
            assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    finally:
        server.stop()
    changed = start("v2")
    try:
        out = run_mcprec("verify", str(cassette), "-s", "h", "--target", changed.url)
    finally:
        changed.stop()
    text = out.stdout.decode()
    changes = text.split("Latency")[0]
    assert out.returncode == 1, text + out.stderr.decode()
    assert "tools/call get" in changes and "resources/read notes://" in changes, text
    assert "tools/call create" not in changes and "resources/list" not in changes, text


def test_a_value_the_live_server_still_sends_is_not_minted() -> None:
    """A tool name the client called, in a tools/list whose live order changed or from which
    another tool went: not rewritten; a random id the live server replaced: rewritten."""
    from mcprec import wire
    from mcprec.cassette import Message
    from mcprec.verify.order import ClientOrder

    def msg(seq: int, direction: str, kind: str, obj: dict[str, Any],
            reply_to: int | None = None) -> Message:
        return Message(seq, 1, seq, seq, direction, kind, wire.id_text(obj.get("id", seq)),
                       obj.get("method"), reply_to, reply_to, None, None, wire.dumps(obj))

    c, s = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
    tools = {"tools": [{"name": "forecast-weekly"}, {"name": "summarize-all"}]}
    order = ClientOrder([
        msg(0, c, wire.REQUEST, {"id": 1, "method": "tools/list"}),
        msg(1, s, wire.RESPONSE, {"id": 1, "result": tools}, 0),
        msg(2, c, wire.REQUEST, {"id": 2, "method": "tools/call",
                                  "params": {"name": "summarize-all"}}),
        msg(3, s, wire.RESPONSE, {"id": 2, "result": {"structuredContent": {"id": "a1b2c3"}}}, 2),
        msg(4, c, wire.REQUEST, {"id": 3, "method": "tools/call",
                                  "params": {"name": "get", "arguments": {"id": "a1b2c3"}}}),
    ])
    assert set(order.minted) == {"summarize-all", "a1b2c3"}
    reordered = {"tools": [{"name": "summarize-all"}, {"name": "forecast-weekly"}]}
    assert order.live_value("summarize-all", "forecast-weekly",
                            wire.dumps({"id": 1, "result": reordered})) is None
    removed = {"tools": [{"name": "forecast-weekly"}]}
    assert order.live_value("summarize-all", None,
                            wire.dumps({"id": 1, "result": removed})) is None
    live = wire.dumps({"id": 2, "result": {"structuredContent": {"id": "f9e8d7"}}})
    assert order.live_value("a1b2c3", "f9e8d7", live) == "f9e8d7"


def test_a_changed_server_behind_the_cancel_is_named(cancelled: Path, tmp_path: Path) -> None:
    """The cancel recording against the server at another version: exit 1, the version named,
    the cancelled call itself the same (the cancel still went after the live 2nd progress)."""
    c = copy_cassette(cancelled, tmp_path / "c.db")
    out = run_mcprec("verify", str(c), "--format", "json", "--", *SERVER,
                     env={"MCPREC_TEST_SERVER_VERSION": "7.0.0"})
    assert out.returncode == 1, out.stdout.decode() + out.stderr.decode()
    report = json.loads(out.stdout)
    assert "7.0.0" in json.dumps(report["summary"])
    assert not [e for e in report["exchanges"] if "slow" in json.dumps(e.get("label"))]
    assert "sent after the live server's" in report["verify"]["client_order"][0]
