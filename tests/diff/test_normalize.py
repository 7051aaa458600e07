"""Normalizers: two recordings of a clock- and id-stamping server (tests/peers/clock_server.py)
diff clean with `--normalize` while a real change still shows, and replay matches a request
carrying a fresh UUID and time with `replay --normalize`."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import MCPREC, PEERS, ClientRun, dump, record_scenario, run_client, run_mcprec
from mcprec.diff import diff
from mcprec.errors import UsageError
from mcprec.normalize import Normalizer

CLOCK = [sys.executable, str(PEERS / "clock_server.py")]

pytest_plugins = ["pytester"]
ALL = ["--normalize", "timestamps,uuids", "--normalize", "order=ORD-[0-9]+"]


def fresh_id() -> str:
    return str(uuid.uuid4())


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


async def clock_scenario(s: Any, run: ClientRun) -> None:
    """Every tool; lookup with a fresh id and time, as a real client would send."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["now"] = dump(await s.call_tool("now", {}))
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea", "quantity": 2}))
    run.results["lookup"] = await answer(s.call_tool("lookup", {"id": fresh_id(), "at": now_iso()}))


async def answer(call: Any) -> Any:
    """A call's result, or ``{"error": message}`` when it got a JSON-RPC error (replay's miss)."""
    from mcp.shared.exceptions import MCPError

    try:
        return dump(await call)
    except MCPError as e:
        return {"error": str(e)}


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """clock.db: r1 and r2 (v1, the same calls), v2 (status and a description changed), v3
    (a required input added)."""
    cas = tmp_path_factory.mktemp("normalize") / "clock.db"
    runs = {}
    for name, variant in (("r1", "v1"), ("r2", "v1"), ("v2", "v2"), ("v3", "v3")):
        runs[name] = record_scenario(cas, name, CLOCK, clock_scenario,
                                     env={"MCPREC_TEST_CLOCK_VARIANT": variant})
    return SimpleNamespace(cassette=cas, runs=runs)


# --- the normalizer itself ----------------------------------------------------------------------


def test_kinds_become_placeholders_anywhere() -> None:
    """ISO and HTTP dates and UUIDs inside strings, epoch numbers, JSON in strings, custom kinds."""
    n = Normalizer.build(["timestamps,uuids", "order=ORD-[0-9]+"])
    out = n.apply({
        "text": "order ORD-17 (123e4567-e89b-12d3-a456-426614174000) at 2026-12-03T10:00:00Z",
        "epoch": 1796292000, "ms": 1796292000123, "float": 1796292000.25, "digits": "1796292000",
        "http": "Thu, 03 Dec 2026 10:00:00 GMT", "json": '{"at": 1796292000, "n": 3}',
        "small": 42, "date": "2026-12-03", "flag": True, "key-2026-12-03T10:00:00Z": 1,
        "local": "created at 2:31:03 PM, then 14:31:04.5", "ratio": "12:30",
    })
    assert out["local"] == "created at <timestamp>, then <timestamp>" and out["ratio"] == "12:30"
    assert out["text"] == "order <order> (<uuid>) at <timestamp>"
    assert out["epoch"] == out["ms"] == out["float"] == out["digits"] == out["http"] == "<timestamp>"
    assert out["json"].value == {"at": "<timestamp>", "n": 3}
    assert (out["small"], out["date"], out["flag"]) == (42, "2026-12-03", True)
    assert "key-2026-12-03T10:00:00Z" in out  # keys stay as they are


def test_epochs_outside_2000_to_2100_stay() -> None:
    """Numbers that are not plausibly times are left alone."""
    n = Normalizer.build(["epochs"])
    assert n.apply([900_000_000, 5_000_000_000, 123456, -1796292000]) == [
        900_000_000, 5_000_000_000, 123456, -1796292000]


