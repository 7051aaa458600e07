"""The inspection commands (sessions, show, export, import), --help, tags and cassette defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import BYTE_MIRROR, LINE_SERVER, MCPREC, ClientRun, dump, recorded, run_client, run_mcprec
from mcprec.cassette import open_cassette
from mcprec.cli import cli

NON_UTF8 = b'{"jsonrpc":"2.0","method":"notifications/x","params":{"t":"\xff\xfe"}}\n\xc3\x28 bare\n'


async def short_scenario(s: Any, run: ClientRun) -> None:
    """A few exchanges, a progress/log stream and a stderr line."""
    run.results["tools"] = dump(await s.list_tools())
    run.results["add"] = dump(await s.call_tool("add", {"a": 1, "b": 2}))
    run.results["slow"] = dump(await s.call_tool("slow", {"steps": 2, "delay_ms": 1}))
    run.results["complain"] = dump(await s.call_tool("complain", {"text": "hush"}))


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory, sdk_server: list[str]) -> SimpleNamespace:
    """A cassette with an SDK session (tagged) and, after it, a raw session with non-UTF-8 lines."""
    tmp = tmp_path_factory.mktemp("inspect")
    cas = tmp / "inspect.db"
    run_client(recorded(cas, *sdk_server, extra=("-s", "sdk", "-t", "suite=inspect")),
               short_scenario)
    subprocess.run(
        recorded(cas, sys.executable, str(BYTE_MIRROR), str(tmp / "got.bin"), extra=("-s", "raw")),
        input=NON_UTF8, capture_output=True, check=True, timeout=60,
    )
    with open_cassette(cas) as c:
        sessions = {s.name: s for s in c.sessions()}
        messages = {name: list(c.messages(s)) for name, s in sessions.items()}
    return SimpleNamespace(path=cas, tmp=tmp, sessions=sessions, messages=messages)


def ok(*args: str, **kw: Any) -> bytes:
    """Run mcprec, assert it succeeded, return its stdout."""
    proc = run_mcprec(*args, **kw)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


# --- sessions ---------------------------------------------------------------------------------


def test_sessions_table_lists_each_session(rec: SimpleNamespace) -> None:
    """`sessions` prints a header and one row per session with server, count and status."""
    lines = ok("sessions", str(rec.path)).decode().splitlines()
    assert lines[0].split() == ["NAME", "STARTED", "TARGET", "SERVER", "MSGS", "UNANS",
                                "DURATION", "STATUS"]
    assert [ln.split()[0] for ln in lines[1:]] == ["sdk", "raw"]
    sdk_row = lines[1]
    assert "mcprec-test-server 1.0.0" in sdk_row and sdk_row.endswith("complete")
    assert f"  {rec.sessions['sdk'].message_count}  " in sdk_row


def test_sessions_json_matches_the_cassette(rec: SimpleNamespace) -> None:
    """`sessions --json` gives each session's fields as stored."""
    listed = json.loads(ok("sessions", str(rec.path), "--json"))
    assert [s["name"] for s in listed] == ["sdk", "raw"]
    sdk = listed[0]
    stored = rec.sessions["sdk"]
    assert sdk["messages"] == stored.message_count == len(rec.messages["sdk"])
    assert sdk["server_info"] == stored.server_info and sdk["tags"] == {"suite": "inspect"}
    assert (sdk["status"], sdk["exit_code"], sdk["target"]) == ("complete", 0, stored.target)


def test_sessions_of_an_empty_cassette(tmp_path: Path) -> None:
    """A cassette with no sessions says so and succeeds."""
    path = tmp_path / "empty.db"
    open_cassette(path, create=True).close()
    assert b"no sessions" in ok("sessions", str(path))
    assert json.loads(ok("sessions", str(path), "--json")) == []


# --- show -------------------------------------------------------------------------------------


