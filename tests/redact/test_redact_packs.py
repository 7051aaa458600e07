"""Redaction packs and strategies: a real server returning personal data, recorded through
``mcprec record`` with the ``pii`` and ``paths`` packs and user packs; every value is looked for
in the cassette's bytes and its WAL, look-alikes must survive, pseudonyms must keep relations."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import PEERS, dump, recorded, run_client, run_mcprec, sqlite
from mcprec.redact import Redactor, Rules

sys.path.insert(0, str(PEERS))
from pii_server import BARE_CARD, BARE_ORDER, CUSTOMER_ID, LOOKALIKES, PII  # noqa: E402

PII_SERVER = [sys.executable, str(PEERS / "pii_server.py")]
EMAIL = PII["email"]


async def _calls(s: Any, run: Any) -> None:
    run.results["lookup"] = dump(await s.call_tool("lookup_customer", {"email": EMAIL}))
    run.results["account"] = dump(await s.call_tool("account", {"iban": PII["iban"]}))
    run.results["whoami"] = dump(await s.call_tool("whoami", {}))
    run.results["setting"] = dump(await s.call_tool("setting", {"name": "CRM_DB_HOST"}))


def record_pii(cassette: Path, *flags: str, env: dict[str, str] | None = None,
               session: str = "s1") -> Any:
    """Record the pii server's four calls through ``mcprec record FLAGS``."""
    argv = recorded(cassette, *PII_SERVER, extra=["-s", session, *flags])
    return run_client(argv, _calls, env=env)


