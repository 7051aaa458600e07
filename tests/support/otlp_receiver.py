"""A real OTLP/HTTP receiver for the tests: decodes what it is sent with opentelemetry-proto.

    with serve_receiver() as receiver:          listens on 127.0.0.1, a free port
        ... send to receiver.url ...
        receiver.spans()                        every span received, with its resource

``receiver.answers`` lists statuses to answer the next requests with, before answering 200
(``(503, {"Retry-After": "0"})`` or a plain ``503``); ``receiver.hang`` keeps requests waiting
until the receiver stops (a collector that accepts but never answers).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse,
)


@dataclass
class Received:
    """One span as received: the span message and its resource's attributes."""

    span: Any
    resource: dict[str, Any]

    @property
    def attrs(self) -> dict[str, Any]:
        return attributes(self.span.attributes)


def attributes(kvs: Any) -> dict[str, Any]:
    """OTLP ``KeyValue``s as a plain dict."""
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


@dataclass
class Receiver:
    url: str = ""
    traces: list[Any] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    posts: list[tuple[str, int]] = field(default_factory=list)
    """(path, status answered) of every request, in order."""
    headers: list[dict[str, str]] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)
    rejected_spans: int = 0
    hang: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[Received]:
        with self.lock:
            requests = list(self.traces)
        return [Received(span, attributes(rs.resource.attributes))
                for request in requests for rs in request.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def data_points(self, metric: str) -> list[Any]:
        with self.lock:
            requests = list(self.metrics)
        return [p for request in requests for rm in request.resource_metrics
                for sm in rm.scope_metrics for m in sm.metrics if m.name == metric
                for p in m.histogram.data_points]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if receiver.hang:
                receiver.stopping.wait(30)
                return
            with receiver.lock:
                answer = receiver.answers.pop(0) if receiver.answers else 200
                status, extra = answer if isinstance(answer, tuple) else (answer, {})
                receiver.posts.append((self.path, status))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                payload = b""
                if status == 200 and self.path == "/v1/traces":
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse()
                    if receiver.rejected_spans:
                        reply.partial_success.rejected_spans = receiver.rejected_spans
                        reply.partial_success.error_message = "too old"
                    payload = reply.SerializeToString()
                elif status == 200 and self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    payload = ExportMetricsServiceResponse().SerializeToString()
            self.send_response(status)
            for key, value in extra.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve_receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) until the block ends."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
