"""The redaction manifest: a session keeps the rules that redacted it, so that replay, verify,
redact and scan apply them again without flags; the salt of pseudonyms stays in the cassette,
never printed; ``scan --require-redaction`` is the CI gate. Real servers, real processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.helpers import MCPREC, run_client, run_mcprec, sqlite
from test_redact_packs import EMAIL, PII, PII_SERVER, _calls, answer, on_disk, record_pii


def replay_calls(cassette: Path, *flags: str, env: dict[str, str] | None = None) -> dict:
    """The pii calls played against ``mcprec replay CASSETTE FLAGS``: what the client got."""
    return run_client([*MCPREC, "replay", str(cassette), *flags], _calls, env=env).results


def manifest(cassette: Path) -> dict:
    with sqlite(cassette) as conn:
        return json.loads(conn.execute("SELECT manifest FROM session_redaction").fetchone()[0])


def salt(cassette: Path) -> bytes | None:
    with sqlite(cassette) as conn:
        row = conn.execute("SELECT salt FROM redaction_salt").fetchone()
    return None if row is None else bytes(row[0])


def test_replay_with_no_flags_applies_the_recorded_rules(tmp_path: Path) -> None:
    """Hashed pii requests match in replay without repeating a flag, fast path and full CLI."""
    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "hash")
    m = manifest(cassette)
    assert m["packs"] == ["credentials", "pii"] and m["strategy"] == "hash"
    assert m["salt"] == "cassette" and len(salt(cassette) or b"") == 32
    for flags in ((), ("--strict-order",)):  # the click-free entry, then the full command line
        got = replay_calls(cassette, *flags)
        token = got["lookup"]["structuredContent"]["asked"]
        assert token.startswith("<email:") and EMAIL not in json.dumps(got)
        assert got["account"]["content"][0]["text"].startswith("account <iban:")
    # without the manifest's rules the same client would not match: prove the manifest is used
    with sqlite(cassette) as conn:
        conn.execute("DELETE FROM session_redaction")
    plain = run_client([*MCPREC, "replay", str(cassette), "--report", str(tmp_path / "r.json")],
                       _lookup_only)
    assert plain.results["error"], "a clear email cannot match a hashed recording"


async def _lookup_only(s, run) -> None:
    from mcp.shared.exceptions import MCPError

    try:
        await s.call_tool("lookup_customer", {"email": EMAIL})
    except MCPError as e:
        run.results["error"] = "no recorded response matches" in str(e)
    else:
        run.results["error"] = False


def test_manifest_is_printed_and_the_salt_never(tmp_path: Path) -> None:
    """sessions --json and show print the manifest; no output shows the salt."""
    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-pack", "paths",
               "--redact-strategy", "hash", "--redact-env", "CRM_DB_HOST",
               env={"CRM_DB_HOST": "db7.internal.example"})
    listed = run_mcprec("sessions", str(cassette), "--json")
    assert listed.returncode == 0, listed.stderr
    red = json.loads(listed.stdout)[0]["redaction"]
    assert red["packs"] == ["credentials", "pii", "paths"]
    assert red["env_names"] == ["CRM_DB_HOST"] and red["salt"] == "cassette"
    shown = run_mcprec("show", str(cassette), "--body")
    assert b"redaction credentials, pii, paths (hash)" in shown.stdout
    key = salt(cassette)
    assert key is not None
    exported = run_mcprec("export", str(cassette))
    for out in (listed.stdout, shown.stdout, exported.stdout):
        assert key.hex().encode() not in out and key not in out
        assert b"db7.internal.example" not in out
    assert b"db7.internal.example" not in on_disk(cassette)


def test_user_pack_file_missing_or_changed_is_a_one_line_error(tmp_path: Path) -> None:
    """Replay, redact and scan name the user pack whose file is gone or differs, and exit 2."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "crm.toml").write_text('[[rules]]\nkind = "customer"\npattern = "CUST-[0-9]{6}"\n')
    cassette = work / "c.db"
    run_client([*MCPREC, "record", "-c", str(cassette), "-s", "s1", "--redact-pack", "crm.toml",
                "--", *PII_SERVER], _calls, cwd=work)
    m = manifest(cassette)
    assert m["packs"] == ["credentials", "crm"]
    assert m["user_packs"][0]["file"] == "crm.toml" and len(m["user_packs"][0]["sha256"]) == 64
    assert "CUST-004211" not in json.dumps(answer(cassette, "lookup_customer"))
    # found next to the cassette from elsewhere too: replay matches
    assert replay_calls(cassette)["lookup"]["structuredContent"]["asked"] == EMAIL
    shutil.move(work / "crm.toml", tmp_path / "elsewhere.toml")
    for args in (("replay", str(cassette)), ("redact", str(cassette)), ("scan", str(cassette))):
        r = run_mcprec(*args, input=b"")
        err = r.stderr.decode().strip()
        assert r.returncode == 2, (args, err)
        assert len(err.splitlines()) == 1 and "crm.toml not found" in err, err
        assert "Traceback" not in err
    (work / "crm.toml").write_text('[[rules]]\npattern = "CUST-[0-9]{5}"\n')
    r = run_mcprec("replay", str(cassette), input=b"")
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "crm.toml differs" in err, err