@pytest.mark.parametrize("spec, message", [
    ("stamps", "unknown normalizer 'stamps'"),
    ("x=(", "bad regular expression"),
    ("x=a*", "matches the empty string"),
    ("1x=abc", "must be letters"),
    ("uuids=abc", "is built in"),
])
def test_bad_normalizers_are_usage_errors(spec: str, message: str) -> None:
    """Unknown names, bad or empty-matching regexes and bad names are refused."""
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        Normalizer.build([spec])


# --- diff ---------------------------------------------------------------------------------------


def test_two_runs_differ_without_normalizers(clock: SimpleNamespace) -> None:
    """Without normalizers the runs differ, and only in the stamped answers."""
    result = diff(f"{clock.cassette}:r1", f"{clock.cassette}:r2")
    assert not result.equal
    labels = {e.label.split(" {")[0] for e in result.exchanges}
    assert labels == {"tools/call now", "tools/call create_order", "tools/call lookup"}
    assert result.summary.changes == []


def test_two_runs_diff_clean_with_normalizers(clock: SimpleNamespace) -> None:
    """timestamps, uuids and a custom order-number kind make the runs equal; the CLI exits 0."""
    result = diff(f"{clock.cassette}:r1", f"{clock.cassette}:r2",
                  normalize=["timestamps", "uuids", "order=ORD-[0-9]+"])
    assert result.equal, result.to_text()
    assert result.stats.paired == result.stats.same == 5  # initialize, list, three calls
    cli = run_mcprec("diff", f"{clock.cassette}:r1", f"{clock.cassette}:r2", *ALL)
    assert cli.returncode == 0, cli.stdout.decode() + cli.stderr.decode()
    assert "Result: EQUAL after normalizing timestamps, uuids, order=ORD-[0-9]+" in cli.stdout.decode()


def test_one_kind_missing_still_differs(clock: SimpleNamespace) -> None:
    """Without the order-number kind, the order numbers still differ (and nothing else)."""
    result = diff(f"{clock.cassette}:r1", f"{clock.cassette}:r2", normalize=["timestamps,uuids"])
    paths = {(e.label.split(" {")[0], d.path) for e in result.exchanges for d in e.differences}
    assert paths and all(label == "tools/call create_order" for label, _ in paths)
    assert all("ORD-" in str(d.before) for e in result.exchanges for d in e.differences)


def test_a_real_change_still_shows(clock: SimpleNamespace) -> None:
    """v2's status change and description change show through the normalizers."""
    result = diff(f"{clock.cassette}:r1", f"{clock.cassette}:v2",
                  normalize=["timestamps", "uuids", "order=ORD-[0-9]+"])
    assert [(c.name, c.kind, c.severity) for c in result.summary.changes] == [
        ("lookup", "description_changed", "warning")]
    (order,) = [e for e in result.exchanges if not e.summarized]
    assert order.severity == "warning"
    texts = [(d.path, d.before, d.after) for d in order.differences]
    assert ("$.result.content[0].text", "order <order> (<uuid>) accepted at <timestamp>\n"
            '{"id": "<uuid>", "number": "<order>", "item": "tea", "quantity": 2, '
            '"status": "accepted", "created": "<timestamp>"}',
            "order <order> (<uuid>) queued at <timestamp>\n"
            '{"id": "<uuid>", "number": "<order>", "item": "tea", "quantity": 2, '
            '"status": "queued", "created": "<timestamp>"}') in texts
    cli = run_mcprec("diff", f"{clock.cassette}:r1", f"{clock.cassette}:v2", *ALL)
    assert cli.returncode == 1


def test_config_normalize_and_custom_kinds(clock: SimpleNamespace, tmp_path: Path) -> None:
    """[diff] normalize with a kind from [diff.normalizers] makes the runs equal."""
    (tmp_path / "mcprec.toml").write_text(
        '[diff]\nnormalize = ["timestamps", "uuids", "order_id"]\n\n'
        '[diff.normalizers]\norder_id = "ORD-[0-9]+"\n')
    cli = run_mcprec("diff", f"{clock.cassette}:r1", f"{clock.cassette}:r2", cwd=tmp_path)
    assert cli.returncode == 0, cli.stdout.decode() + cli.stderr.decode()
    out = run_mcprec("diff", f"{clock.cassette}:r1", f"{clock.cassette}:r2", "--format", "json",
                     cwd=tmp_path)
    assert json.loads(out.stdout)["normalize"] == ["timestamps", "uuids", "order_id=ORD-[0-9]+"]


