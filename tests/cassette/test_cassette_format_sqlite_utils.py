"""docs/cassette-format.md is what sqlite-utils reads: every table of a real recorded cassette
has its documented column table, with the same columns and types
(``sqlite_utils.Database(path)[table].columns_dict``), and every documented `sqlite3` and
`sqlite-utils` command of the README and docs/ runs against it and prints rows."""

from __future__ import annotations

import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from support.helpers import MCPREC, REPO

FORMAT = REPO / "docs" / "cassette-format.md"
TYPES = {"integer": int, "text": str, "blob": bytes, "real": float}
SERVER = [sys.executable, str(REPO / "examples" / "weather_server.py")]
CLIENT = [sys.executable, str(REPO / "examples" / "weather_client.py")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick start's cassette, recorded here: the example client through `mcprec record`,
    release 1 as `v1` and release 2 as `v2`."""
    path = tmp_path_factory.mktemp("format") / "quickstart.db"
    for session, flags in (("v1", []), ("v2", ["--v2"])):
        subprocess.run([*CLIENT, "--", *MCPREC, "record", "-c", str(path), "-s", session, "--",
                        *SERVER, *flags], check=True, capture_output=True, timeout=120)
    return path


def documented_columns() -> dict[str, dict[str, type | None]]:
    """Table (or view) -> column -> Python type, from the page's column tables (None: the
    table gives no type, as the view's does not)."""
    tables: dict[str, dict[str, type | None]] = {}
    heading_name: str | None = None
    lead_name: str | None = None
    lines = FORMAT.read_text(encoding="utf-8").splitlines()
    header: list[str] | None = None
    for line in lines:
        if line.startswith("#"):
            found = re.search(r"`(\w+)`", line)
            heading_name, lead_name, header = (found.group(1) if found else None), None, None
            continue
        lead = re.match(r"`(\w+)`", line)
        if lead is not None:
            lead_name = lead.group(1)
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set(cells[0]) <= {"-"} or header[0] not in ("column", "table"):
            continue
        row = dict(zip(header, cells))
        table = (row["table"].strip("`") if "table" in row
                 else lead_name if heading_name is None else heading_name)
        assert table, f"a column table with no table named before it: {line}"
        names = re.findall(r"`(\w+)`", row["column"])
        types = [TYPES[t] for t in re.findall(r"\w+", row.get("type", "")) if t in TYPES]
        if len(types) == 1:
            types *= len(names)
        assert not types or len(types) == len(names), f"types do not pair with names: {line}"
        for name, kind in zip(names, types or [None] * len(names)):
            tables.setdefault(table, {})[name] = kind
    return tables


def test_every_table_is_documented_as_sqlite_utils_reads_it(recorded: Path) -> None:
    """The tables and views of a recorded cassette are the page's, column for column, and each
    column's type is the one sqlite-utils reads."""
    db = sqlite_utils.Database(recorded)
    documented = documented_columns()
    actual = {t: db[t].columns_dict for t in db.table_names() if not t.startswith("sqlite_")}
    views = {v: db[v].columns_dict for v in db.view_names()}
    assert sorted(documented) == sorted([*actual, *views])
    for table, columns in actual.items():
        assert documented[table] == columns, table
    for view, columns in views.items():
        assert sorted(documented[view]) == sorted(columns), view
    db.close()


def test_the_page_lists_what_every_table_holds_in_a_session(recorded: Path) -> None:
    """Not empty tables that pass by having nothing: the recorded cassette has messages with
    raw bytes, sessions, a plan and a redaction manifest."""
    db = sqlite_utils.Database(recorded)
    counts = {t: db[t].count for t in ("sessions", "messages", "replay_plan", "replay_plans",
                                       "session_redaction", "migrations", "meta")}
    assert all(counts.values()), counts
    row = next(db.query("select raw, json(raw) as message from messages order by id limit 1"))
    assert isinstance(row["raw"], bytes) and row["message"].startswith('{"jsonrpc":"2.0"')
    db.close()


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `sqlite3 ...` and `sqlite-utils ...` command in a shell block of the README and
    docs/, as argv (a command may go on over lines: a trailing backslash, or a quoted text)."""
    found: list[tuple[str, list[str]]] = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"^```(?:sh|bash)\n(.*?)^```$", text, re.S | re.M):
            pending = ""
            for line in block.splitlines():
                if not pending and not re.match(r"(sqlite3|sqlite-utils) ", line):
                    continue
                pending += line + "\n"
                try:
                    argv = shlex.split(pending.replace("\\\n", " "))
                except ValueError:  # a quote still open: the command goes on
                    continue
                if pending.rstrip("\n").endswith("\\"):
                    continue
                found.append((f"{page.name}: {' '.join(' '.join(argv).split())[:70]}", argv))
                pending = ""
    return found


COMMANDS = documented_commands()


def test_the_documented_commands_are_found() -> None:
    """The extraction finds the queries of the README, the format page and the quick start."""
    pages = {label.split(":")[0] for label, _ in COMMANDS}
    assert {"README.md", "cassette-format.md", "quickstart.md"} <= pages
    assert any(argv[0] == "sqlite-utils" for _, argv in COMMANDS)


@pytest.mark.parametrize("argv", [a for _, a in COMMANDS], ids=[label for label, _ in COMMANDS])
def test_each_documented_query_runs(argv: list[str], recorded: Path, tmp_path: Path) -> None:
    """The command, its cassette swapped for the recorded one, exits 0 and prints rows."""
    copy = tmp_path / "c.db"  # sqlite-utils may write (a -wal), and the fixture is shared
    shutil.copy(recorded, copy)
    args = [str(copy) if a.endswith(".db") else a for a in argv[1:]]
    if argv[0] == "sqlite-utils":
        command = [str(Path(sys.executable).with_name("sqlite-utils")), *args]
    elif shutil.which("sqlite3"):
        command = ["sqlite3", *args]
    else:  # no sqlite3 shell here: the query through Python's sqlite3
        with sqlite3.connect(copy) as conn:
            assert conn.execute(args[-1]).fetchall()
        return
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert done.stdout.strip(), "the query printed nothing"