def test_show_defaults_to_the_latest_session(rec: SimpleNamespace) -> None:
    """Without a session name, `show` shows the most recent one."""
    assert ok("show", str(rec.path)).decode().startswith("session raw ")


def test_show_text_has_a_header_and_a_line_per_message(rec: SimpleNamespace) -> None:
    """`show` prints the session header (with the rules that redacted it), then one line per
    message with its method."""
    lines = ok("show", str(rec.path), "sdk").decode().splitlines()
    s = rec.sessions["sdk"]
    assert lines[0].startswith("session sdk  [complete]  stdio")
    assert f"server mcprec-test-server 1.0.0  protocol {s.protocol_version}" in lines[1]
    assert lines[2] == "redaction credentials (replace)"
    body = lines[3:]
    assert len(body) == s.message_count
    for line, m in zip(body, rec.messages["sdk"]):
        assert line.split()[0] == str(m.seq)
        assert m.kind in line and (m.method or "-") in line


def test_show_json_one_object_per_message(rec: SimpleNamespace) -> None:
    """`show --json` prints a JSON object per message with seq, kind, method, id and pairing."""
    rows = [json.loads(ln) for ln in ok("show", str(rec.path), "sdk", "--json").splitlines()]
    msgs = rec.messages["sdk"]
    assert [(r["seq"], r["direction"], r["kind"], r["method"], r["id"]) for r in rows] == [
        (m.seq, m.direction, m.kind, m.method, m.rpc_id) for m in msgs]
    for r, m in zip(rows, msgs):
        assert r["size"] == m.size
        if m.reply_to is not None:
            assert r["reply_to"] == m.reply_to and r["latency_ns"] >= 0


def test_show_json_body_has_the_raw_text(rec: SimpleNamespace) -> None:
    """`show --json --body` adds each message's text, invalid UTF-8 replaced."""
    rows = [json.loads(ln) for ln in ok("show", str(rec.path), "raw", "--json", "--body")
            .splitlines()]
    raws = [r["raw"] for r in rows if r["direction"] == "client_to_server"]
    assert raws == [ln.decode("utf-8", "replace") for ln in NON_UTF8.splitlines()]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_show_stderr_lines(rec: SimpleNamespace, fmt: str) -> None:
    """`show --stderr` includes what the server wrote on stderr."""
    out = ok("show", str(rec.path), "sdk", "--stderr", *(["--json"] if fmt == "json" else []))
    if fmt == "json":
        lines = [json.loads(ln) for ln in out.splitlines()]
        assert {"complaint: hush"} <= {ln.get("stderr") for ln in lines}
    else:
        assert b"! stderr  complaint: hush" in out


# --- export and import ------------------------------------------------------------------------


def test_export_is_deterministic(rec: SimpleNamespace) -> None:
    """Exporting the same cassette twice gives identical bytes."""
    assert ok("export", str(rec.path)) == ok("export", str(rec.path))


def test_export_carries_non_utf8_as_base64(rec: SimpleNamespace) -> None:
    """A message that is not UTF-8 is exported base64-encoded, not mangled."""
    lines = [json.loads(ln) for ln in ok("export", str(rec.path), "raw").splitlines()]
    b64 = [ln["m"] for ln in lines if "m" in ln and "raw_b64" in ln["m"]]
    assert b64 and all("raw" not in m for m in b64)


def test_export_without_timing_has_no_times(rec: SimpleNamespace) -> None:
    """`export --no-timing` leaves out every timestamp."""
    out = ok("export", str(rec.path), "--no-timing")
    for obj in map(json.loads, out.splitlines()):
        inner = next(iter(obj.values()))
        if isinstance(inner, dict):
            assert not {"t_ns", "started_at", "ended_at"} & set(inner)


def test_export_to_file_equals_stdout(rec: SimpleNamespace, tmp_path: Path) -> None:
    """`export -o FILE` writes what `export` prints."""
    out = tmp_path / "dump.jsonl"
    ok("export", str(rec.path), "-o", str(out))
    assert out.read_bytes() == ok("export", str(rec.path))


