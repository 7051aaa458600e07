"""Recording: a tap between a client and a server, and every message it relays written to a
cassette.

    from mcprec.record import record_stdio, record_http

Modules: ``api`` (``record_stdio``, ``record_http``: the tap or the proxy with a recording),
``process`` (the tap's end of the recorder process) and ``child`` (the recorder process itself),
``writer`` (the writing thread: batches of rows, committed), ``recorder`` (a message turned
into a row: redacted, classified, paired, its context), ``http_sessions`` (the proxy's cassette
sessions), ``salt`` (the redaction salt and manifest bound to a recording).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .api import check_command, open_recording, record_http, record_stdio

__all__ = ["check_command", "open_recording", "record_http", "record_stdio"]


def __getattr__(name: str) -> Any:
    # lazily: the recorder process (``python -m mcprec.record.child``) imports this package
    # first, and must not pay for the tap's asyncio and transports
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'mcprec.record' has no attribute {name!r}")