def test_scan_require_redaction_is_the_ci_gate(tmp_path: Path) -> None:
    """scan --require-redaction PACK exits 1 for a session not redacted by PACK, 0 once it is."""
    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", session="with-pii")
    ok = run_mcprec("scan", str(cassette), "--require-redaction", "pii")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    record_pii(cassette, session="plain")
    gate = run_mcprec("scan", str(cassette), "--require-redaction", "pii")
    said = gate.stdout.decode()
    assert gate.returncode == 1
    assert "session 'plain': not redacted with pack pii" in said and "with-pii" not in said
    assert "email address" in said  # and the scan, with the pii rules, finds what was left
    fixed = run_mcprec("redact", str(cassette), "--redact-pack", "pii")
    assert fixed.returncode == 0, fixed.stderr
    assert EMAIL.encode() not in on_disk(cassette)
    again = run_mcprec("scan", str(cassette), "--require-redaction", "pii",
                       "--require-redaction", "credentials")
    assert again.returncode == 0, again.stdout + again.stderr
    assert manifest_of(cassette, "plain")["packs"] == ["credentials", "pii"]
    # the redacted session still replays without flags
    got = replay_calls(cassette, "-s", "plain")
    assert got["lookup"]["structuredContent"]["asked"] == "[REDACTED]"


def manifest_of(cassette: Path, name: str) -> dict:
    with sqlite(cassette) as conn:
        return json.loads(conn.execute(
            "SELECT manifest FROM session_redaction JOIN sessions ON sessions.id = session_id "
            "WHERE name = ?", (name,)).fetchone()[0])


def test_cassette_from_before_manifests_replays_as_before(tmp_path: Path) -> None:
    """A format-3 cassette (no manifest tables) is migrated, replays, and fails the gate."""
    cassette = tmp_path / "old.db"
    record_pii(cassette)
    with sqlite(cassette) as conn:  # make it what an older mcprec wrote
        conn.executescript(
            "DROP TABLE session_redaction; DROP TABLE redaction_salt; "
            "DELETE FROM migrations WHERE name = '0004_redaction_manifest'; "
            "UPDATE meta SET value = '3' WHERE key = 'format_version'; PRAGMA user_version = 3;")
    got = replay_calls(cassette)
    assert got["lookup"]["structuredContent"]["asked"] == EMAIL
    listed = json.loads(run_mcprec("sessions", str(cassette), "--json").stdout)
    assert listed[0]["redaction"] is None
    gate = run_mcprec("scan", str(cassette), "--require-redaction", "credentials")
    assert gate.returncode == 1 and b"no redaction manifest" in gate.stdout


def test_redact_in_place_applies_the_manifest_and_changes_nothing_twice(tmp_path: Path) -> None:
    """`mcprec redact` with no flags re-applies the hashed session's rules: 0 rows change."""
    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "hash")
    before = answer(cassette, "lookup_customer")
    r = run_mcprec("redact", str(cassette))
    assert r.returncode == 0 and b"redacted 0 row(s)" in r.stderr, r.stderr
    assert answer(cassette, "lookup_customer") == before
    assert replay_calls(cassette)["lookup"]["structuredContent"]["asked"].startswith("<email:")


def test_verify_redacts_the_new_run_with_the_recorded_rules(tmp_path: Path) -> None:
    """verify without flags hashes the new run as the recording was: the two compare equal."""
    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "hash")
    v = run_mcprec("verify", str(cassette), "--", *PII_SERVER, timeout=120)
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()
    with sqlite(cassette) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sessions ORDER BY id")]
    assert len(names) == 2
    assert manifest_of(cassette, names[1])["packs"] == ["credentials", "pii"]
    for value in PII.values():
        assert value.encode() not in on_disk(cassette)


