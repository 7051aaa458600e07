"""One reader per tool: the text of its file -> a ``Foreign`` recording. The formats, what each
keeps and how it maps onto messages: docs/import.md. A reader raises ``UsageError`` for a file
that is not of its tool, or lets ``KeyError``/``TypeError``/``ValueError`` through, which
``foreign.read`` says the same way."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from ..errors import UsageError
from . import C2S, S2C, Foreign

MS = 1_000_000
STEP = MS
"""The gap put between messages whose format keeps no time of their own (1 ms)."""


def _json(text: str, where: str, tool: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise UsageError(f"{where}: not JSON ({e}); is this a {tool} recording?") from None


def _object(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {what} must be a JSON object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise UsageError(f"{where}: {what} must be a list, got {type(value).__name__}")
    return value


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(value: Any) -> str | None:
    t = _time(value)
    return t.isoformat() if t is not None else None


# --- mcp-cassette: a JSON object with every message, in order ------------------------------------


def mcp_cassette(text: str, where: str) -> Foreign:
    doc = _object(_json(text, where, "mcp-cassette"), where, "an mcp-cassette cassette")
    if "messages" not in doc or "format_version" not in doc:
        raise UsageError(f"{where}: no format_version and messages; is this an mcp-cassette "
                         "cassette?")
    rec = Foreign("mcp-cassette", lost="byte-exact text (messages are stored parsed, times in "
                  "ms), HTTP headers and stderr")
    rec.started_at = _iso(doc.get("recorded_at"))
    rec.source_transport = doc.get("transport") or "stdio"
    if doc.get("server_url"):
        rec.target = [str(doc["server_url"])]
    for i, m in enumerate(_list(doc["messages"], where, "messages")):
        m = _object(m, where, f"messages[{i}]")
        sender = m["sender"]
        if sender not in ("client", "server"):
            raise UsageError(f"{where}: messages[{i}]: unknown sender {sender!r}")
        payload = m["payload"]
        rec.add(C2S if sender == "client" else S2C, payload, int(m.get("t_offset_ms") or 0) * MS)
    return rec


# --- mcp-vcr: YAML (or NDJSON) transcript, {t, dir, payload} -------------------------------------


def mcp_vcr(text: str, where: str) -> Foreign:
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith("{"):  # the NDJSON variant: a meta line, then one message a line
        lines = [_json(x, where, "mcp-vcr") for x in text.splitlines() if x.strip()]
        meta = next((x for x in lines if isinstance(x, dict) and x.get("_type") == "meta"), {})
        messages = [x for x in lines if not (isinstance(x, dict) and "_type" in x)]
    else:
        try:
            import yaml
        except ImportError:
            raise UsageError("reading an mcp-vcr YAML transcript needs PyYAML (pip install "
                             "pyyaml), or convert it to NDJSON") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UsageError(f"{where}: not YAML ({str(e).splitlines()[0]}); is this an "
                             "mcp-vcr transcript?") from None
        doc = _object(doc, where, "an mcp-vcr transcript")
        if "messages" not in doc:
            raise UsageError(f"{where}: no messages; is this an mcp-vcr transcript?")
        meta = doc.get("meta") or {}
        messages = _list(doc["messages"], where, "messages")
    rec = Foreign("mcp-vcr", lost="byte-exact text and key order (messages are stored parsed, "
                  "times in ms), lines that were not JSON, stderr")
    rec.started_at = _iso(meta.get("recorded_at"))
    command = meta.get("server_command")
    rec.target = [str(x) for x in command] if isinstance(command, list) and command else None
    for i, m in enumerate(messages):
        m = _object(m, where, f"messages[{i}]")
        direction = m["dir"]
        if direction not in (C2S, S2C):
            raise UsageError(f"{where}: messages[{i}]: unknown dir {direction!r}")
        rec.add(direction, m["payload"], int(m.get("t") or 0) * MS)
    return rec


# --- mcp-recorder: request/response interactions -------------------------------------------------


def mcp_recorder(text: str, where: str) -> Foreign:
    doc = _object(_json(text, where, "mcp-recorder"), where, "an mcp-recorder cassette")
    if "interactions" not in doc:
        raise UsageError(f"{where}: no interactions; is this an mcp-recorder cassette?")
    meta = doc.get("metadata") or {}
    rec = Foreign("mcp-recorder", lost="the server's notifications and requests (only the first "
                  "message of each answer is kept), times (only each answer's latency, in ms), "
                  "HTTP headers, GET and DELETE")
    rec.started_at = _iso(meta.get("recorded_at"))
    rec.source_transport = meta.get("transport_type")
    if meta.get("server_url"):
        rec.target = [str(meta["server_url"])]
    t = 0
    for i, x in enumerate(_list(doc["interactions"], where, "interactions")):
        x = _object(x, where, f"interactions[{i}]")
        kind = x.get("type")
        if kind == "lifecycle":
            continue
        if kind not in ("jsonrpc_request", "notification"):
            raise UsageError(f"{where}: interactions[{i}]: unknown type {kind!r}")
        rec.add(C2S, x["request"], t)
        if kind == "jsonrpc_request" and x.get("response") is not None:
            t += max(int(x.get("latency_ms") or 0), 0) * MS
            rec.add(S2C, x["response"], t)
        t += STEP
    return rec


# --- agent-vcr: the initialize handshake, then request/notifications/response interactions ------


def _clean(message: Any) -> Any:
    """agent-vcr's models write absent fields as null (``"error": null`` beside a result,
    ``"params": null``): left out, as they were on the wire."""
    if isinstance(message, dict):
        return {k: v for k, v in message.items()
                if not (v is None and k in ("params", "result", "error", "data"))}
    return message


def agent_vcr(text: str, where: str) -> Foreign:
    doc = _object(_json(text, where, "agent-vcr"), where, "an agent-vcr recording")
    if "session" not in doc or "metadata" not in doc:
        raise UsageError(f"{where}: no metadata and session; is this an agent-vcr .vcr file?")
    meta = _object(doc["metadata"], where, "metadata")
    session = _object(doc["session"], where, "session")
    rec = Foreign("agent-vcr", lost="the client's notifications (notifications/initialized "
                  "restored), the server's requests and their answers, where notifications "
                  "fell (each comes before the answer it was recorded with), stderr")
    start = _time(meta.get("recorded_at"))
    rec.started_at = start.isoformat() if start else None
    rec.source_transport = meta.get("transport")
    command = meta.get("server_command")
    if command:
        rec.target = [str(command), *(str(a) for a in meta.get("server_args") or [])]
    rec.add(C2S, _clean(session["initialize_request"]), 0)
    rec.add(S2C, _clean(session["initialize_response"]), STEP)
    rec.add(C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 2 * STEP)
    t = 3 * STEP
    first: datetime | None = None
    for i, x in enumerate(_list(session.get("interactions") or [], where, "interactions")):
        x = _object(x, where, f"session.interactions[{i}]")
        at = _time(x.get("timestamp"))
        if at is not None:
            first = first or at
            try:
                t = max(t, 3 * STEP + int((at - first).total_seconds() * 1e9))
            except TypeError:  # one timestamp with a zone, one without
                pass
        rec.add(C2S, _clean(x["request"]), t)
        for n in x.get("notifications") or []:
            t += STEP // 10
            rec.add(S2C, _clean(n), t)
        if x.get("response") is not None:
            t += max(int(float(x.get("latency_ms") or 0) * MS), STEP // 10)
            rec.add(S2C, _clean(x["response"]), t)
        t += STEP
    return rec


# --- the MCP Inspector: its History pane ({request, response}) and Server Notifications ---------

ASSUMED_VERSION = "2025-06-18"
_MCP_ERROR = re.compile(r"MCP error (-?\d+): (.*)", re.S)


def _maybe_json(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return _json(value, where, "inspector")
    return value


def inspector(text: str, where: str) -> Foreign:
    doc = _json(text, where, "inspector")
    if isinstance(doc, list):
        history, notes = doc, []
    else:
        doc = _object(doc, where, "an Inspector history")
        if "requestHistory" not in doc:
            raise UsageError(f"{where}: no requestHistory; give the Inspector's History as "
                             "a list of {request, response} or {\"requestHistory\": [...], "
                             "\"serverNotifications\": [...]}")
        history = _list(doc["requestHistory"], where, "requestHistory")
        notes = _list(doc.get("serverNotifications") or [], where, "serverNotifications")
    rec = Foreign("inspector", lost=f"ids, times, the protocol version (assumed "
                  f"{ASSUMED_VERSION}), error codes not in the message, the server's requests, "
                  "and when each server notification came (progress goes before the answer of the "
                  "request whose token it names, the rest at the end)")
    t, next_id = 0, 1
    init: tuple[dict[str, Any], dict[str, Any]] | None = None
    calls: list[tuple[dict[str, Any], Any]] = []
    for i, entry in enumerate(history):
        entry = _object(entry, where, f"requestHistory[{i}]")
        request = _object(_maybe_json(entry["request"], where), where,
                          f"requestHistory[{i}].request")
        response = _maybe_json(entry.get("response"), where)
        if request.get("method") == "initialize" and init is None:
            init = (request, response if isinstance(response, dict) else {})
        else:
            calls.append((request, response))
    if init is None:
        raise UsageError(f"{where}: no initialize in the history: the Inspector records one "
                         "when it connects")
    request, answer = init
    params = request.get("params") or {
        "protocolVersion": ASSUMED_VERSION, "capabilities": {},
        "clientInfo": {"name": "mcp-inspector", "version": "unknown"}}
    result = {"protocolVersion": params.get("protocolVersion", ASSUMED_VERSION),
              **{k: v for k, v in answer.items() if v is not None}}
    rec.add(C2S, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, t)
    rec.add(S2C, {"jsonrpc": "2.0", "id": 0, "result": result}, t + STEP)
    rec.add(C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"}, t + 2 * STEP)
    t += 3 * STEP
    by_token: dict[str, list[dict[str, Any]]] = {}  # progress belongs to the request it names
    rest: list[dict[str, Any]] = []
    for i, n in enumerate(notes):
        n = _object(n, where, f"serverNotifications[{i}]")
        n = {"jsonrpc": "2.0", **{k: v for k, v in n.items() if k != "jsonrpc"}}
        token = (n.get("params") or {}).get("progressToken") if isinstance(
            n.get("params"), dict) else None
        if n.get("method") == "notifications/progress" and token is not None:
            by_token.setdefault(_compact_key(token), []).append(n)
        else:
            rest.append(n)
    for request, response in calls:
        body = {"jsonrpc": "2.0", **{k: v for k, v in request.items() if k != "jsonrpc"}}
        if response is None and "method" in request and "id" not in request:
            rec.add(C2S, body, t)  # a notification the Inspector sent
            t += STEP
            continue
        body = {"jsonrpc": "2.0", "id": next_id, **{k: v for k, v in body.items() if k != "id"}}
        rec.add(C2S, body, t)
        params = body.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        for n in by_token.pop(_compact_key(token), []) if token is not None else []:
            t += STEP // 10
            rec.add(S2C, n, t)
        if isinstance(response, dict) and set(response) == {"error"}:
            text = str(response["error"])
            m = _MCP_ERROR.match(text)
            error = ({"code": int(m.group(1)), "message": m.group(2)} if m
                     else {"code": -32603, "message": text})
            rec.add(S2C, {"jsonrpc": "2.0", "id": next_id, "error": error}, t + STEP)
        elif response is not None:
            rec.add(S2C, {"jsonrpc": "2.0", "id": next_id, "result": response}, t + STEP)
        next_id += 1
        t += 2 * STEP
    for n in [*rest, *(n for ns in by_token.values() for n in ns)]:
        rec.add(S2C, n, t)
        t += STEP
    return rec


def _compact_key(value: Any) -> str:
    return orjson.dumps(value).decode()


READERS: dict[str, Callable[[str, str], Foreign]] = {
    "inspector": inspector, "mcp-cassette": mcp_cassette, "mcp-recorder": mcp_recorder,
    "mcp-vcr": mcp_vcr, "agent-vcr": agent_vcr,
}
