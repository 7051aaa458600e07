"""`mcprec import --from TOOL`: recordings of the MCP Inspector, mcp-cassette, mcp-recorder,
mcp-vcr and agent-vcr (tests/data/import/, written by those tools or with their own models:
generate.py) become sessions that an SDK client replays with the answers the original file
holds, and that diff, verify, lint and show work on."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.helpers import MCPREC, REPO, ClientRun, dump, run_client, run_mcprec

DATA = REPO / "tests" / "data" / "import"
FILES = {
    "inspector": "weather.inspector.json",
    "mcp-cassette": "weather.mcp-cassette.json",
    "mcp-recorder": "weather.mcp-recorder.json",
    "mcp-vcr": "weather.mcp-vcr.yaml",
    "agent-vcr": "weather.vcr",
}
WEATHER = [sys.executable, str(REPO / "examples" / "weather_server.py")]


# --- the answers each file holds, read from it directly --------------------------------------

Key = tuple[str, str]


def _key(request: dict[str, Any]) -> Key:
    params = dict(request.get("params") or {})
    params.pop("_meta", None)
    return request["method"], json.dumps(params, sort_keys=True)


def _paired(messages: list[dict[str, Any]]) -> dict[Key, Any]:
    requests = {m["id"]: m for m in messages if "method" in m and "id" in m}
    return {_key(requests[m["id"]]): m["result"] for m in messages
            if "result" in m and m.get("id") in requests}


def _answers_inspector(doc: Any) -> dict[Key, Any]:
    return {_key(json.loads(h["request"])): json.loads(h["response"])
            for h in doc["requestHistory"] if h.get("response")}


ANSWERS: dict[str, Callable[[Any], dict[Key, Any]]] = {
    "inspector": _answers_inspector,
    "mcp-cassette": lambda doc: _paired([m["payload"] for m in doc["messages"]]),
    "mcp-vcr": lambda doc: _paired([m["payload"] for m in doc["messages"]]),
    "mcp-recorder": lambda doc: {_key(x["request"]): x["response"]["result"]
                                 for x in doc["interactions"] if x.get("response")},
    "agent-vcr": lambda doc: {_key(x["request"]): x["response"]["result"]
                              for x in doc["session"]["interactions"] if x.get("response")},
}


def original_answers(tool: str) -> dict[Key, Any]:
    text = (DATA / FILES[tool]).read_text()
    return ANSWERS[tool](yaml.safe_load(text) if tool == "mcp-vcr" else json.loads(text))


# --- the client -------------------------------------------------------------------------------


async def weather(s: Any, run: ClientRun) -> None:
    """What every one of the recordings holds: the catalog, two forecasts, a resource, a
    prompt."""
    run.results[("tools/list", "{}")] = dump(await s.list_tools())
    for city in ("Paris", "Oslo"):
        args = {"name": "forecast", "arguments": {"city": city}}
        run.results[("tools/call", json.dumps(args, sort_keys=True))] = dump(
            await s.call_tool("forecast", {"city": city}))
    run.results[("resources/read", json.dumps({"uri": "weather://cities"}))] = dump(
        await s.read_resource("weather://cities"))
    args = {"name": "plan_trip", "arguments": {"city": "Oslo"}}
    run.results[("prompts/get", json.dumps(args, sort_keys=True))] = dump(
        await s.get_prompt("plan_trip", {"city": "Oslo"}))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cassette with each tool's recording imported as a session named after the tool."""
    cassette = tmp_path_factory.mktemp("import") / "imported.db"
    for tool, name in FILES.items():
        out = run_mcprec("import", "--from", tool, str(DATA / name), str(cassette), "-s", tool)
        err = out.stderr.decode()
        assert out.returncode == 0, err
        lost = [x for x in err.splitlines() if x.startswith(f"mcprec: from {tool}: ")]
        assert len(lost) == 1 and "does not keep" in lost[0], err
    return cassette


@pytest.mark.parametrize("tool", list(FILES))
def test_replayed_answers_are_the_original_files(imported: Path, tool: str) -> None:
    """An SDK client against `mcprec replay` of the imported session gets, for each request,
    the answer the tool's own file holds."""
    run = run_client([*MCPREC, "replay", str(imported), "-s", tool], weather)
    expected = original_answers(tool)
    asked = {k: v for k, v in run.results.items() if k != "initialize"}
    assert len(asked) == 5
    for key, got in asked.items():
        assert key in expected, f"{tool}: {key} is not in the original recording"
        assert got == expected[key], key
    assert run.results["initialize"]["serverInfo"]["name"] == "weather"


