"""`mcprec import` checks every record before it writes anything: a poisoned record of a real
export gives one line naming it, a non-zero exit, and the cassette as it was."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support.helpers import SDK_SERVER, run_mcprec

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    """A real recording and its export's records."""
    tmp = tmp_path_factory.mktemp("imp")
    cassette = tmp / "c.db"
    done = run_mcprec("record", "-c", str(cassette), "-s", "s", "--", sys.executable,
                      str(SDK_SERVER), input=json.dumps(INIT).encode() + b"\n")
    assert done.returncode == 0, done.stderr
    out = run_mcprec("export", str(cassette))
    assert out.returncode == 0, out.stderr
    return cassette, [json.loads(line) for line in out.stdout.splitlines()]


@pytest.mark.parametrize("field,value,says", [
    ("http", "notadict", "http must be a JSON object"),
    ("raw", None, "raw must be a string"),
    ("t_ns", 1e30, "t_ns must be a whole number"),
])
def test_poisoned_record_changes_nothing(tmp_path: Path, exported: tuple[Path, list[dict[str, object]]],
                                        field: str, value: object, says: str) -> None:
    """The last message of the export poisoned: exit non-zero, one line, the target cassette
    (with a session of its own) byte for byte as it was, a new one not created."""
    source, records = exported
    records = json.loads(json.dumps(records))
    last = max(i for i, r in enumerate(records) if "m" in r)
    records[last]["m"].pop("raw_b64", None)
    records[last]["m"][field] = value
    records[0 if "session" in records[0] else 1]["session"]["name"] = "imported"
    dump = tmp_path / "d.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in records))
    target = tmp_path / "t.db"
    target.write_bytes(source.read_bytes())
    before = target.read_bytes()
    for into in (target, tmp_path / "new.db"):
        done = run_mcprec("import", str(dump), str(into))
        lines = done.stderr.decode().splitlines()
        assert done.returncode != 0 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"mcprec: {dump}:{last + 1}: ") and says in lines[0], lines
        assert b"Traceback" not in done.stderr
    assert target.read_bytes() == before
    assert not (tmp_path / "new.db").exists()
    assert run_mcprec("import", str(dump).replace("d.jsonl", "missing"), str(target)).returncode
