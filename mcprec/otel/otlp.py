"""OTLP over HTTP with protobuf: spans and histograms encoded with the official
``opentelemetry-proto`` messages, sent in batches with retries and back-off.

    export_otlp(cassette, sessions, OtlpTarget(url))   what ``mcprec export --otlp URL`` does

``URL`` is the collector's OTLP/HTTP base (``http://collector:4318``): spans go to
``URL/v1/traces`` and histograms to ``URL/v1/metrics``. A failure raises ``OtlpError``, whose
message says what was delivered before it; nothing fails silently.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

from .. import __version__
from ..cassette import Cassette, Session
from ..errors import McprecError, UsageError
from .spans import (
    DURATION_BOUNDS, OPERATION_DURATION, SCHEMA_URL, SERVER_OPERATION_DURATION,
    SESSION_DURATION, AttrValue, HistogramPoint, SessionTracer, SpanData,
)

BATCH_SPANS = 512
"""Spans per request: a few hundred KB at most (spans carry no payloads)."""
RETRYABLE = frozenset({429, 502, 503, 504})
"""The statuses OTLP/HTTP says to retry; a refused or timed-out connection is retried too."""
MAX_BACKOFF = 30.0
_DESCRIPTIONS = {
    # requests only: a notification has no answer (nor, over stdio, an ack) to time it by
    OPERATION_DURATION: "The duration of an MCP request as observed on the client, from the "
                        "time it was sent until its response was received.",
    SERVER_OPERATION_DURATION: "The duration of an MCP request from the server (sampling, "
                               "elicitation, roots) as observed on the client that handled it, "
                               "from the time it was received until the response was sent.",
    SESSION_DURATION: "The duration of the MCP session as observed on the MCP client.",
}


class OtlpError(McprecError):
    """Spans or metrics could not be delivered to the OTLP endpoint, or the ``otel`` extra that
    encodes them is not installed. ``unreachable``: no connection could be made at all."""

    unreachable = False


def load_proto() -> Any:
    """The opentelemetry-proto modules, or a one-line error naming the extra to install."""
    try:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from opentelemetry.proto.common.v1 import common_pb2
        from opentelemetry.proto.metrics.v1 import metrics_pb2
        from opentelemetry.proto.resource.v1 import resource_pb2
        from opentelemetry.proto.trace.v1 import trace_pb2
    except ImportError as e:
        raise OtlpError(
            f"OTLP export needs the otel extra ({e.name or 'opentelemetry-proto'} is missing): "
            "pip install 'mcprec[otel]'"
        ) from None
    return SimpleNamespace(common=common_pb2, resource=resource_pb2, trace=trace_pb2,
                           metrics=metrics_pb2, trace_service=trace_service_pb2,
                           metrics_service=metrics_service_pb2)


# --- where to send, and how -----------------------------------------------------------------


@dataclass
class OtlpTarget:
    """An OTLP/HTTP collector: its base URL, extra headers, and the patience to show it."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    """Seconds for one request."""
    retries: int = 4
    """Attempts after the first, for retryable failures."""
    backoff: float = 0.5
    """Seconds before the first retry; doubled each time (with jitter), at most MAX_BACKOFF."""

    def __post_init__(self) -> None:
        self.url = base_url(self.url)

    def endpoint(self, signal: str) -> str:
        return f"{self.url}/v1/{signal}"

    @property
    def shown(self) -> str:
        """The URL as printed: credentials and secret query parameters redacted."""
        from ..redact.urls import redact_url

        return redact_url(self.url)


def parse_headers(values: Iterable[str]) -> dict[str, str]:
    """``--header KEY=VALUE`` options as a dict."""
    headers = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--header expects KEY=VALUE, got {v!r}")
        headers[key.strip()] = value.strip()
    return headers


def base_url(url: str) -> str:
    """The collector's base URL; one given with its ``/v1/traces`` (or metrics) path is cut."""
    from ..redact.urls import redact_url

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as e:
        raise UsageError(f"--otlp {redact_url(url)!r} is not a URL "
                         f"({str(e).replace(url, redact_url(url))})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--otlp {redact_url(url)!r} is not an http(s) URL; give the collector's OTLP/HTTP address, "
            "e.g. http://localhost:4318"
        )
    base = url.rstrip("/")
    for suffix in ("/v1/traces", "/v1/metrics"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


class OtlpSender:
    """Posts protobuf bodies to one collector, retrying what OTLP says may be retried."""

    def __init__(self, target: OtlpTarget, *, sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx

        self.target = target
        self._sleep = sleep
        self._client = httpx.Client(timeout=target.timeout, headers={
            "User-Agent": f"mcprec/{__version__}", **target.headers,
            "Content-Type": "application/x-protobuf",
        })

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OtlpSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, signal: str, body: bytes) -> bytes:
        """Post ``body`` to the ``signal`` endpoint; the response body, or ``OtlpError``."""
        import httpx

        url = self.target.endpoint(signal)
        delay = self.target.backoff
        attempts = self.target.retries + 1
        for attempt in range(1, attempts + 1):
            wait, unreachable = None, False
            try:
                r = self._client.post(url, content=body)
            except httpx.TimeoutException:
                reason, retry = f"no answer within {self.target.timeout:g} s", True
            except httpx.TransportError as e:
                reason, retry = _transport_reason(e), True
                unreachable = isinstance(e, httpx.ConnectError)
            else:
                if 200 <= r.status_code < 300:
                    return r.content
                reason = f"HTTP {r.status_code} {r.reason_phrase}".rstrip() + _body_hint(r)
                retry = r.status_code in RETRYABLE
                wait = _retry_after(r.headers.get("retry-after"))
            if not retry or attempt == attempts:
                tries = f" after {attempts} attempts" if attempts > 1 and retry else ""
                error = OtlpError(f"failed{tries}: {reason}")
                error.unreachable = unreachable
                raise error
            self._sleep(min(wait if wait is not None else delay * random.uniform(0.8, 1.2),
                            MAX_BACKOFF))
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


def _transport_reason(e: Exception) -> str:
    text = str(e) or type(e).__name__
    if text.startswith("[Errno"):
        text = text.split("]", 1)[-1].strip()
    return f"cannot connect ({text[:1].lower()}{text[1:]})"


def _body_hint(r: Any) -> str:
    kind = r.headers.get("content-type", "")
    if not kind.startswith(("text/", "application/json")):
        return ""
    text = " ".join(r.text.split())[:200]
    return f": {text}" if text else ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


# --- encoding ------------------------------------------------------------------------------


_KEY_VALUES: dict[tuple[str, type, AttrValue], Any] = {}
"""Attributes already built: most repeat from span to span (building one costs ~5 µs)."""


def _attrs(pb: Any, attrs: Mapping[str, AttrValue] | Iterable[tuple[str, AttrValue]]) -> list[Any]:
    items = attrs.items() if isinstance(attrs, Mapping) else attrs
    out = []
    for key, value in items:
        cached = _KEY_VALUES.get((key, type(value), value))
        if cached is None:
            if isinstance(value, bool):
                any_value = pb.common.AnyValue(bool_value=value)
            elif isinstance(value, int):
                any_value = pb.common.AnyValue(int_value=value)
            elif isinstance(value, float):
                any_value = pb.common.AnyValue(double_value=value)
            else:
                any_value = pb.common.AnyValue(string_value=str(value))
            cached = pb.common.KeyValue(key=key, value=any_value)
            if len(_KEY_VALUES) >= 4096:
                _KEY_VALUES.clear()
            _KEY_VALUES[(key, type(value), value)] = cached
        out.append(cached)
    return out


def _scope(pb: Any) -> Any:
    return pb.common.InstrumentationScope(name="mcprec", version=__version__)


_KINDS = {"client": "SPAN_KIND_CLIENT", "server": "SPAN_KIND_SERVER",
          "internal": "SPAN_KIND_INTERNAL"}


def _add_span(pb: Any, into: Any, s: SpanData) -> None:
    """Build ``s`` in place at the end of the repeated field ``into`` (no copy of a span)."""
    t = pb.trace
    flags = 0x01 | t.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK  # sampled; remoteness known
    if s.remote_parent:
        flags |= t.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
    span = into.add(
        trace_id=s.trace_id, span_id=s.span_id, parent_span_id=s.parent_span_id,
        trace_state=s.trace_state, flags=flags, name=s.name, kind=getattr(t.Span, _KINDS[s.kind]),
        start_time_unix_nano=s.start_ns, end_time_unix_nano=s.end_ns,
        attributes=_attrs(pb, s.attributes),
    )
    for tid, sid in s.links:
        span.links.add(trace_id=tid, span_id=sid)
    if s.failed:
        span.status.code = t.Status.STATUS_CODE_ERROR
        span.status.message = s.status_message


def encode_spans(groups: Sequence[tuple[dict[str, AttrValue], Sequence[SpanData]]]) -> bytes:
    """An ``ExportTraceServiceRequest``: one resource (a session's server) per group."""
    pb = load_proto()
    request = pb.trace_service.ExportTraceServiceRequest()
    for resource, spans in groups:
        if not spans:
            continue
        rs = request.resource_spans.add(schema_url=SCHEMA_URL)
        rs.resource.attributes.extend(_attrs(pb, resource))
        ss = rs.scope_spans.add(scope=_scope(pb), schema_url=SCHEMA_URL)
        for s in spans:
            _add_span(pb, ss.spans, s)
    return bytes(request.SerializeToString())


@dataclass
class SessionMetrics:
    """A session's histograms, over the interval it lasted."""

    resource: dict[str, AttrValue]
    start_ns: int
    end_ns: int
    points: list[HistogramPoint]


def encode_histograms(sessions: Sequence[SessionMetrics]) -> bytes:
    """An ``ExportMetricsServiceRequest``: per session, delta histograms over its interval."""
    pb = load_proto()
    m = pb.metrics
    resource_metrics = []
    for sm in sessions:
        metrics: dict[str, Any] = {}
        for point in sorted(sm.points, key=lambda p: p.metric):
            metric = metrics.get(point.metric)
            if metric is None:
                metric = metrics[point.metric] = m.Metric(
                    name=point.metric, unit="s", description=_DESCRIPTIONS.get(point.metric, ""),
                    histogram=m.Histogram(
                        aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA),
                )
            metric.histogram.data_points.append(m.HistogramDataPoint(
                attributes=_attrs(pb, point.attributes), start_time_unix_nano=sm.start_ns,
                time_unix_nano=sm.end_ns, count=point.count, sum=point.total,
                bucket_counts=point.buckets, explicit_bounds=DURATION_BOUNDS,
                min=point.low, max=point.high,
            ))
        if metrics:
            resource_metrics.append(m.ResourceMetrics(
                resource=pb.resource.Resource(attributes=_attrs(pb, sm.resource)),
                scope_metrics=[m.ScopeMetrics(scope=_scope(pb), metrics=list(metrics.values()),
                                              schema_url=SCHEMA_URL)],
                schema_url=SCHEMA_URL,
            ))
    request = pb.metrics_service.ExportMetricsServiceRequest(resource_metrics=resource_metrics)
    return bytes(request.SerializeToString())


def rejected(signal: str, body: bytes) -> str | None:
    """What the collector says it rejected, from a partial-success response, if anything."""
    pb = load_proto()
    try:
        if signal == "traces":
            ps = pb.trace_service.ExportTraceServiceResponse.FromString(body).partial_success
            count, what = ps.rejected_spans, "span"
        else:
            ps = pb.metrics_service.ExportMetricsServiceResponse.FromString(body).partial_success
            count, what = ps.rejected_data_points, "data point"
    except Exception:  # noqa: BLE001 - a body we cannot read says nothing about rejection
        return None
    if not count and not ps.error_message:
        return None
    return f"the collector rejected {count} {what}(s): {ps.error_message or 'no reason given'}"


# --- export ---------------------------------------------------------------------------------


@dataclass
class ExportReport:
    """What an export delivered."""

    sessions: int = 0
    spans: int = 0
    requests: int = 0
    durations: int = 0
    warnings: list[str] = field(default_factory=list)

    def delivered(self) -> str:
        if not self.requests:
            return "nothing was sent"
        return f"{self.spans} span(s) in {self.requests} request(s) were accepted before it"


class _Batcher:
    """Gathers spans by resource and sends a request every ``BATCH_SPANS`` spans."""

    def __init__(self, sender: OtlpSender, report: ExportReport) -> None:
        self.sender, self.report = sender, report
        self.groups: list[tuple[dict[str, AttrValue], list[SpanData]]] = []
        self.count = 0

    def add(self, resource: dict[str, AttrValue], spans: list[SpanData]) -> None:
        for s in spans:
            if not self.groups or self.groups[-1][0] is not resource:
                self.groups.append((resource, []))
            self.groups[-1][1].append(s)
            self.count += 1
            if self.count >= BATCH_SPANS:
                self.flush()

    def flush(self) -> None:
        if not self.count:
            return
        body = encode_spans(self.groups)
        answer = _deliver(self.sender, "traces", body, self.report)
        self.report.spans += self.count
        self.report.requests += 1
        note = rejected("traces", answer)
        if note:
            self.report.warnings.append(note)
        self.groups, self.count = [], 0


def _deliver(sender: OtlpSender, signal: str, body: bytes, report: ExportReport) -> bytes:
    try:
        return sender.send(signal, body)
    except OtlpError as e:
        from ..redact.urls import redact_text

        url = sender.target.endpoint(signal)
        hint = "; is the collector running, and listening there?" if e.unreachable else ""
        raise OtlpError(redact_text(
            f"OTLP export of {signal} to {url} {e}; {report.delivered()}{hint}")) from None


def export_otlp(cassette: Cassette, sessions: Iterable[Session], target: OtlpTarget, *,
                sender: OtlpSender | None = None) -> ExportReport:
    """Send each session as a trace, then the duration histograms of them all."""
    load_proto()  # a missing extra fails before anything is read
    report = ExportReport()
    own = sender is None
    sender = sender or OtlpSender(target)
    try:
        batcher = _Batcher(sender, report)
        metrics: list[SessionMetrics] = []
        for session in sessions:
            tracer = SessionTracer(session, cassette=cassette.path.name)
            # the resource (the server) is known once initialize is answered: hold spans till then
            early: list[SpanData] = []
            resource: dict[str, AttrValue] | None = None
            for m in cassette.messages(session):
                done = tracer.feed(m)
                if resource is not None:
                    batcher.add(resource, done)
                    continue
                early += done
                if tracer.server_info or len(early) >= BATCH_SPANS:
                    resource = tracer.resource()
                    batcher.add(resource, early)
            last = tracer.finish()
            if resource is None:
                resource = tracer.resource()
                batcher.add(resource, early)
            batcher.add(resource, last)
            root = last[-1]
            metrics.append(SessionMetrics(resource, root.start_ns, root.end_ns,
                                          list(tracer.histograms.values())))
            report.sessions += 1
        batcher.flush()
        if metrics:
            body = encode_histograms(metrics)
            answer = _deliver(sender, "metrics", body, report)
            report.durations = sum(p.count for sm in metrics for p in sm.points)
            note = rejected("metrics", answer)
            if note:
                report.warnings.append(note)
    finally:
        if own:
            sender.close()
    return report