@pytest.mark.parametrize("tool", ["agent-vcr", "inspector"])
def test_replayed_over_streamable_http(imported: Path, tool: str) -> None:
    """`mcprec replay --http` serves an imported session to the SDK's Streamable HTTP client
    with the same answers."""
    from support.http_helpers import run_http_session, run_sync, start_replay

    replay = start_replay(imported, tool)
    try:
        run = run_sync(lambda: run_http_session(replay.url, weather))  # type: ignore[arg-type]
    finally:
        replay.stop()
    expected = original_answers(tool)
    assert {k: v for k, v in run.results.items() if k in expected} == {
        k: expected[k] for k in run.results if k in expected}
    assert len([k for k in run.results if k in expected]) == 5


def test_progress_and_logs_come_back_where_the_format_keeps_them(imported: Path) -> None:
    """mcp-cassette keeps every message: the report's progress and log messages replay; the
    Inspector keeps progress apart, and it is put back under the request whose token it names."""
    async def report(s: Any, run: ClientRun) -> None:
        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            run.progress.append((p, total, message))

        run.results["report"] = dump(await s.call_tool("report", {},
                                                       progress_callback=on_progress))

    for tool in ("mcp-cassette", "inspector"):
        run = run_client([*MCPREC, "replay", str(imported), "-s", tool], report)
        assert [p[2] for p in run.progress] == ["lima done", "oslo done", "paris done"], tool
    assert len(run_client([*MCPREC, "replay", str(imported), "-s", "mcp-cassette"],
                          report).logs) == 3


def test_diff_verify_lint_and_show_work_on_imported_sessions(imported: Path,
                                                             tmp_path: Path) -> None:
    """Two imports of the same traffic diff equal; the mcp-recorder session verifies clean
    against the real server; lint and show read every imported session."""
    out = run_mcprec("diff", f"{imported}:mcp-cassette", f"{imported}:mcp-vcr")
    assert out.returncode == 0, out.stdout.decode()
    copy = tmp_path / "copy.db"
    copy.write_bytes(imported.read_bytes())
    out = run_mcprec("verify", str(copy), "-s", "mcp-recorder", "--", *WEATHER)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    out = run_mcprec("lint", str(imported), "--all", "--format", "json")
    assert out.returncode in (0, 1), out.stderr.decode()
    linted = json.loads(out.stdout)
    assert sorted(s["session"] for s in linted["sessions"]) == sorted(FILES)
    for tool in FILES:
        shown = run_mcprec("show", str(imported), tool)
        assert shown.returncode == 0 and b"tools/call" in shown.stdout, tool


@pytest.mark.parametrize("tool, text, message", [
    ("mcp-recorder", "not json", "not JSON"),
    ("agent-vcr", '{"metadata": {}}', "is this an agent-vcr .vcr file?"),
    ("mcp-cassette", '{"format_version": 3, "messages": [{"sender": "moon"}]}', "sender"),
    ("inspector", "[]", "no initialize in the history"),
    ("mcp-vcr", "messages: 3\n", "messages must be a list"),
])
def test_a_file_of_another_kind_is_one_line(tmp_path: Path, tool: str, text: str,
                                            message: str) -> None:
    """A file that is not the tool's recording: one line naming the file, exit 2, nothing
    written."""
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    out = run_mcprec("import", "--from", tool, str(bad), str(tmp_path / "c.db"))
    err = out.stderr.decode()
    assert out.returncode == 2 and err.startswith("mcprec: "), err
    assert len(err.strip().splitlines()) == 1 and message in err and str(bad) in err, err
    assert not (tmp_path / "c.db").exists()


def test_missing_file_and_session_name_rules(tmp_path: Path) -> None:
    """A missing file, and -s without --from: one line each, exit 2."""
    out = run_mcprec("import", "--from", "mcp-vcr", str(tmp_path / "none.yaml"),
                     str(tmp_path / "c.db"))
    assert out.returncode == 2 and b"no such file" in out.stderr
    out = run_mcprec("import", str(DATA / "weather.mcprec.jsonl"), str(tmp_path / "c.db"),
                     "-s", "x")
    assert out.returncode == 2 and b"-s NAME goes with --from" in out.stderr