def test_env_salt_keys_pseudonyms_across_cassettes_and_is_required(tmp_path: Path) -> None:
    """$MCPREC_REDACT_SALT: no salt stored, equal tokens in two cassettes, needed to replay."""
    env = {"MCPREC_REDACT_SALT": "team-salt-0001"}
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for c in (a, b):
        record_pii(c, "--redact-pack", "pii", "--redact-strategy", "hash", env=env)
    assert manifest(a)["salt"] == "env" and salt(a) is None
    token = answer(a, "lookup_customer")["structuredContent"]["asked"]
    assert token == answer(b, "lookup_customer")["structuredContent"]["asked"]
    missing = run_mcprec("replay", str(a), input=b"")
    err = missing.stderr.decode().strip()
    assert missing.returncode == 2 and "MCPREC_REDACT_SALT" in err and len(err.splitlines()) == 1
    assert replay_calls(a, env=env)["lookup"]["structuredContent"]["asked"] == token
    assert PII["email"].encode() not in on_disk(a)


def test_replay_of_a_default_recording_loads_no_redaction_machinery(tmp_path: Path) -> None:
    """A session recorded with the defaults: replay imports neither the manifest nor the packs."""
    import subprocess
    import sys

    import orjson

    from mcprec.cassette.store import DEFAULT_REDACTION_MANIFEST
    from mcprec.redact import Rules

    assert orjson.dumps(Rules().manifest(), option=orjson.OPT_SORT_KEYS).decode() == \
        DEFAULT_REDACTION_MANIFEST
    cassette = tmp_path / "c.db"
    record_pii(cassette)
    assert manifest(cassette)["packs"] == ["credentials"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcp", "version": "0.1.0"}}}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcprec", "replay",
                        str(cassette)], input=json.dumps(init).encode() + b"\n",
                       capture_output=True, timeout=60, check=False)
    assert b'"id":1' in p.stdout, p.stderr
    assert b"mcprec.redact.manifest" not in p.stderr and b"mcprec.redact.packs" not in p.stderr


def test_http_proxy_hashes_headers_and_bodies_alike_and_replay_matches(tmp_path: Path) -> None:
    """Through the recording proxy, an email in a header and in a call gets one pseudonym;
    `replay --http` with no flags matches the call."""
    import re

    from support.http_helpers import run_http_session, run_sync, start_proxy, start_replay, \
        start_sdk_http

    cassette = tmp_path / "http.db"

    async def call(s, run) -> None:
        run.results["echo"] = dump_result(await s.call_tool("echo", {"text": f"mail {EMAIL}"}))

    upstream = start_sdk_http()
    proxy = start_proxy(upstream.url, cassette, "web",
                        extra=["--redact-pack", "pii", "--redact-strategy", "hash"])
    try:
        got = run_sync(lambda: run_http_session(proxy.url, call,
                                                headers={"X-User-Email": EMAIL}))
    finally:
        proxy.stop()
        upstream.stop()
    assert EMAIL in json.dumps(got.results["echo"])
    assert EMAIL.encode() not in on_disk(cassette)
    with sqlite(cassette) as conn:
        rows = [(bytes(r[0]).decode(), json.loads(r[1])) for r in conn.execute(
            "SELECT raw, http FROM messages WHERE method = 'tools/call' AND kind = 'request'")]
    raw, http = rows[0]
    token = re.search(r"<email:[0-9a-f]{8}>", raw).group(0)
    assert http["headers"]["x-user-email"] == token
    replay = start_replay(cassette)
    try:
        again = run_sync(lambda: run_http_session(replay.url, call))
    finally:
        replay.stop()
    assert f"mail {token}" in json.dumps(again.results["echo"])


def dump_result(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_unset=True)


def test_export_and_import_carry_the_manifest_never_the_salt(tmp_path: Path) -> None:
    """An export holds each session's manifest (not the salt); importing it restores the
    manifest, so a replay of the import applies the recorded rules with no flags."""
    env = {"MCPREC_REDACT_SALT": "team-salt-0002"}
    source, copy = tmp_path / "a.db", tmp_path / "b.db"
    record_pii(source, "--redact-pack", "pii", "--redact-strategy", "hash", env=env)
    dump = tmp_path / "a.jsonl"
    assert run_mcprec("export", str(source), "-o", str(dump)).returncode == 0
    head = json.loads(dump.read_text().splitlines()[1])["session"]
    assert head["redaction"] == manifest(source)
    assert b"team-salt" not in dump.read_bytes()
    imported = run_mcprec("import", str(dump), str(copy))
    assert imported.returncode == 0, imported.stderr
    assert manifest(copy) == manifest(source)
    got = replay_calls(copy, env=env)
    assert got["lookup"]["structuredContent"]["asked"].startswith("<email:")


