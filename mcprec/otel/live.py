"""Spans while recording: the recorder process's hook, never on the forwarding path.

``MCPREC_OTLP=URL mcprec record ...`` (and ``MCPREC_OTLP_HEADERS="key=value,..."``) makes the
recorder process (``record/child.py``) start a ``LiveExport``. The recorder only tells it
which sessions it committed rows for and which it closed; two threads of its own do the rest:

    reader   reads the committed rows on its own connection, builds the spans (``spans.py``)
             and puts them in a bounded queue; when the queue is full they are dropped, counted
    sender   posts batches to the collector (short timeout, one retry); a failed batch is
             dropped, counted

A slow, hanging or dead collector therefore costs recording nothing but the spans: the first
failure is said once, and the number of spans not delivered when recording ends. The cassette
keeps everything; ``mcprec export --otlp`` can send it later (with the same ids).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from .. import _log
from ..errors import McprecError
from .otlp import (
    BATCH_SPANS, OtlpSender, OtlpTarget, SessionMetrics, encode_histograms, encode_spans,
    load_proto, parse_headers,
)
from .spans import SessionTracer, SpanData

URL_ENV = "MCPREC_OTLP"
HEADERS_ENV = "MCPREC_OTLP_HEADERS"
QUEUE_BATCHES = 16
"""Batches (of up to BATCH_SPANS spans) waiting for the sender; more are dropped."""
READ_INTERVAL = 0.1
"""Seconds between reads of the cassette: rows committed meanwhile are read together."""
SEND_TIMEOUT = 2.0
CLOSE_TIMEOUT = 3.0
"""Seconds the end of recording waits for the last spans to be delivered."""


def _say(text: str) -> None:
    _log.warning("otel", text)


class LiveExport:
    """Exports the sessions one recorder process writes, as they are committed."""

    def __init__(self, path: str | os.PathLike[str], target: OtlpTarget) -> None:
        self.path = path
        self.target = target
        self.built = 0
        self.sent = 0
        self.dropped = 0
        self._sender = OtlpSender(target)
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(QUEUE_BATCHES)
        self._lock = threading.Lock()
        self._active: set[int] = set()
        self._closing: dict[int, str] = {}
        self._wake = threading.Event()
        self._stop = False
        self._warned = False
        self._reader = threading.Thread(target=self._read_loop, name="mcprec-otlp-reader",
                                        daemon=True)
        self._sending = threading.Thread(target=self._send_loop, name="mcprec-otlp-sender",
                                         daemon=True)
        self._reader.start()
        self._sending.start()

    @classmethod
    def from_env(cls, path: str | os.PathLike[str]) -> LiveExport | None:
        """The export ``MCPREC_OTLP`` asks for; None (said once) when it cannot start."""
        url = os.environ.get(URL_ENV)
        if not url:
            return None
        try:
            headers = parse_headers(h for h in os.environ.get(HEADERS_ENV, "").split(",")
                                    if h.strip())
            target = OtlpTarget(url, headers, timeout=SEND_TIMEOUT, retries=1)
            load_proto()
        except McprecError as e:
            _say(f"{URL_ENV}: {e}; recording without OpenTelemetry export")
            return None
        return cls(path, target)

    # --- what the recorder calls (its own thread; each call only notes and wakes) ---------

    def committed(self, session_ids: Iterable[int]) -> None:
        """Rows of these sessions were committed."""
        with self._lock:
            self._active.update(session_ids)
        self._wake.set()

    def closed(self, session_id: int, status: str) -> None:
        """The session ended (its last rows are committed)."""
        with self._lock:
            self._active.add(session_id)
            self._closing[session_id] = status
        self._wake.set()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Recording is over: end every session, deliver what can be in ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        self._stop = True
        self._wake.set()
        self._reader.join(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(queue.Full):  # behind the reader's last spans
            self._queue.put(("end", None), timeout=max(0.0, deadline - time.monotonic()))
        self._sending.join(max(0.0, deadline - time.monotonic()))
        lost = self.built - self.sent
        if lost:
            _say(f"OTLP export to {self.target.shown}: {lost} of {self.built} span(s) were not "
                 "delivered; the cassette has them all (`mcprec export --otlp` sends them)")

    # --- the reader -----------------------------------------------------------------------

    def _read_loop(self) -> None:
        from ..cassette import Cassette

        try:
            cassette = Cassette.open(self.path, wait=False)
        except McprecError as e:
            self._failed(f"cannot read {self.path}: {e}")
            return
        tracers: dict[int, tuple[SessionTracer, list[int]]] = {}
        finished: set[int] = set()
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                stopping = self._stop
                with self._lock:
                    active, closing = set(self._active), dict(self._closing)
                    self._closing.clear()
                for sid in sorted(active - finished):
                    self._read_session(cassette, sid, tracers, closing.get(sid))
                    if sid in closing:
                        finished.add(sid)
                if stopping:
                    for sid in list(tracers):  # never closed: the recorder marks them incomplete
                        self._read_session(cassette, sid, tracers, "incomplete")
                    return
                time.sleep(READ_INTERVAL)
        except Exception as e:  # noqa: BLE001 - telemetry must never end a recording
            self._failed(f"reading {self.path} failed ({e!r})")
        finally:
            cassette.close()

    def _read_session(self, cassette: Any, sid: int,
                      tracers: dict[int, tuple[SessionTracer, list[int]]],
                      status: str | None) -> None:
        entry = tracers.get(sid)
        if entry is None:
            entry = tracers[sid] = (SessionTracer(cassette.session_by_id(sid),
                                                  cassette=cassette.path.name), [-1])
        tracer, last = entry
        spans: list[SpanData] = []
        for m in cassette.messages(tracer.session, after_seq=last[0]):
            spans += tracer.feed(m)
            last[0] = m.seq
            if len(spans) >= BATCH_SPANS:
                self._put("spans", (tracer.resource(), spans))
                spans = []
        if status is not None:
            tracer.session = cassette.session_by_id(sid)  # its end, as the recorder wrote it
            spans += tracer.finish(status=status)
            del tracers[sid]
        if spans:
            self._put("spans", (tracer.resource(), spans))
        if status is not None:
            root = spans[-1]
            self._put("metrics", SessionMetrics(tracer.resource(), root.start_ns, root.end_ns,
                                                list(tracer.histograms.values())))

    def _put(self, kind: str, item: Any) -> None:
        count = len(item[1]) if kind == "spans" else 0
        self.built += count
        try:
            self._queue.put_nowait((kind, item))
        except queue.Full:
            self.dropped += count
            self._failed(f"the collector at {self.target.shown} is not keeping up")

    # --- the sender -----------------------------------------------------------------------

    def _send_loop(self) -> None:
        try:
            while True:
                kind, item = self._queue.get()
                if kind == "end":
                    return
                try:
                    if kind == "spans":
                        resource, spans = item
                        self._sender.send("traces", encode_spans([(resource, spans)]))
                        self.sent += len(spans)
                    elif kind == "metrics":
                        self._sender.send("metrics", encode_histograms([item]))
                except McprecError as e:
                    if kind == "spans":
                        self.dropped += len(item[1])
                    self._failed(f"OTLP export to {self.target.shown} {e}")
        except Exception as e:  # noqa: BLE001 - telemetry must never end a recording
            self._failed(f"OTLP export stopped ({e!r})")
        finally:
            self._sender.close()

    def _failed(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            _say(f"{reason}; recording goes on, spans are dropped (counted at the end)")