@pytest.mark.parametrize("config, args, message", [
    ("", ["--normalize", "stamps"], "mcprec: unknown normalizer 'stamps'; known: timestamps"),
    ("", ["--normalize", "x=("], "mcprec: normalizer 'x': bad regular expression"),
    ('[diff]\nnormalize = "uuids"\n', [], "normalize must be a list of strings"),
    ('[diff.normalizers]\nx = "("\n', [], "normalizer 'x': bad regular expression"),
])
def test_bad_normalize_input_is_one_line(clock: SimpleNamespace, tmp_path: Path, config: str,
                                         args: list[str], message: str) -> None:
    """Bad kinds, regexes and config values: one line on stderr, exit 2, no traceback."""
    if config:
        (tmp_path / "mcprec.toml").write_text(config)
    cli = run_mcprec("diff", f"{clock.cassette}:r1", f"{clock.cassette}:r2", *args, cwd=tmp_path)
    err = cli.stderr.decode()
    assert cli.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, err


# --- replay matching ----------------------------------------------------------------------------


def replay_run(cassette: Path, tmp_path: Path, *extra: str, cwd: Path | None = None,
               ) -> tuple[int, dict[str, Any], ClientRun]:
    """Drive `mcprec replay` with the clock scenario (fresh ids and times): exit code, report."""
    report, code = tmp_path / "report.json", tmp_path / "code"
    argv = ["sh", "-c", f'"$@"; echo $? > {code}', "sh", *MCPREC, "replay", str(cassette),
            "-s", "r1", "--report", str(report), *extra]
    run = run_client(argv, clock_scenario, cwd=cwd)
    for _ in range(100):
        if code.exists() and code.read_text().strip():
            break
        import time

        time.sleep(0.05)
    return int(code.read_text()), json.loads(report.read_text()), run


def test_replay_without_normalizers_misses_the_fresh_request(clock: SimpleNamespace,
                                                             tmp_path: Path) -> None:
    """A lookup with a fresh UUID and time matches nothing: replay exits 3."""
    code, report, run = replay_run(clock.cassette, tmp_path)
    assert code == 3
    assert [u["method"] for u in report["unmatched"]] == ["tools/call"]
    assert "no recorded response matches" in run.results["lookup"]["error"]


def test_replay_normalize_matches_the_fresh_request(clock: SimpleNamespace,
                                                    tmp_path: Path) -> None:
    """--normalize timestamps,uuids: the fresh lookup matches the recorded one; exit 0."""
    code, report, run = replay_run(clock.cassette, tmp_path, "--normalize", "timestamps,uuids")
    assert code == 0 and report["unmatched"] == [] and report["matched"] == 5, report
    assert run.results["lookup"] == clock.runs["r1"].results["lookup"]


def test_replay_normalize_from_the_config(clock: SimpleNamespace, tmp_path: Path) -> None:
    """[replay] normalize in mcprec.toml (the fast entry point defers to it): exit 0."""
    (tmp_path / "mcprec.toml").write_text('[replay]\nnormalize = ["uuids", "stamp"]\n\n'
                                          '[diff.normalizers]\nstamp = "[0-9]{4}-[0-9:T.+-]+"\n')
    code, report, _ = replay_run(clock.cassette, tmp_path, cwd=tmp_path)
    assert code == 0 and report["unmatched"] == [], report