def test_import_of_a_cassette_salted_session_says_pseudonyms_will_not_match(
        tmp_path: Path) -> None:
    """A session hashed with its cassette's own salt imports with a one-line warning: the
    salt stays behind, so redacted requests cannot match in the copy."""
    source, copy = tmp_path / "a.db", tmp_path / "b.db"
    record_pii(source, "--redact-pack", "pii", "--redact-strategy", "hash")
    dump = tmp_path / "a.jsonl"
    assert run_mcprec("export", str(source), "-o", str(dump)).returncode == 0
    imported = run_mcprec("import", str(dump), str(copy))
    assert imported.returncode == 0
    warned = [ln for ln in imported.stderr.decode().splitlines() if "leave out" in ln]
    assert len(warned) == 1 and "MCPREC_REDACT_SALT" in warned[0]
    assert salt(copy) is None


def test_new_episodes_appends_live_traffic_redacted_by_the_manifest(tmp_path: Path) -> None:
    """replay --mode new_episodes appends what the live server said redacted as the session
    was (hash pseudonyms keyed by the same salt), so a later plain replay matches it."""
    from test_redact_packs import PII_SERVER

    cassette = tmp_path / "c.db"
    record_pii(cassette, "--redact-pack", "pii", "--redact-strategy", "hash")
    other = "carol.new@example.org"

    async def lookup_other(s, run) -> None:
        run.results["r"] = (await s.call_tool("lookup_customer", {"email": other})).model_dump()

    live = run_client([*MCPREC, "replay", str(cassette), "--mode", "new_episodes", "--",
                       *PII_SERVER], lookup_other)
    assert other in json.dumps(live.results["r"])  # the client got the live answer in clear
    assert other.encode() not in on_disk(cassette)
    for value in PII.values():
        assert str(value).encode() not in on_disk(cassette)
    again = run_client([*MCPREC, "replay", str(cassette)], lookup_other)
    assert again.results["r"]["structured_content"]["asked"].startswith("<email:")


def test_diff_of_two_cassettes_hashed_with_their_own_salts_says_why_they_differ(
        tmp_path: Path) -> None:
    """Each cassette's own salt gives the same email another pseudonym: the diff says so and
    names the way out ($MCPREC_REDACT_SALT)."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for c in (a, b):
        record_pii(c, "--redact-pack", "pii", "--redact-strategy", "hash")
    out = run_mcprec("diff", str(a), str(b))
    assert out.returncode == 1
    assert "MCPREC_REDACT_SALT" in out.stdout.decode()


def test_an_edited_user_pack_given_again_is_the_way_forward(tmp_path: Path) -> None:
    """After a user pack is edited, `redact --redact-pack FILE` re-redacts the cassette with
    the new version and records its hash; replay then runs with no flags again."""
    work = tmp_path / "project"
    work.mkdir()
    pack = work / "crm.toml"
    pack.write_text('[[rules]]\nkind = "customer"\npattern = "CUST-[0-9]{6}"\n')
    cassette = work / "c.db"
    run_client([*MCPREC, "record", "-c", str(cassette), "-s", "s1", "--redact-pack", "crm.toml",
                "--", *PII_SERVER], _calls, cwd=work)
    old = manifest(cassette)["user_packs"][0]["sha256"]
    pack.write_text('[[rules]]\nkind = "customer"\npattern = "CUST-[0-9]{6}"\n\n'
                    '[[rules]]\nkind = "order"\npattern = "ORD-[0-9]{4}"\n')
    refused = run_mcprec("replay", str(cassette), input=b"")
    assert refused.returncode == 2 and "--redact-pack" in refused.stderr.decode()
    redone = run_mcprec("redact", str(cassette), "--redact-pack", str(pack))
    assert redone.returncode == 0, redone.stderr
    new = manifest(cassette)["user_packs"]
    assert len(new) == 1 and new[0]["sha256"] not in (old, "")
    assert replay_calls(cassette)["lookup"]["structuredContent"]["asked"] == EMAIL
