"""Export a cassette as deterministic JSON Lines, and import such a dump back.

The dump is stable across runs (same cassette, same bytes out), so it works as a git ``textconv``
driver: cassette changes show up in review as readable line diffs. Lines:

    {"mcprec_export": 1, "format": N}
    {"session": {...}}                       one per session (with its redaction manifest, never
                                             the salt, and how often forwarding waited for the
                                             recorder, a timing left out with --no-timing),
                                             followed by its records:
    {"m": {"seq": ..., "t_ns": ..., "dir": "c2s"|"s2c", "kind": ..., "raw": "<text>"}}
    {"stderr": {"t_ns": ..., "line": "..."}}

``raw`` is the message text; bytes that are not UTF-8 go in ``raw_b64`` instead.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ..cassette import Cassette, Session
from ..record.writer import SessionWriter
from ..errors import CassetteError, UsageError
from ..wire import CLIENT_TO_SERVER, SERVER_TO_CLIENT

EXPORT_VERSION = 1
_DIR_SHORT: dict[str, str] = {CLIENT_TO_SERVER: "c2s", SERVER_TO_CLIENT: "s2c"}
_DIR_LONG = {v: k for k, v in _DIR_SHORT.items()}
_SESSION_FIELDS = (
    "name", "transport", "target", "started_at", "ended_at", "status", "exit_code",
    "protocol_version", "client_info", "server_info", "client_capabilities",
    "server_capabilities", "instructions", "tags", "mcprec_version",
)


def _line(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) + b"\n"


def export_lines(
    cassette: Cassette, sessions: Iterable[Session], *, timing: bool = True
) -> Iterator[bytes]:
    from .. import cassette as cassette_mod

    yield _line({"mcprec_export": EXPORT_VERSION, "format": cassette_mod.FORMAT_VERSION})
    sessions = list(sessions)
    manifests = cassette.redaction_manifests(sessions)
    waited = cassette.backpressure(sessions) if timing else {}
    for s in sessions:
        head = {f: getattr(s, f) for f in _SESSION_FIELDS}
        if s.id in manifests:
            head["redaction"] = manifests[s.id]
        if s.id in waited:
            head["backpressure"] = waited[s.id]
        if not timing:
            for f in ("started_at", "ended_at"):
                head.pop(f)
        yield _line({"session": head})
        for m in cassette.messages(s):
            rec: dict[str, Any] = {"seq": m.seq, "dir": _DIR_SHORT[m.direction], "kind": m.kind}
            if timing:
                rec["t_ns"] = m.t_ns
            try:
                rec["raw"] = m.raw.decode("utf-8")
            except UnicodeDecodeError:
                rec["raw_b64"] = base64.b64encode(m.raw).decode()
            if m.http:
                rec["http"] = m.http
            yield _line({"m": rec})
        for e in cassette.stderr(s):
            rec = {"line": e.line}
            if timing:
                rec["t_ns"] = e.t_ns
            yield _line({"stderr": rec})


def export_to(out: IO[bytes], cassette: Cassette, sessions: Iterable[Session], *,
              timing: bool = True) -> None:
    for line in export_lines(cassette, sessions, timing=timing):
        out.write(line)


def import_dump(
    lines: Iterable[bytes], path: str | os.PathLike[str], *, replace: bool = False,
    source: str = "<dump>",
) -> list[str]:
    """Read an export into the cassette at ``path`` (created if missing). Returns session names.

    Every record is checked before anything is written: a bad one is a ``UsageError`` naming
    its line, and the cassette is left as it was (not even created)."""
    lines = list(lines)
    for lineno, line in enumerate(lines, 1):
        _check_record(line, lineno, source)
    cassette = Cassette.open(Path(path), create=True)
    names: list[str] = []
    writer: SessionWriter | None = None
    status: dict[str, Any] = {}
    try:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise UsageError(f"{source}:{lineno}: not JSON ({e}); is this an mcprec export?")
            if not isinstance(obj, dict):
                raise UsageError(f"{source}:{lineno}: expected a JSON object")
            if "mcprec_export" in obj:
                if obj["mcprec_export"] > EXPORT_VERSION:
                    raise UsageError(
                        f"{source}: export version {obj['mcprec_export']} is newer than this "
                        "mcprec reads; upgrade mcprec"
                    )
            elif "session" in obj:
                if writer is not None:
                    _finish(writer, status)
                writer, status = _start_session(cassette, obj["session"], replace, source, lineno)
                names.append(writer.session.name)
            elif "m" in obj or "stderr" in obj:
                if writer is None:
                    raise UsageError(f"{source}:{lineno}: a record before any session line")
                if "m" in obj:
                    rec = obj["m"]
                    raw = (
                        base64.b64decode(rec["raw_b64"]) if "raw_b64" in rec
                        else rec["raw"].encode("utf-8")
                    )
                    direction = _DIR_LONG.get(rec.get("dir", ""))
                    if direction is None:
                        raise UsageError(f"{source}:{lineno}: unknown direction {rec.get('dir')!r}")
                    writer.message(direction, raw, int(rec.get("t_ns", 0)), rec.get("http"))
                else:
                    rec = obj["stderr"]
                    writer.stderr_line(rec["line"].encode("utf-8"), int(rec.get("t_ns", 0)))
            else:
                raise UsageError(f"{source}:{lineno}: unknown record {sorted(obj)[:3]}")
        if writer is not None:
            _finish(writer, status)
            writer = None
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, UsageError):
            raise
        raise UsageError(f"{source}: malformed export record ({e!r})") from e
    finally:
        if writer is not None:
            writer.close(status="incomplete")
        cassette.close()
    return names


_MAX_T_NS = (1 << 63) - 1


def _check_record(line: bytes, lineno: int, source: str) -> None:
    """One line of an export, checked as ``import_dump`` will read it (``UsageError``)."""
    if not line.strip():
        return
    where = f"{source}:{lineno}"
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise UsageError(f"{where}: not JSON ({e}); is this an mcprec export?") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object")
    if "mcprec_export" in obj:
        if type(obj["mcprec_export"]) is not int:
            raise UsageError(f"{where}: mcprec_export must be a version number")
        return
    if "session" in obj:
        if not isinstance(obj["session"], dict):
            raise UsageError(f"{where}: session must be a JSON object")
        return
    kind = "m" if "m" in obj else "stderr" if "stderr" in obj else None
    if kind is None:
        return  # said by the import: unknown record
    rec = obj[kind]
    if not isinstance(rec, dict):
        raise UsageError(f"{where}: {kind} must be a JSON object")
    t_ns = rec.get("t_ns", 0)
    if type(t_ns) is not int or not 0 <= t_ns <= _MAX_T_NS:
        raise UsageError(f"{where}: t_ns must be a whole number of nanoseconds from 0 to "
                         f"2^63-1, got {t_ns!r}")
    if kind == "stderr":
        if not isinstance(rec.get("line"), str):
            raise UsageError(f"{where}: stderr line must be a string")
        return
    if "raw_b64" in rec:
        try:
            base64.b64decode(rec["raw_b64"], validate=True)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: raw_b64 must be base64 text") from None
    elif not isinstance(rec.get("raw"), str):
        raise UsageError(f"{where}: raw must be a string (or raw_b64 base64 text), got "
                         f"{type(rec.get('raw')).__name__}")
    if rec.get("dir") not in _DIR_LONG:
        raise UsageError(f"{where}: unknown direction {rec.get('dir')!r}")
    if rec.get("http") is not None and not isinstance(rec["http"], dict):
        raise UsageError(f"{where}: http must be a JSON object or null")


def _start_session(
    cassette: Cassette, head: dict[str, Any], replace: bool, source: str, lineno: int
) -> tuple[SessionWriter, dict[str, Any]]:
    name = head.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{source}:{lineno}: session line without a name")
    existing = {s.name for s in cassette.sessions()}
    if name in existing:
        if not replace:
            raise CassetteError(
                f"cassette {cassette.path} already has a session {name!r}; use --replace"
            )
        cassette.delete_session(name)
    session = cassette.create_session(
        name, transport=head.get("transport") or "stdio", target=head.get("target"),
        tags=head.get("tags") or {}, started_at=head.get("started_at"),
    )
    writer = SessionWriter(cassette, session, own_cassette=False)
    waited = head.get("backpressure")
    if isinstance(waited, dict):
        try:
            cassette.set_backpressure(session, pauses=int(waited["pauses"]),
                                      paused_ms=int(waited["paused_ms"]),
                                      bound_bytes=int(waited["bound_bytes"]))
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"{source}:{lineno}: session {name!r}: backpressure needs integer "
                             "pauses, paused_ms and bound_bytes") from None
    manifest = head.get("redaction")
    if isinstance(manifest, dict):
        cassette.set_redaction_manifest(session, manifest)
        if manifest.get("salt") == "cassette" and cassette.redaction_salt() is None:
            from .. import _log

            _log.warning("import", f"session {name!r} was hashed with its cassette's salt, which "
                         "exports leave out: replayed requests holding redacted values will not "
                         "match (record with $MCPREC_REDACT_SALT to carry pseudonyms across)")
    return writer, head


def _finish(writer: SessionWriter, head: dict[str, Any]) -> None:
    writer.close(exit_code=head.get("exit_code"), status=head.get("status") or "complete")
    if writer.error is not None:
        raise CassetteError(f"import into {writer.cassette.path} failed: {writer.error}")
    # restore what the original recorder saw, even where the dump's messages were redacted
    fields = ("ended_at", "protocol_version", "client_info", "server_info",
              "client_capabilities", "server_capabilities", "instructions", "mcprec_version")
    writer.cassette.update_session(writer.session, **{f: head.get(f) for f in fields})


# --- looking into a session: `mcprec show --method --grep --tools` ----------------------------


def message_filter(methods: Iterable[str], grep: str | None) -> Any:
    """``keep(message) -> bool`` for ``show --method GLOB --grep REGEX`` (both must hold), or
    None when there is nothing to filter. Raises ValueError for a bad regular expression."""
    import fnmatch
    import re

    globs = [g for g in methods if g]
    pattern = None
    if grep is not None:
        try:
            pattern = re.compile(grep.encode("utf-8"))
        except re.error as e:
            raise UsageError(f"not a regular expression: {grep!r} ({e})") from None
    if not globs and pattern is None:
        return None

    def keep(m: Any) -> bool:
        if globs and not any(fnmatch.fnmatchcase(m.method or "", g) for g in globs):
            return False
        return pattern is None or pattern.search(m.raw) is not None

    return keep


def session_tools(c: Cassette, session: Session) -> list[dict[str, Any]]:
    """The tools the server listed in ``session`` (every tools/list answer and page, in order;
    a tool listed again keeps its place and takes its latest definition), each as
    ``{name, description, input, inputSchema}`` where ``input`` is the schema in short."""
    tools: dict[str, dict[str, Any]] = {}
    for m in c.messages(session, kinds=("response",)):
        if m.method != "tools/list" or m.direction != SERVER_TO_CLIENT:
            continue
        result = m.json.get("result") if isinstance(m.json, dict) else None
        listed = result.get("tools") if isinstance(result, dict) else None
        for tool in listed if isinstance(listed, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                schema = tool.get("inputSchema")
                tools[tool["name"]] = {"name": tool["name"],
                                       "description": tool.get("description") or "",
                                       "input": schema_summary(schema),
                                       "inputSchema": schema}
    return list(tools.values())


def schema_summary(schema: Any) -> str:
    """``city: string, days?: integer``: a JSON schema's properties, ``?`` when optional."""
    if not isinstance(schema, dict):
        return ""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return ""
    listed = schema.get("required")
    required = listed if isinstance(listed, list) else []
    return ", ".join(f"{name}{'' if name in required else '?'}: {_type_of(p)}"
                     for name, p in props.items())


def _type_of(prop: Any) -> str:
    if not isinstance(prop, dict):
        return "any"
    if "enum" in prop and isinstance(prop["enum"], list):
        return "|".join(orjson.dumps(v).decode() for v in prop["enum"][:6]) + (
            "|…" if len(prop["enum"]) > 6 else "")
    t = prop.get("type")
    if isinstance(t, list):
        return "|".join(str(x) for x in t)
    if t == "array":
        return f"array<{_type_of(prop.get('items'))}>" if prop.get("items") else "array"
    if isinstance(t, str):
        return t
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return "|".join(_type_of(p) for p in prop[key])
    return "any"


def tool_line(tool: dict[str, Any], width: int = 100) -> str:
    """``name(input)`` and, indented below, the first line of the description."""
    text = str(tool.get("description") or "").strip().splitlines()
    first = text[0] if text else ""
    if len(first) > width:
        first = first[: width - 1] + "…"
    head = f"{tool['name']}({tool.get('input', '')})"
    return f"{head}\n    {first}" if first else head
