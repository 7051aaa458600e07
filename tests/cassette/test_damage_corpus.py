"""Damaged cassettes, made by hand and by seeded random page damage, through every command: no
traceback, no hang, and never exit 0 on a read that came up short."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support.helpers import MCPREC, run_mcprec

PAGE = 16384
TIMEOUT = 60


def _dump(n: int = 120) -> bytes:
    lines = [{"format": 8, "mcprec_export": 1},
             {"session": {"name": "s0", "transport": "stdio", "target": ["srv"],
                          "started_at": "2026-01-01T00:00:00Z",
                          "ended_at": "2026-01-01T00:00:01Z", "status": "complete", "tags": {},
                          "mcprec_version": "0"}}]
    for i in range(n):
        req = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"i": i}}}
        rsp = {"jsonrpc": "2.0", "id": i, "result": {"content": [
            {"type": "text", "text": f"x{i}-" * 60}]}}
        lines.append({"m": {"dir": "c2s", "kind": "request", "raw": json.dumps(req),
                            "seq": 2 * i, "t_ns": 2000 * i}})
        lines.append({"m": {"dir": "s2c", "kind": "response", "raw": json.dumps(rsp),
                            "seq": 2 * i + 1, "t_ns": 2000 * i + 1000}})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A cassette of 240 messages over several pages, and its export."""
    where = tmp_path_factory.mktemp("good")
    dump = where / "good.jsonl"
    dump.write_bytes(_dump())
    path = where / "good.db"
    assert run_mcprec("import", str(dump), str(path)).returncode == 0
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path, dump


def _sql(statement: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA ignore_check_constraints = ON")
            conn.execute(statement)
            conn.commit()
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    return damage


def _halve_cells(table: str) -> Callable[[Path], None]:
    """A b-tree leaf page of ``table`` (an index: it reads short) that lost half its cells."""
    def damage(path: Path) -> None:
        conn = sqlite3.connect(path)
        try:
            page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                                (table,)).fetchone()[0]
        finally:
            conn.close()
        data = bytearray(path.read_bytes())
        at = (page - 1) * PAGE
        cells = int.from_bytes(data[at + 3:at + 5], "big")
        data[at + 3:at + 5] = (cells // 2).to_bytes(2, "big")
        path.write_bytes(bytes(data))
    return damage


def _random_pages(seed: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        rnd = random.Random(seed)
        data = bytearray(path.read_bytes())
        at = rnd.randrange(1, len(data) // PAGE) * PAGE + rnd.randrange(0, PAGE - 600)
        for i in range(at, at + rnd.choice([1, 8, 64, 500])):
            data[i] = rnd.randrange(256)
        path.write_bytes(bytes(data))
    return damage


DAMAGES: dict[str, Callable[[Path], None]] = {
    "not sqlite": lambda p: p.write_bytes(random.Random(1).randbytes(5000)),
    "text file": lambda p: p.write_bytes(b"hello\n"),
    "non-numeric format version":
        _sql("UPDATE meta SET value = 'abc' WHERE key = 'format_version'"),
    "undecodable format version":
        _sql("UPDATE meta SET value = CAST(x'ff39' AS TEXT) WHERE key = 'format_version'"),
    "damaged direction": _sql("UPDATE messages SET direction = 'sideways' WHERE seq = 5"),
    "damaged http column": _sql("UPDATE messages SET http = '{bad' WHERE seq = 3"),
    "damaged session column": _sql("UPDATE sessions SET target = '[bad'"),
    "index lost cells": _halve_cells("sqlite_autoindex_messages_1"),
    **{f"random page damage {seed}": _random_pages(seed) for seed in range(12)},
}

INIT = (b'{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"echo",'
        b'"arguments":{"i":0}}}\n')


def _commands(c: str, dump: str) -> list[tuple[list[str], bytes | None]]:
    return [(["sessions", c], None), (["show", c, "s0"], None), (["export", c], None),
            (["lint", c], None), (["scan", c], None), (["diff", f"{c}:s0", f"{c}:s0"], None),
            (["view", c, "s0", "--html", "-"], None), (["replay", c], INIT),
            (["redact", c], None), (["import", dump, c, "--replace"], None)]


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_every_command_on_a_damaged_cassette(good: tuple[Path, Path], tmp_path: Path,
                                             kind: str) -> None:
    """Each command on this damage: one line and non-zero, or a read as long as the good one's;
    never a traceback or a hang."""
    path, dump = good
    reference = {}
    for argv, stdin in _commands(str(path), str(dump)):
        if argv[0] in ("redact", "import"):
            continue
        done = subprocess.run([*MCPREC, *argv], input=stdin, capture_output=True,
                              timeout=TIMEOUT, check=False)
        reference[argv[0]] = (done.returncode, done.stdout.count(b"\n"))
    for argv, stdin in _commands(str(tmp_path / "d.db"), str(dump)):
        damaged = tmp_path / "d.db"
        damaged.write_bytes(path.read_bytes())
        DAMAGES[kind](damaged)
        done = subprocess.run([*MCPREC, *argv], input=stdin, capture_output=True,
                              timeout=TIMEOUT, check=False)
        assert b"Traceback" not in done.stderr, (argv, done.stderr.decode(errors="replace"))
        code, length = reference.get(argv[0], (0, 0))
        if done.returncode == code:  # the good one's status (lint's 1: its findings)
            assert done.stdout.count(b"\n") >= length, (argv, "a short read, as a success")
        else:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            assert done.returncode != 0 and lines and lines[-1].startswith("mcprec: "), (
                argv, lines)
