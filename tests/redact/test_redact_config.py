"""The library's default redaction follows the directory it is used from, not whichever
directory asked first (no process-wide state from the first caller)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcprec.redact import default_redactor

MESSAGE = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"tenant_pin":"4711"}}'


def test_default_redaction_is_that_of_the_current_directory(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory whose mcprec.toml redacts a key gets it redacted; another does not."""
    strict, plain = tmp_path / "strict", tmp_path / "plain"
    strict.mkdir()
    plain.mkdir()
    (strict / "mcprec.toml").write_text('[redact]\nkeys = ["tenant_pin"]\n')
    monkeypatch.chdir(plain)
    assert b"4711" in default_redactor().redact(MESSAGE)
    monkeypatch.chdir(strict)
    assert b"4711" not in default_redactor().redact(MESSAGE)
    monkeypatch.chdir(plain)
    assert b"4711" in default_redactor().redact(MESSAGE)
