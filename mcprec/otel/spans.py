"""A recorded session as OpenTelemetry spans and duration histograms, from the client's view:
the resource is the client (its ``clientInfo``), the server is the peer.

What each message makes (the conventions are ``SEMCONV``, version ``SEMCONV_VERSION``):

    client request        a CLIENT span from the request to its answer, named
                          ``{mcp.method.name} {tool or prompt name}``
    client notification   a CLIENT span of no duration (stdio and SSE carry no acknowledgement)
    server request        a SERVER span while the client handles it (sampling, elicitation, roots),
                          timed in ``mcp.server.operation.duration`` (the receiver's histogram)
    server notification   a SERVER span of no duration (progress, log messages, list changes)
    response, error       ends its request's span; a JSON-RPC error or a tool result with
                          ``isError`` sets ``error.type`` and the span's status to error
    cancel                ``notifications/cancelled`` ends the request's span and links to it

A session is one trace, under a root span ``mcprec session`` that lasts the whole session. A
server message sent while a request was being handled is a child of that request's span. A
message carrying W3C trace context in ``params._meta.traceparent`` joins that trace instead, as
a child of the span it names, with a link to the session's root span.

Times are the recorded ones, on the session's wall-clock start (``started_at``). Ids derive
from the session's start and name, so exporting a session twice gives the same trace.
No payload (arguments, results) goes into a span: the conventions make those opt-in.
"""

from __future__ import annotations

import bisect
import calendar
import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Union
from urllib.parse import urlsplit

from .. import __version__, wire
from ..cassette import Message, Session

SEMCONV = "OpenTelemetry semantic conventions for MCP (GenAI semantic conventions, docs/gen-ai/mcp.md)"
SEMCONV_VERSION = "0.1.0"
"""open-telemetry/semantic-conventions-genai v0.1.0 (on semantic-conventions v1.45.0), status
Development."""
SCHEMA_URL = "https://opentelemetry.io/schemas/1.45.0"
"""The schema of the semantic conventions the spans and metrics follow (OTLP's ``schema_url``)."""
HTTP_VERSION = "1.1"
"""``network.protocol.version`` of a recording over HTTP: mcprec's proxy speaks HTTP/1.1 to the
client (and the client's requests are the spans)."""

CLIENT, SERVER, INTERNAL = "client", "server", "internal"
OPERATION_DURATION = "mcp.client.operation.duration"
SERVER_OPERATION_DURATION = "mcp.server.operation.duration"
"""The receiver's histogram: here, the client handling a server's request (sampling, ...)."""
SESSION_DURATION = "mcp.client.session.duration"
ROOT_NAME = "mcprec session"
DURATION_BOUNDS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""The bucket boundaries the conventions give for both MCP duration histograms."""

AttrValue = Union[str, int, float, bool]

# span attributes that stay off the duration histograms (high cardinality, or opt-in there)
_SPAN_ONLY = frozenset({"jsonrpc.request.id", "mcp.session.id", "mcp.resource.uri"})
# the histogram attributes that differ within a session (the others are the session's own)
_VARYING = ("mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "error.type",
            "rpc.response.status_code", "mcp.protocol.version", "jsonrpc.protocol.version")
_RESOURCE_METHODS = frozenset({
    "resources/read", "resources/subscribe", "resources/unsubscribe",
    "notifications/resources/updated",
})
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


@dataclass
class SpanData:
    """One finished span, ready to encode."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    failed: bool = False
    status_message: str = ""
    links: list[tuple[bytes, bytes]] = field(default_factory=list)
    trace_state: str = ""
    remote_parent: bool = False