def on_disk(cassette: Path) -> bytes:
    """The cassette file's bytes and its WAL's, as they are on disk."""
    data = cassette.read_bytes()
    wal = Path(f"{cassette}-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def forms(value: str) -> list[bytes]:
    """A value as it may be written: as is, JSON-escaped, and without its spaces."""
    out = {value, json.dumps(value)[1:-1], value.replace(" ", "")}
    return [v.encode() for v in out]


def rows(cassette: Path) -> str:
    with sqlite(cassette) as conn:
        return "\n".join(bytes(r[0]).decode() for r in conn.execute(
            "SELECT raw FROM messages ORDER BY session_id, seq"))


def answer(cassette: Path, tool: str) -> dict[str, Any]:
    with sqlite(cassette) as conn:
        req = conn.execute("SELECT seq FROM messages WHERE method = 'tools/call' AND kind = "
                           "'request' AND json_extract(raw, '$.params.name') = ?",
                           (tool,)).fetchone()[0]
        raw = conn.execute("SELECT raw FROM messages WHERE reply_to = ?", (req,)).fetchone()[0]
    return json.loads(bytes(raw))["result"]


def test_pii_pack_leaves_no_value_in_the_file_or_wal(tmp_path: Path) -> None:
    """With the pii pack, no value of any kind is in the cassette's bytes or WAL; look-alikes are."""
    cassette = tmp_path / "pii.db"
    run = record_pii(cassette, "--redact-pack", "pii")
    assert EMAIL in json.dumps(run.results["lookup"])  # the client got the data in clear
    disk = on_disk(cassette)
    for kind, value in PII.items():
        for form in forms(value):
            assert form not in disk, kind
    assert str(BARE_CARD).encode() not in disk
    stored = rows(cassette)
    for kind, value in LOOKALIKES.items():
        assert value in stored, kind
    result = answer(cassette, "lookup_customer")["structuredContent"]
    assert result["card_number"] == 0  # a number stays a number
    assert result["order_number"] == BARE_ORDER  # fails Luhn: not a card
    assert result["contact"]["email"] == "[REDACTED]"


def test_hash_pseudonyms_are_equal_for_equal_values_and_differ_otherwise(tmp_path: Path) -> None:
    """--redact-strategy hash: the same email in the request and the answers is one token."""
    cassette = tmp_path / "hash.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "hash")
    with sqlite(cassette) as conn:
        raw = conn.execute("SELECT raw FROM messages WHERE kind = 'request' AND "
                           "json_extract(raw, '$.params.name') = 'lookup_customer'").fetchone()[0]
    asked = json.loads(bytes(raw))["params"]["arguments"]["email"]
    assert re.fullmatch(r"<email:[0-9a-f]{8}>", asked)
    result = answer(cassette, "lookup_customer")["structuredContent"]
    assert result["asked"] == result["contact"]["email"] == asked
    assert result["summary"].count(asked) == 2
    assert result["contact"]["backup"] != asked
    assert re.fullmatch(r"<email:[0-9a-f]{8}>", result["contact"]["backup"])
    iban = re.search(r"<iban:[0-9a-f]{8}>", answer(cassette, "account")["content"][0]["text"])
    assert iban is not None and iban.group(0) in result["summary"]  # the same IBAN, one token
    card = result["card_number"]
    assert isinstance(card, int) and card != BARE_CARD and len(str(card)) == len(str(BARE_CARD))
    for value in PII.values():
        assert value.encode() not in on_disk(cassette)


def test_mask_keeps_a_readable_tail(tmp_path: Path) -> None:
    """--redact-strategy mask: ****1111 for a card, ****@domain for an email."""
    cassette = tmp_path / "mask.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "mask")
    text = answer(cassette, "account")["content"][0]["text"]
    assert "card ****1111" in text
    result = answer(cassette, "lookup_customer")["structuredContent"]
    assert result["asked"] == "****@example.com"
    assert result["card_number"] == 1881
    assert PII["card"].encode() not in on_disk(cassette)


def test_paths_pack_replaces_home_and_absolute_paths_not_urls(tmp_path: Path) -> None:
    """The paths pack hides the home directory and absolute paths, and leaves URLs alone."""
    cassette = tmp_path / "paths.db"
    record_pii(cassette, "--redact-pack", "paths")
    text = answer(cassette, "whoami")["content"][0]["text"]
    assert text == "home <PATH>, config <PATH>, see https://example.com/a/b"
    home = os.path.expanduser("~")
    assert f"{home}/projects".encode() not in on_disk(cassette)
    with sqlite(cassette) as conn:
        target = json.loads(conn.execute("SELECT target FROM sessions").fetchone()[0])
    assert target[1] == "<PATH>"  # the server's path in the session's command line too


def test_user_pack_and_redact_env(tmp_path: Path) -> None:
    """A TOML pack's pattern, key and strategy apply, and --redact-env hides any variable."""
    pack = tmp_path / "crm.toml"
    pack.write_text('name = "crm"\nstrategy = "hash"\n\n[[rules]]\nkind = "customer"\n'
                    'pattern = "CUST-[0-9]{6}"\nanchors = ["CUST-"]\n\n[[rules]]\n'
                    'keys = ["backup"]\nstrategy = "replace"\nreplacement = "<BACKUP>"\n')
    cassette = tmp_path / "crm.db"
    host = "db7.internal.example"
    record_pii(cassette, "--redact-pack", str(pack), "--redact-env", "CRM_DB_HOST",
               env={"CRM_DB_HOST": host})
    result = answer(cassette, "lookup_customer")["structuredContent"]
    assert re.search(r"\(<customer:[0-9a-f]{8}>\)", result["summary"])
    assert result["contact"]["backup"] == "<BACKUP>"
    assert answer(cassette, "setting")["content"][0]["text"] == "CRM_DB_HOST is [REDACTED]"
    disk = on_disk(cassette)
    assert CUSTOMER_ID.encode() not in disk and host.encode() not in disk
    assert EMAIL.encode() in disk  # no pii pack asked for


@pytest.mark.parametrize("text", [
    "order 1234567812345678",  # 16 digits failing Luhn
    "iban GB82WEST12345698765433",  # IBAN-shaped, failing mod 97
    "card 9111111111111111",  # passes Luhn, but no issuer starts with 9
    "at 10:30:00 on 2026-12-03, v1.4.2, from 127.0.0.1, ssn-like 000-12-3456",
])
def test_lookalikes_survive(text: str) -> None:
    """Validators reject look-alikes: the text is left exactly as it was."""
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": text}}).encode()
    r = Redactor(Rules(packs=("pii",)))
    assert r.redact(raw) == raw
    assert r.scan(raw) == []


def test_www_authenticate_challenge_is_kept_and_headers_get_the_pii_rules() -> None:
    """A WWW-Authenticate challenge is not cut by the bearer rule; a header's email is hashed."""
    r = Redactor(Rules(packs=("pii",), strategy="hash"), salt=b"k")
    challenge = 'Bearer resource_metadata="https://auth.example/.well-known/x", scope="read"'
    out = r.redact_http({"exchange": 1, "path": "/v1/mcp?token=abcdef123456",
                         "headers": {"WWW-Authenticate": challenge, "X-User": EMAIL,
                                     "Authorization": "Bearer abcdefgh12345678"}})
    assert out["headers"]["www-authenticate"] == challenge
    assert re.fullmatch(r"<email:[0-9a-f]{8}>", out["headers"]["x-user"])
    assert out["headers"]["authorization"] == "Bearer [REDACTED]"
    assert out["path"] == "/v1/mcp?token=[REDACTED]"
    assert r.redact_http(out) == out  # idempotent


@pytest.mark.parametrize("value", [
    "ann@example.com", "first.last+tag@mail.example.co.uk", "+44 20 7946 0958",
    "+14155552671", "(415) 555-2671", "415.555.2671", "198.51.100.7", "10.0.0.12",
    "fe80::1ff:fe23:4567:890a", "2001:0db8:0000:0000:0000:ff00:0042:8329", "::ffff:192.0.2.1",
    "FR76 3000 6000 0112 3456 7890 189", "NL91ABNA0417164300", "378282246310005",
    "3782 822463 10005", "4111-1111-1111-1111", "6011111111111117", "219-09-9999",
])
def test_each_kind_is_found_wherever_it_stands(value: str) -> None:
    """Every kind is redacted alone, inside prose, and as a JSON string, by every strategy."""
    for strategy in ("replace", "hash", "mask"):
        r = Redactor(Rules(packs=("pii",), strategy=strategy))
        for text in (value, f"see {value}, then", f"({value})"):
            assert value not in r.redact_text(text), (strategy, text)
            raw = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"v": text}}).encode()
            out = r.redact(raw)
            assert value.encode() not in out, (strategy, text)
            json.loads(out)


