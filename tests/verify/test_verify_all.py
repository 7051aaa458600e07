"""`mcprec verify --all`: every recorded session of one or several cassettes (or a directory of
them) against a real server, one summary and one exit code."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import PEERS, ClientRun, dump, record_scenario, run_mcprec

CLOCK = [sys.executable, str(PEERS / "clock_server.py")]
NORMALIZE = ["--normalize", "timestamps,uuids,order=ORD-[0-9]+"]


async def orders(s: Any, run: ClientRun) -> None:
    """The catalog and an order."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea"}))


async def clock_only(s: Any, run: ClientRun) -> None:
    """The time, and a lookup with fixed arguments."""
    run.results["now"] = dump(await s.call_tool("now", {}))
    run.results["lookup"] = dump(await s.call_tool("lookup", {"id": "x", "at": "y"}))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cassettes/a.db (sessions orders, clock), cassettes/sub/b.db (session orders-b)."""
    root = tmp_path_factory.mktemp("verify-all") / "cassettes"
    (root / "sub").mkdir(parents=True)
    record_scenario(root / "a.db", "orders", CLOCK, orders)
    record_scenario(root / "a.db", "clock", CLOCK, clock_only)
    record_scenario(root / "sub" / "b.db", "orders-b", CLOCK, orders)
    return root


@pytest.fixture
def copies(recordings: Path, tmp_path: Path) -> SimpleNamespace:
    """A fresh copy of the recordings (verify writes its runs into the cassettes)."""
    root = tmp_path / "cassettes"
    shutil.copytree(recordings, root)
    return SimpleNamespace(root=root, a=root / "a.db", b=root / "sub" / "b.db")


def verify_all(*args: str, variant: str = "v1", **kw: Any) -> Any:
    return run_mcprec("verify", "--all", *args, "--", *CLOCK,
                      env={"MCPREC_TEST_CLOCK_VARIANT": variant, **kw.pop("env", {})}, **kw)


def test_all_sessions_of_two_cassettes_pass_with_normalizers(copies: SimpleNamespace) -> None:
    """Three sessions in two cassettes, a clean server: one summary, exit 0."""
    out = verify_all(str(copies.a), str(copies.b), *NORMALIZE)
    text = out.stdout.decode()
    assert out.returncode == 0, text + out.stderr.decode()
    assert "verify --all: 3 session(s): 3 passed" in text
    for ref in (f"{copies.a}:orders", f"{copies.a}:clock", f"{copies.b}:orders-b"):
        assert f"=== {ref} ===" in text and f"EQUAL   {ref}" in text


def test_without_normalizers_the_stamped_sessions_fail(copies: SimpleNamespace) -> None:
    """Without normalizers every session differs (fresh ids and times): exit 1."""
    out = verify_all(str(copies.a), str(copies.b))
    assert out.returncode == 1
    assert "verify --all: 3 session(s): 0 passed, 3 failed" in out.stdout.decode()


def test_a_directory_is_every_cassette_under_it(copies: SimpleNamespace) -> None:
    """A directory stands for its *.db files, recursively; JSON lists each run."""
    out = verify_all(str(copies.root), *NORMALIZE, "--format", "json")
    data = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr.decode()
    assert data["format"] == "mcprec-verify-all"
    assert [(Path(r["cassette"]).name, r["session"], r["status"]) for r in data["runs"]] == [
        ("a.db", "orders", "equal"), ("a.db", "clock", "equal"), ("b.db", "orders-b", "equal")]
    assert all(r["new_session"].startswith(r["session"] + "-verify-") for r in data["runs"])


def test_fail_on_tiers_across_sessions(copies: SimpleNamespace) -> None:
    """v2 changes a description and an order's status: every session fails by default, all
    pass with --fail-on breaking; v3 breaks each session its own way (catalog, failing call)."""
    assert verify_all(str(copies.root), *NORMALIZE, variant="v2").returncode == 1
    assert verify_all(str(copies.root), *NORMALIZE, "--fail-on", "breaking",
                      variant="v2").returncode == 0
    out = verify_all(str(copies.root), *NORMALIZE, "--fail-on", "breaking", "--format", "json",
                     variant="v3")
    data = json.loads(out.stdout)
    assert out.returncode == 1
    by_session = {r["session"]: r for r in data["runs"]}
    assert {k: r["status"] for k, r in by_session.items()} == {
        "orders": "different", "clock": "different", "orders-b": "different"}
    assert [c["kind"] for c in by_session["orders"]["diff"]["summary"]["changes"]] == [
        "required_input_added"]
    (call,) = [e for e in by_session["clock"]["diff"]["exchanges"] if e["severity"]]
    assert call["severity"] == "breaking" and call["error"] == "appeared"


def test_github_format_annotates_each_cassette(copies: SimpleNamespace, tmp_path: Path) -> None:
    """--format github: annotations with file= each cassette, one Markdown summary table, also
    in $GITHUB_STEP_SUMMARY."""
    summary = tmp_path / "summary.md"
    out = verify_all(str(copies.a), str(copies.b), *NORMALIZE, "--format", "github",
                     variant="v2", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert out.returncode == 1
    stdout = out.stdout.decode()
    lines = [x for x in stdout.splitlines() if x.startswith("::")]
    notices = [x for x in lines if x.startswith("::notice ")]  # one per session: what it is
    assert len(notices) == 3 and all("exit status 1" in x for x in notices)
    assert all(x.startswith(("::warning ", "::notice ")) for x in lines)
    files = {x.split("file=", 1)[1].split(",", 1)[0] for x in lines}
    assert files == {str(copies.a), str(copies.b)}
    markdown = summary.read_text()
    assert markdown.startswith("## ❌ mcprec verify --all: 3 session(s): 0 passed, 3 failed")
    assert "| cassette | session | result | findings |" in markdown
    assert markdown.strip() in stdout


def test_a_broken_session_is_trouble_and_the_rest_still_run(copies: SimpleNamespace) -> None:
    """A session that cannot be replayed is reported and makes the exit 2; the others run."""
    from mcprec.record.writer import open_session_writer

    writer = open_session_writer(copies.b, "empty", transport="stdio", target=["x"])
    writer.close(exit_code=0, status="complete")
    out = verify_all(str(copies.a), str(copies.b), *NORMALIZE)
    text = out.stdout.decode()
    assert out.returncode == 2, text
    assert "ERROR   " in text and f"{copies.b}:empty" in text
    assert "verify --all: 4 session(s): 3 passed, 1 could not be verified" in text


@pytest.mark.parametrize("args, message", [
    (["-s", "orders"], "give -s SESSION or --all, not both"),
    (["--format", "html"], "not html"),
])
def test_bad_combinations_are_one_line(copies: SimpleNamespace, args: list[str],
                                       message: str) -> None:
    """-s with --all, or an html report of many sessions: one line, exit 2."""
    out = verify_all(str(copies.a), *args)
    err = out.stderr.decode()
    assert out.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_missing_cassette_and_directory_without_all(copies: SimpleNamespace) -> None:
    """A missing cassette in --all, and a directory without --all: one line, exit 2."""
    out = verify_all(str(copies.a), str(copies.root / "nope.db"))
    assert out.returncode == 2 and b"no such cassette" in out.stderr
    out = run_mcprec("verify", str(copies.root), "--", *CLOCK)
    err = out.stderr.decode()
    assert out.returncode == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1


def test_an_accepted_run_is_a_reference_again(copies: SimpleNamespace) -> None:
    """After --update, the accepted session is a reference (not a verify run): the next verify
    of it compares against it, and --all counts it."""
    env = {"MCPREC_TEST_CLOCK_VARIANT": "v2"}
    out = run_mcprec("verify", str(copies.a), "-s", "orders", *NORMALIZE, "--update", "--",
                     *CLOCK, env=env)
    assert out.returncode == 1, out.stderr.decode()
    again = run_mcprec("verify", str(copies.a), "-s", "orders", *NORMALIZE, "--", *CLOCK,
                       env=env)
    assert again.returncode == 0, again.stdout.decode() + again.stderr.decode()
    from mcprec.verify import reference_sessions

    assert sorted(reference_sessions(copies.a)) == ["clock", "orders"]


def test_single_verify_github_format(copies: SimpleNamespace) -> None:
    """verify -s --format github: ::error per breaking finding, file= the cassette verified."""
    out = run_mcprec("verify", str(copies.a), "-s", "clock", *NORMALIZE, "--format", "github",
                     "--fail-on", "breaking", "--", *CLOCK,
                     env={"MCPREC_TEST_CLOCK_VARIANT": "v3"})
    lines = [x for x in out.stdout.decode().splitlines() if x.startswith("::")]
    assert out.returncode == 1
    head = f"::error file={copies.a},title=mcprec%3A breaking "
    assert any(x.startswith(head + "exchange%3A tools/call lookup") for x in lines), lines
    assert any(x.startswith(head + "change%3A tool lookup::required input") for x in lines)
