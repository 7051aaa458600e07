"""Whole-cassette operations: redact in place, and scan for secrets left behind."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from .. import wire
from ..errors import NotACassetteError
from ..cassette import plan
from .urls import redact_target
from ..cassette.store import Cassette
from ..cassette.models import text_bytes
from ..cassette.connect import translated_errors, write_transaction


class _Redactor(Protocol):
    def redact(self, raw: bytes) -> bytes: ...

    def redact_text(self, text: str) -> str: ...

    def redact_value(self, value: Any) -> Any: ...

    def scan(self, raw: bytes) -> list[str]: ...

    def redact_headers(self, headers: Any) -> dict[str, str]: ...

    def scan_headers(self, headers: Any) -> list[str]: ...


@dataclass(frozen=True)
class Finding:
    where: str
    """e.g. ``session 'x' message 12``, ``session 'x' stderr``, ``file bytes (free pages)``."""
    kinds: tuple[str, ...]


def redact_cassette(path: str | os.PathLike[str], redactor: _Redactor) -> int:
    """Apply ``redactor``, with the rules of each session's redaction manifest, to every stored
    message, stderr line and session field, in place; record the rules applied in each
    session's manifest; then checkpoint the WAL and VACUUM so nothing lingers in free pages.
    Returns the number of rows changed."""
    from .manifest import for_recording, session_redactor

    changed = 0
    with Cassette.open(path) as c, translated_errors(path):
        conn = c.connection
        conn.execute("PRAGMA secure_delete = ON")
        with write_transaction(conn):
            per: dict[int, Any] = {}
            manifests: dict[int, Any] = {}
            for s in c.sessions():
                per[s.id], manifests[s.id] = for_recording(
                    session_redactor(redactor, c, [s]) or redactor, c)
            rows = conn.execute(
                "SELECT id, session_id, raw, http, kind, method FROM messages").fetchall()
            updates = []
            for mid, sid, raw, http, kind, method in rows:
                r = per.get(sid, redactor)
                raw = text_bytes(raw)
                new = r.redact(raw)
                new_http = _redact_http(http, r) if http else http
                if new != raw or new_http != http:
                    key = None
                    if kind == wire.REQUEST and method:
                        obj = wire.classify(new).obj
                        key = wire.match_key(method, obj.get("params") if isinstance(obj, dict)
                                             else None)
                    updates.append((new, len(new), new_http, key, mid))
            conn.executemany(
                "UPDATE messages SET raw = ?, size = ?, http = ?, "
                "match_key = coalesce(?, match_key) WHERE id = ?",
                updates,
            )
            changed += len(updates)
            err_updates = []
            for i, sid, line in conn.execute("SELECT id, session_id, line FROM stderr"):
                new_line = per.get(sid, redactor).redact_text(line)
                if new_line != line:
                    err_updates.append((new_line, i))
            conn.executemany("UPDATE stderr SET line = ? WHERE id = ?", err_updates)
            changed += len(err_updates)
            changed += _redact_sessions(conn, per, redactor)
            for sid, manifest in manifests.items():
                if manifest is not None:
                    c.set_redaction_manifest(sid, manifest)
            if c.planned:  # the plans of the sessions changed (dropped by triggers), redacted
                plan.build_ended(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return changed


def _redact_http(http_text: str, redactor: _Redactor) -> str:
    """A message's HTTP details with the header rules applied, then the message rules; the text
    unchanged when nothing in it is a secret."""
    try:
        http = orjson.loads(http_text)
    except orjson.JSONDecodeError:
        return redactor.redact_text(http_text)
    if isinstance(http, dict) and isinstance(http.get("headers"), dict):
        headers = redactor.redact_headers(http["headers"].items())
        if headers != http["headers"]:
            http["headers"] = headers
            http_text = orjson.dumps(http).decode()
    return redactor.redact_text(http_text)


def _redact_sessions(conn: Any, per: dict[int, Any], default: _Redactor) -> int:
    cols = ("target", "client_info", "server_info", "client_capabilities", "server_capabilities",
            "tags")
    changed = 0
    for row in conn.execute(f"SELECT id, {', '.join(cols)} FROM sessions").fetchall():
        sid, values = row[0], row[1:]
        redactor = per.get(sid, default)
        new_values: list[str | None] = []
        for c, v in zip(cols, values):
            if v is None:
                new_values.append(v)
                continue
            try:
                found = orjson.loads(v)
            except orjson.JSONDecodeError as e:  # the schema holds JSON: only damage reads so
                raise NotACassetteError(
                    f"the cassette is corrupt: session #{sid} has a damaged {c} column ({e}); "
                    "restore it from a good copy") from e
            parsed = redactor.redact_value(found)
            new_values.append(orjson.dumps(redact_target(parsed) if c == "target" else parsed
                                           ).decode())
        if list(values) != new_values:
            conn.execute(f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                         (*new_values, sid))
            changed += 1
    return changed


def scan_cassette(path: str | os.PathLike[str], redactor: _Redactor,
                  require: tuple[str, ...] = ()) -> list[Finding]:
    """Likely secrets left in a cassette: in its rows (each session scanned with the rules of
    its redaction manifest too), and in the raw file bytes (WAL and free pages included, where
    deleted data can linger). ``require``: packs every session's manifest must name (a
    session not redacted with one of them is a finding); a bundled one is also scanned for."""
    from .manifest import session_redactor

    bundled = tuple(p for p in require if p in ("pii", "paths"))
    rules = getattr(redactor, "rules", None)
    if bundled and rules is not None:  # a pack required is a pack scanned for
        from . import Redactor, Rules

        redactor = Redactor(rules.merged(Rules(packs=bundled)))
    findings: list[Finding] = []
    with Cassette.open(path, read_only=True) as c:
        sessions = c.sessions()
        manifests = c.redaction_manifests()
        for s in sessions:
            if require:
                done = (manifests.get(s.id) or {}).get("packs") or []
                missing = [p for p in require if p not in done]
                if missing:
                    how = f"redacted with {', '.join(done)}" if s.id in manifests else \
                        "no redaction manifest (recorded before manifests, or unredacted)"
                    findings.append(Finding(
                        f"session {s.name!r}",
                        (f"not redacted with pack {', '.join(missing)} ({how}); run `mcprec "
                         f"redact --redact-pack {missing[0]} CASSETTE`",)))
            r = session_redactor(redactor, c, [s], salted=False) or redactor
            for m in c.messages(s):
                kinds = r.scan(m.raw)
                if m.http:
                    kinds += [k for k in r.scan(orjson.dumps(m.http)) if k not in kinds]
                    if isinstance(m.http.get("headers"), dict):
                        kinds += r.scan_headers(m.http["headers"])
                if kinds:
                    findings.append(Finding(
                        f"session {s.name!r} message {m.seq} ({m.method or m.kind})", tuple(kinds)))
            for e in c.stderr(s):
                kinds = r.scan(e.line.encode())
                if kinds:
                    findings.append(Finding(f"session {s.name!r} stderr line", tuple(kinds)))
            if redact_target(s.target) != s.target:  # a secret-named argument, a URL's secret
                findings.append(Finding(f"session {s.name!r} target", ("secret in the target",)))
            head = orjson.dumps({"target": s.target, "tags": s.tags, "client": s.client_info,
                                 "server": s.server_info})
            kinds = r.scan(head)
            if kinds:
                findings.append(Finding(f"session {s.name!r} metadata", tuple(kinds)))
        whole = session_redactor(redactor, c, sessions, salted=False) or redactor
    if not findings:
        for where, chunk in _file_chunks(Path(path)):
            kinds = whole.scan(chunk)
            if kinds:
                findings.append(Finding(f"{where} (deleted data left on disk; run `mcprec redact`)",
                                        tuple(kinds)))
    return findings


def _file_chunks(path: Path) -> Iterator[tuple[str, bytes]]:
    for suffix, label in (("", "cassette file bytes"), ("-wal", "WAL file bytes")):
        p = Path(str(path) + suffix)
        if not p.exists():
            continue
        data = p.read_bytes()
        # printable runs only: secrets are text; binary page structure is noise
        text = b"\n".join(re.findall(rb"[\x20-\x7e]{8,}", data))
        yield label, text