@pytest.mark.parametrize("flags", [("--redact-pattern", "q*"), ("--redact-pattern", "(a|)")])
def test_pattern_matching_the_empty_string_is_refused(tmp_path: Path, flags: tuple) -> None:
    """A pattern that matches the empty string would redact between every two characters:
    one line, exit 2, nothing recorded."""
    out = run_mcprec("record", "-c", str(tmp_path / "e.db"), *flags, "--", sys.executable,
                     "-c", "pass", input=b"")
    assert out.returncode == 2
    assert out.stderr.decode().count("\n") == 1 and "empty string" in out.stderr.decode()
    assert not (tmp_path / "e.db").exists()


SECRET_DICT_SERVER = '''
from mcp.server import MCPServer

server = MCPServer("dict-server")


@server.tool(description="Returns a dict: the SDK writes it as JSON text content too.")
def account(user: str) -> dict:
    return {"user": user, "password": "hunter2hunter2", "contact": "ann@example.com"}


if __name__ == "__main__":
    server.run("stdio")
'''


def test_secret_keys_inside_json_text_content_are_redacted(tmp_path: Path) -> None:
    """A tool returning a dict carries it as JSON text too; the password key (a default rule)
    and a user key rule are redacted inside that text as in structured content, and scan then
    finds nothing."""
    server = tmp_path / "dict_server.py"
    server.write_text(SECRET_DICT_SERVER)
    cassette = tmp_path / "c.db"

    async def call(s: Any, run: Any) -> None:
        run.results["r"] = dump(await s.call_tool("account", {"user": "ann"}))

    run = run_client(recorded(cassette, sys.executable, str(server),
                              extra=["--redact-key", "contact"]), call)
    assert "hunter2hunter2" in json.dumps(run.results["r"])  # the client got it in clear
    data = on_disk(cassette)
    assert b"hunter2hunter2" not in data and b"ann@example.com" not in data
    scanned = run_mcprec("scan", str(cassette))
    assert scanned.returncode == 0, scanned.stdout + scanned.stderr


def test_two_phone_numbers_side_by_side_are_both_redacted() -> None:
    """An international number does not run on into the next number's area code, which
    would leave the rest of that number in clear."""
    from mcprec.redact import Redactor, Rules

    text = "+14155552671 (415) 555-2671; +1 (415) 555-2671; +44 20 7946 0958."
    msg = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": text}}).encode()
    out = json.loads(Redactor(Rules(packs=("pii",))).redact(msg))["result"]["text"]
    assert out == "[REDACTED] [REDACTED]; [REDACTED]; [REDACTED].", out


def test_pseudonyms_of_emails_ignore_case_and_windows_paths_stop_at_a_comma() -> None:
    """One person, one token whatever the case of their email; a Windows home path ends at a
    comma as a POSIX one does."""
    from mcprec.redact import Redactor, Rules

    text = "Ann@Example.com, ann@example.com; C:\\Users\\ann\\x.txt, rel"
    msg = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": text}}).encode()
    out = json.loads(Redactor(Rules(packs=("pii", "paths"), strategy="hash"),
                              salt=b"s" * 32).redact(msg))["result"]["text"]
    first, second, path = out.split(", ")[0], out.split(", ")[1].split(";")[0], out.split("; ")[1]
    assert first == second and first.startswith("<email:")
    assert path.startswith("<home:") and out.endswith(", rel")
