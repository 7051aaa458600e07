"""HTTP answers that are not JSON-RPC (a plain-text ``401``, a ``400`` whose JSON has no id): the
JSON-RPC error the client's call ends with, as the recording proxy records it and as verify
records the live server's, so the two compare."""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from .. import wire

HTTP_ANSWER_HEADERS = ("content-type", "www-authenticate", "retry-after", "allow")
"""The headers of an answer that is not JSON-RPC (a 401) that replay serves again."""


class Headers(Protocol):
    """Response headers, looked up case-insensitively (httpx's, the upstream pool's)."""

    def get(self, name: str, default: Any = None) -> Any: ...


def answers(body: bytes, rid: str) -> bool:
    """Whether ``body`` is JSON-RPC answering the request ``rid`` (or a batch's answers)."""
    c = wire.classify(body)
    return c.kind == wire.BATCH or (c.kind in (wire.RESPONSE, wire.ERROR) and c.rpc_id == rid)


def http_answer(rid: str, status: int, headers: Headers, body: bytes) -> bytes:
    """An answer that is not JSON-RPC, as the JSON-RPC error to the request ``rid`` (its id's
    JSON text); ``data`` holds what HTTP said, for replay to say it again."""
    text = body.decode("utf-8", "replace")
    first = text.strip().splitlines()[0][:200] if text.strip() else ""
    kept = {k: v for k in HTTP_ANSWER_HEADERS if (v := headers.get(k)) is not None}
    return wire.error_message(
        orjson.loads(rid), -32000, f"HTTP {status}" + (f": {first}" if first else ""),
        {"mcprec": "http_answer", "status": status, "headers": kept, "body": text})


def http_answer_note(status: int, content_type: str | None) -> str:
    """What the row of such an answer says happened."""
    return (f"the upstream answered HTTP {status} ({content_type or 'no content type'}), "
            "not JSON-RPC")