def test_replay_normalize_does_not_match_a_real_difference(clock: SimpleNamespace,
                                                           tmp_path: Path) -> None:
    """Normalizers match by kind only: a different item is still unmatched."""

    async def other(s: Any, run: ClientRun) -> None:
        await s.list_tools()
        await s.call_tool("now", {})
        run.results["order"] = await answer(s.call_tool("create_order", {"item": "coffee",
                                                                          "quantity": 2}))

    report = tmp_path / "report.json"
    argv = [*MCPREC, "replay", str(clock.cassette), "-s", "r1", "--report", str(report),
            "--normalize", "timestamps,uuids", "--allow-unmatched"]
    run = run_client(argv, other)
    data = json.loads(report.read_text())
    assert [u["method"] for u in data["unmatched"]] == ["tools/call"]
    assert "no recorded response matches" in run.results["order"]["error"]


def test_replay_bad_normalizer_is_one_line(clock: SimpleNamespace) -> None:
    """An unknown kind: one line, a non-zero exit, no traceback."""
    cli = run_mcprec("replay", str(clock.cassette), "--normalize", "stamps", input=b"")
    err = cli.stderr.decode()
    assert cli.returncode != 0 and "unknown normalizer 'stamps'" in err
    assert len(err.strip().splitlines()) == 1, err


def test_in_process_replay_takes_normalize(clock: SimpleNamespace) -> None:
    """MatchOptions(normalize=...) serves replay_streams the same way: the fresh lookup matches."""
    import anyio
    from mcp import ClientSession

    from mcprec.matching import MatchOptions
    from mcprec.testing import replay_streams

    async def main() -> Any:
        options = MatchOptions(normalize=["timestamps", "uuids"])
        async with replay_streams(clock.cassette, session="r1", options=options) as replay:
            async with ClientSession(replay.read, replay.write) as s:
                await s.initialize()
                result = await s.call_tool("lookup", {"id": fresh_id(), "at": now_iso()})
        return dump(result), replay.report()

    result, report = anyio.run(main)
    assert result == clock.runs["r1"].results["lookup"]
    assert report["unmatched"] == []


def test_everything_runs_diff_clean_with_timestamps_and_its_blobs_ignored(
        tmp_path: Path, everything_server: list[str]) -> None:
    """server-everything's resources say "created at 2:31:03 PM": `timestamps` takes that
    text (times of day) anywhere it is embedded; only the base64 copy needs an --ignore."""
    from test_diff import everything_scenario

    cas = tmp_path / "everything.db"
    for name in ("e1", "e2"):
        record_scenario(cas, name, everything_server, everything_scenario)
    assert not diff(str(cas)).equal
    blob = "$.result.contents[*].blob"
    result = diff(str(cas), normalize=["timestamps"], ignore=[blob])
    assert result.equal, result.to_text()
    cli = run_mcprec("diff", str(cas), "--normalize", "timestamps", "--ignore", blob)
    assert cli.returncode == 0, cli.stdout.decode()


PLUGIN_TEST = f'''
import uuid
from datetime import datetime, timezone

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


@pytest.mark.mcprec(server={CLOCK!r}, {{marker}})
def test_lookup(mcprec_server):
    async def main():
        async with stdio_client(mcprec_server.params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                args = {{"id": str(uuid.uuid4()), "at": datetime.now(timezone.utc).isoformat()}}
                try:
                    return (await s.call_tool("lookup", args)).content[0].text
                except MCPError as e:  # swallowed, as an agent might: the plugin still fails
                    return str(e)
    anyio.run(main)
'''


@pytest.mark.parametrize("marker, outcome", [
    ("normalize=['timestamps', 'uuids']", "passed"),
    ("normalize='uuids'", "failed"),  # the time still differs
    ("", "failed"),
])
def test_plugin_marker_normalize(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                 marker: str, outcome: str) -> None:
    """The mcprec marker's normalize= reaches the replay: a fresh UUID and time match; without
    it the plugin fails the test, whose body swallowed the client's error."""
    from support.plugin_helpers import INNER_ARGS

    monkeypatch.delenv("MCPREC_MODE", raising=False)
    pytester.makepyfile(PLUGIN_TEST.replace("{marker}", marker))
    pytester.runpytest("--mcprec-mode=once", *INNER_ARGS).assert_outcomes(passed=1)
    result = pytester.runpytest(*INNER_ARGS)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*had no recorded match*"])