@pytest.fixture(scope="module")
def reimported(rec: SimpleNamespace) -> SimpleNamespace:
    """The cassette exported, imported into a new cassette and exported again."""
    first = ok("export", str(rec.path))
    dump_file = rec.tmp / "dump.jsonl"
    dump_file.write_bytes(first)
    copy = rec.tmp / "copy.db"
    proc = run_mcprec("import", str(dump_file), str(copy))
    assert proc.returncode == 0, proc.stderr
    return SimpleNamespace(first=first, again=ok("export", str(copy)), copy=copy, stderr=proc.stderr)


def test_import_round_trip_is_identical(reimported: SimpleNamespace) -> None:
    """export → import → export gives the same bytes."""
    assert reimported.again == reimported.first


def test_import_keeps_raw_bytes(rec: SimpleNamespace, reimported: SimpleNamespace) -> None:
    """Imported messages have the same raw bytes, kinds and pairing as the originals."""
    with open_cassette(reimported.copy) as c:
        for name, originals in rec.messages.items():
            copies = list(c.messages(name))
            assert [(m.raw, m.kind, m.method, m.reply_to, m.match_key) for m in copies] == [
                (m.raw, m.kind, m.method, m.reply_to, m.match_key) for m in originals]


def test_import_reports_what_it_imported(reimported: SimpleNamespace) -> None:
    """`import` names the sessions it imported on stderr."""
    assert b"imported 2 session(s)" in reimported.stderr and b"sdk, raw" in reimported.stderr


def test_import_from_stdin(rec: SimpleNamespace, tmp_path: Path) -> None:
    """`import - CASSETTE` reads the dump from stdin."""
    first = ok("export", str(rec.path), "raw")
    ok("import", "-", str(tmp_path / "stdin.db"), input=first)
    assert ok("export", str(tmp_path / "stdin.db")) == first


def test_import_refuses_an_existing_session(rec: SimpleNamespace, tmp_path: Path) -> None:
    """Importing a session name the cassette already has fails in one line, unless --replace."""
    dump_file = tmp_path / "raw.jsonl"
    dump_file.write_bytes(ok("export", str(rec.path), "raw"))
    target = tmp_path / "t.db"
    ok("import", str(dump_file), str(target))
    proc = run_mcprec("import", str(dump_file), str(target))
    assert proc.returncode != 0 and b"Traceback" not in proc.stderr
    assert proc.stderr.startswith(b"mcprec: ") and b"'raw'" in proc.stderr
    ok("import", "--replace", str(dump_file), str(target))
    assert ok("export", str(target)) == dump_file.read_bytes()


def test_import_rejects_a_file_that_is_no_export(tmp_path: Path) -> None:
    """A file that is not an export is refused in one line naming the file and line."""
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    proc = run_mcprec("import", str(bad), str(tmp_path / "x.db"))
    assert proc.returncode != 0 and b"Traceback" not in proc.stderr
    assert proc.stderr.startswith(b"mcprec: ") and f"{bad}:1".encode() in proc.stderr


# --- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help(command: str) -> None:
    """Each command's --help works and describes it."""
    out = ok(command, "--help").decode()
    assert out.startswith(f"Usage: mcprec {command} ")
    assert cli.commands[command].get_short_help_str() and "Options:" in out


def test_top_level_help_lists_every_command() -> None:
    """`mcprec --help` lists every command."""
    out = ok("--help").decode()
    for command in cli.commands:
        assert f"  {command} " in out


# --- record options and defaults --------------------------------------------------------------


