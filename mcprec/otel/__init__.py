"""OpenTelemetry export of recordings: each exchange as a span, durations as histograms.

The spans follow the OpenTelemetry semantic conventions for MCP (``SEMCONV``), which are in
development status: names, attributes and kinds may change in later versions of them.

    spans.py   a session's messages -> spans and duration histograms (pure, no protobuf)
    otlp.py    spans and histograms -> OTLP/HTTP protobuf requests, sent with retries
    live.py    the recorder process's hook: the same spans while recording, off the relay

``otlp.py`` and ``live.py`` need the ``otel`` extra (``pip install 'mcprec[otel]'``).
"""

from __future__ import annotations

from .spans import SEMCONV, SEMCONV_VERSION

__all__ = ["SEMCONV", "SEMCONV_VERSION"]
