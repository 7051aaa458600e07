"""Redaction: what must never reach a cassette in clear.

One place, applied when recording and when matching during replay, so redacted requests match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PLACEHOLDER = "[REDACTED]"

SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "x-auth-token", "x-access-token", "x-csrf-token", "x-amz-security-token",
})
_SECRET_HEADER_WORDS = re.compile(r"(api[-_]?key|token|secret|passw(or)?d|auth|session-key|cookie)",
                                  re.I)
_KEEP_HEADERS = frozenset({"mcp-session-id", "mcp-protocol-version", "last-event-id"})


def is_secret_header(name: str) -> bool:
    lower = name.lower()
    if lower in _KEEP_HEADERS:
        return False
    return lower in SECRET_HEADERS or bool(_SECRET_HEADER_WORDS.search(lower))


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict for the cassette, secret values replaced (scheme kept for Authorization).

    Repeated headers are joined with ", " as HTTP allows.
    """
    out: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        if is_secret_header(lower):
            scheme = value.split(" ", 1)[0] if lower.endswith("authorization") and " " in value \
                else ""
            value = f"{scheme} {PLACEHOLDER}" if scheme else PLACEHOLDER
        out[lower] = f"{out[lower]}, {value}" if lower in out else value
    return out