@pytest.fixture
def fake_server(tmp_path: Path) -> Path:
    """A copy of line_server.py named fake_server.py (its name becomes the default slug)."""
    path = tmp_path / "fake_server.py"
    path.write_bytes(LINE_SERVER.read_bytes())
    return path


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def test_tags_stored(cassette: Path, fake_server: Path) -> None:
    """Each --tag KEY=VALUE is stored on the session."""
    ok("record", "-c", str(cassette), "-t", "env=ci", "--tag", "build=42", "-t", "empty=",
       "--", sys.executable, str(fake_server), input=PING)
    with open_cassette(cassette) as c:
        assert c.session().tags == {"env": "ci", "build": "42", "empty": ""}


def test_bad_tag_is_usage_error(cassette: Path, fake_server: Path) -> None:
    """A --tag without `=` is a usage error and records nothing."""
    proc = run_mcprec("record", "-c", str(cassette), "-t", "novalue", "--", sys.executable,
                      str(fake_server), input=PING)
    assert proc.returncode == 2 and b"KEY=VALUE" in proc.stderr
    assert not cassette.exists()


@pytest.mark.parametrize("how", ["option", "env"])
def test_session_name_given(cassette: Path, fake_server: Path, how: str) -> None:
    """--session (or $MCPREC_SESSION) names the session."""
    args = ["-s", "mine"] if how == "option" else []
    env = {"MCPREC_SESSION": "mine"} if how == "env" else None
    ok("record", "-c", str(cassette), *args, "--", sys.executable, str(fake_server),
       input=PING, env=env)
    with open_cassette(cassette) as c:
        assert [s.name for s in c.sessions()] == ["mine"]


def test_duplicate_session_name_is_refused(cassette: Path, fake_server: Path) -> None:
    """Recording a second session under a taken name fails in one line."""
    argv = ["record", "-c", str(cassette), "-s", "twice", "--", sys.executable, str(fake_server)]
    ok(*argv, input=PING)
    proc = run_mcprec(*argv, input=PING)
    assert proc.returncode != 0 and b"Traceback" not in proc.stderr
    assert proc.stderr.startswith(b"mcprec: ") and b"'twice'" in proc.stderr
    with open_cassette(cassette) as c:
        assert len(c.sessions()) == 1


def test_default_session_name_is_readable_and_unique(cassette: Path, fake_server: Path) -> None:
    """Without a name, sessions are named <server>-<time>-<random> and never collide."""
    for _ in range(2):
        ok("record", "-c", str(cassette), "--", sys.executable, str(fake_server), input=PING)
    with open_cassette(cassette) as c:
        names = [s.name for s in c.sessions()]
    assert len(set(names)) == 2 and all(n.startswith("fake_server-") for n in names)


def test_cassette_from_environment(tmp_path: Path, fake_server: Path) -> None:
    """Without -c, $MCPREC_CASSETTE says where to record."""
    work = tmp_path / "work"
    work.mkdir()
    target = tmp_path / "from-env.db"
    out = ok("record", "--", sys.executable, str(fake_server), input=PING, cwd=work,
             env={"MCPREC_CASSETTE": str(target)})
    assert json.loads(out)["id"] == 1
    with open_cassette(target) as c:
        assert c.session().message_count == 2
    assert list(work.iterdir()) == []


def test_default_cassette_under_cassettes_dir(tmp_path: Path, fake_server: Path) -> None:
    """Without -c or $MCPREC_CASSETTE, the cassette is ./cassettes/<server>.db."""
    work = tmp_path / "work"
    work.mkdir()
    ok("record", "--", sys.executable, str(fake_server), input=PING, cwd=work)
    assert sorted(p.name for p in (work / "cassettes").iterdir() if p.suffix == ".db") == [
        "fake_server.db"]
    with open_cassette(work / "cassettes" / "fake_server.db") as c:
        assert c.session().message_count == 2


def test_record_passes_stdout_through(cassette: Path, fake_server: Path) -> None:
    """`mcprec record` prints only the server's output on stdout."""
    out = ok("record", "-c", str(cassette), "--", sys.executable, str(fake_server),
             input=PING * 3)
    assert [json.loads(ln)["result"]["n"] for ln in out.splitlines()] == [1, 2, 3]