@dataclass
class HistogramPoint:
    """The durations of one attribute set of one histogram, in the conventions' buckets."""

    metric: str
    attributes: tuple[tuple[str, AttrValue], ...]
    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BOUNDS) + 1))

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.low = min(self.low, seconds)
        self.high = max(self.high, seconds)
        self.buckets[bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1


def wall_clock_ns(iso: str) -> int:
    """Nanoseconds since the epoch of an ISO 8601 UTC time such as ``2026-12-02T14:37:18.5Z``."""
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return calendar.timegm(dt.utctimetuple()) * 10**9 + dt.microsecond * 1000


def _digest(*parts: bytes) -> bytes:
    return hashlib.sha256(b"\0".join((b"mcprec-otel", *parts))).digest()


def _nonzero(ident: bytes) -> bytes:
    return ident if any(ident) else ident[:-1] + b"\1"


def traceparent(params: Any) -> tuple[bytes, bytes, str] | None:
    """(trace id, parent span id, tracestate) from ``params._meta``, if it holds a valid one."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get("traceparent") if isinstance(meta, dict) else None
    if not isinstance(value, str):
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None or m[1] == "ff" or (m[1] == "00" and m[5]):
        return None
    trace_id, span_id = bytes.fromhex(m[2]), bytes.fromhex(m[3])
    if not any(trace_id) or not any(span_id):
        return None
    state = meta.get("tracestate") if isinstance(meta, dict) else None
    return trace_id, span_id, state if isinstance(state, str) else ""


def transport_attributes(session: Session) -> dict[str, AttrValue]:
    """``network.*`` and, over HTTP, ``server.address``/``server.port`` of the recorded server
    (the target behind mcprec's proxy, as the conventions ask)."""
    if session.transport not in ("http", "sse"):
        return {"network.transport": "pipe"}
    attrs: dict[str, AttrValue] = {"network.transport": "tcp", "network.protocol.name": "http",
                                   "network.protocol.version": HTTP_VERSION}
    if isinstance(session.target, str):
        try:
            url = urlsplit(session.target)
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            return attrs
        if url.hostname:
            attrs["server.address"] = url.hostname
            attrs["server.port"] = port
    return attrs


@dataclass
class _Open:
    """A request whose answer has not been seen yet."""

    span: SpanData
    direction: str
    method: str


class SessionTracer:
    """Turns one session's messages, fed in recorded order, into spans as they complete.

    ``feed(message)`` returns the spans that message finished; ``finish()`` the rest (requests
    never answered, and the root span). Durations gather in ``histograms``.
    """

    def __init__(self, session: Session, *, cassette: str | None = None) -> None:
        self.session = session
        self.cassette = cassette
        self.epoch_ns = wall_clock_ns(session.started_at)
        self.trace_id = _nonzero(_digest(session.started_at.encode(), session.name.encode())[:16])
        self.root_id = self._span_id(-1)
        self.server_info: dict[str, Any] = dict(session.server_info or {})
        self.client_info: dict[str, Any] = dict(session.client_info or {})
        self.protocol_version = session.protocol_version
        self.mcp_session_id: str | None = None
        self.last_t_ns = 0
        self.histograms: dict[tuple[Any, ...], HistogramPoint] = {}
        self._common_attrs: dict[str, AttrValue] = {}
        self._common_of: tuple[Any, ...] = ()
        self._transport = transport_attributes(session)
        self._open: dict[int, _Open] = {}
        self._open_by_id: dict[tuple[str, str], int] = {}
        self._request_span: dict[tuple[str, str], tuple[bytes, bytes]] = {}
        """Each request's span, by (direction, id): what a cancel links to."""

    def _span_id(self, seq: int) -> bytes:
        return _nonzero(_digest(self.trace_id, str(seq).encode())[:8])

    def resource(self) -> dict[str, AttrValue]:
        """The side whose spans these are, the client (its ``clientInfo``), as an OpenTelemetry
        resource, and mcprec as the telemetry's distro. The server is the spans' peer: its
        address on client spans over HTTP, its ``serverInfo`` on the root span."""
        attrs: dict[str, AttrValue] = {
            "service.name": str(self.client_info.get("name") or "unknown_service:mcp-client"),
            "telemetry.distro.name": "mcprec",
            "telemetry.distro.version": __version__,
        }
        if self.client_info.get("version"):
            attrs["service.version"] = str(self.client_info["version"])
        return attrs

    def _common(self) -> dict[str, AttrValue]:
        """The attributes of every span (the same dict until what they say changes)."""
        now = (self.mcp_session_id, self.protocol_version)
        if now != self._common_of:
            self._common_of = now
            self._common_attrs = {"mcp.session.id": self.mcp_session_id or self.trace_id.hex(),
                                  **self._transport}
            if self.protocol_version:
                self._common_attrs["mcp.protocol.version"] = self.protocol_version
        return self._common_attrs

    # --- messages in, spans out -----------------------------------------------------------

    def feed(self, m: Message) -> list[SpanData]:
        """The spans that message ``m`` finished (none for most requests: their answer does)."""
        self.last_t_ns = max(self.last_t_ns, m.t_ns)
        if m.http is not None:
            if m.http.get("synthetic"):
                return []
            self._learn_session_id(m.http)
        obj = m.json
        if not isinstance(obj, dict):
            return []
        params = obj.get("params")
        if m.kind == wire.REQUEST and m.rpc_id is not None and m.method is not None:
            if m.method == "initialize" and isinstance(params, dict) and not self.client_info \
                    and isinstance(params.get("clientInfo"), dict):
                self.client_info = dict(params["clientInfo"])
            span = self._start(m, obj, params)
            self._open[m.seq] = _Open(span, m.direction, m.method)
            self._open_by_id[(m.direction, m.rpc_id)] = m.seq
            self._request_span[(m.direction, m.rpc_id)] = (span.trace_id, span.span_id)
            return []
        if m.kind == wire.NOTIFICATION and m.method is not None:
            span = self._start(m, obj, params)
            if m.method == "notifications/cancelled" and isinstance(params, dict) \
                    and params.get("requestId") is not None:
                cancelled = self._request_span.get((m.direction, wire.id_text(params["requestId"])))
                if cancelled is not None:
                    span.links.append(cancelled)  # the cancel, to the request it cancels
            done = [self._close(span, m.t_ns)]
            if m.method == "notifications/cancelled" and isinstance(params, dict):
                done += self._cancelled(m, params.get("requestId"))
            return done
        if m.kind in (wire.RESPONSE, wire.ERROR) and m.reply_to is not None:
            op = self._open.pop(m.reply_to, None)
            if op is None:
                return []
            self._open_by_id.pop((op.direction, m.rpc_id or ""), None)
            if op.method == "initialize" and m.kind == wire.RESPONSE:
                self._learn_initialize(obj.get("result"))
            self._outcome(op, obj)
            return [self._finish_op(op, m.t_ns)]
        return []

    def finish(self, end_t_ns: int | None = None, status: str | None = None) -> list[SpanData]:
        """The requests still unanswered (``error.type`` ``no_response``) and the root span.

        ``status`` is the session's final status, when the session row does not have it yet."""
        end = max(self.last_t_ns, end_t_ns or 0)
        if self.session.ended_at:
            end = max(end, wall_clock_ns(self.session.ended_at) - self.epoch_ns)
        done = []
        for op in self._open.values():
            self._fail(op.span, "no_response")
            done.append(self._finish_op(op, end))
        self._open.clear()
        self._open_by_id.clear()
        attrs = {**self._common(), "mcprec.session.name": self.session.name,
                 "mcprec.session.status": status or self.session.status}
        if self.cassette:
            attrs["mcprec.cassette"] = self.cassette
        for side, info in (("client", self.client_info), ("server", self.server_info)):
            for key in ("name", "version"):
                if info.get(key):
                    attrs[f"mcprec.{side}.{key}"] = str(info[key])
        root = SpanData(self.trace_id, self.root_id, b"", ROOT_NAME, INTERNAL, self.epoch_ns,
                        self.epoch_ns + end, attrs)
        done.append(root)
        self._measure(SESSION_DURATION, attrs, end)
        return done

    # --- building spans -------------------------------------------------------------------

    def _start(self, m: Message, obj: dict[str, Any], params: Any) -> SpanData:
        method = m.method or ""
        attrs: dict[str, AttrValue] = {"mcp.method.name": method}
        name = method
        if m.rpc_id is not None and m.rpc_id != "null":
            # the id's JSON text; a string's without its quotes and escapes
            attrs["jsonrpc.request.id"] = str(wire.loads(m.rpc_id.encode())) \
                if m.rpc_id.startswith('"') else m.rpc_id
        if obj.get("jsonrpc") != "2.0" and isinstance(obj.get("jsonrpc"), str):
            attrs["jsonrpc.protocol.version"] = obj["jsonrpc"]
        if isinstance(params, dict):
            target = params.get("name")
            if method == "tools/call" and isinstance(target, str):
                attrs["gen_ai.tool.name"] = target
                attrs["gen_ai.operation.name"] = "execute_tool"
                name = f"{method} {target}"
            elif method == "prompts/get" and isinstance(target, str):
                attrs["gen_ai.prompt.name"] = target
                name = f"{method} {target}"
            if method in _RESOURCE_METHODS and isinstance(params.get("uri"), str):
                attrs["mcp.resource.uri"] = params["uri"]
        kind = CLIENT if m.direction == wire.CLIENT_TO_SERVER else SERVER
        start = self.epoch_ns + m.t_ns
        span = SpanData(self.trace_id, self._span_id(m.seq), self.root_id, name, kind, start,
                        start, attrs)
        remote = traceparent(params)
        if remote is not None:
            span.trace_id, span.parent_span_id, span.trace_state = remote
            span.remote_parent = True
            span.links.append((self.trace_id, self.root_id))
        elif m.direction == wire.SERVER_TO_CLIENT and m.context_seq is not None:
            handling = self._open.get(m.context_seq)
            if handling is not None:
                span.trace_id, span.parent_span_id = handling.span.trace_id, handling.span.span_id
        return span

    def _close(self, span: SpanData, t_ns: int) -> SpanData:
        span.end_ns = max(span.start_ns, self.epoch_ns + t_ns)
        for key, value in self._common().items():
            if span.kind == SERVER and key.startswith("server."):
                continue  # the conventions put the peer's address on client spans only
            span.attributes.setdefault(key, value)
        return span

    def _finish_op(self, op: _Open, t_ns: int) -> SpanData:
        span = self._close(op.span, t_ns)
        metric = OPERATION_DURATION if op.direction == wire.CLIENT_TO_SERVER \
            else SERVER_OPERATION_DURATION
        self._measure(metric, span.attributes, span.end_ns - span.start_ns)
        return span

    def _outcome(self, op: _Open, answer: dict[str, Any]) -> None:
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            if isinstance(code, int):
                op.span.attributes["rpc.response.status_code"] = str(code)
            message = error.get("message")
            self._fail(op.span, str(code) if isinstance(code, int) else "_OTHER",
                       message if isinstance(message, str) else "")
            return
        result = answer.get("result")
        if op.method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
            # the result's text would make a status message, but results are opt-in data
            self._fail(op.span, "tool_error")

    def _fail(self, span: SpanData, error_type: str, message: str = "") -> None:
        span.attributes["error.type"] = error_type
        span.failed = True
        span.status_message = message

    def _cancelled(self, m: Message, request_id: Any) -> list[SpanData]:
        """The client gave up on its request: its span ends here, as the client saw it."""
        if request_id is None:
            return []
        seq = self._open_by_id.pop((m.direction, wire.id_text(request_id)), None)
        op = self._open.pop(seq, None) if seq is not None else None
        if op is None:
            return []
        self._fail(op.span, "cancelled")
        return [self._finish_op(op, m.t_ns)]

    def _measure(self, metric: str, attrs: dict[str, AttrValue], ns: int) -> None:
        key = (metric, *(attrs.get(k) for k in _VARYING))
        point = self.histograms.get(key)
        if point is None:
            kept = tuple(sorted((k, v) for k, v in attrs.items()
                                if k not in _SPAN_ONLY and not k.startswith("mcprec.")))
            point = self.histograms[key] = HistogramPoint(metric, kept)
        point.add(ns / 1e9)

    # --- what the session reveals as it goes ----------------------------------------------

    def _learn_initialize(self, result: Any) -> None:
        if not isinstance(result, dict):
            return
        if not self.protocol_version and isinstance(result.get("protocolVersion"), str):
            self.protocol_version = result["protocolVersion"]
        if not self.server_info and isinstance(result.get("serverInfo"), dict):
            self.server_info = dict(result["serverInfo"])

    def _learn_session_id(self, http: dict[str, Any]) -> None:
        if self.mcp_session_id is not None:
            return
        headers = http.get("headers")
        if isinstance(headers, dict):
            for key, value in headers.items():
                if key.lower() == "mcp-session-id" and isinstance(value, str):
                    self.mcp_session_id = value
                    return


def session_spans(
    messages: Any, session: Session, *, cassette: str | None = None
) -> tuple[list[SpanData], list[HistogramPoint], dict[str, AttrValue]]:
    """All of a finished session's spans, its histograms, and its resource attributes."""
    tracer = SessionTracer(session, cassette=cassette)
    spans: list[SpanData] = []
    for m in messages:
        spans += tracer.feed(m)
    spans += tracer.finish()
    return spans, list(tracer.histograms.values()), tracer.resource()
