"""The header rules, and their only copy: docs/secrets.md lists them as they are here (a test
compares). Headers are redacted in the cassette only; the upstream gets them as sent."""

from __future__ import annotations

KEPT_HEADERS = ("mcp-session-id", "mcp-protocol-version", "last-event-id", "www-authenticate")
"""Kept as sent by the default rules: replay needs them, and they carry no credentials."""
SCHEME_KEPT_HEADERS = ("authorization", "proxy-authorization")
"""Redacted with their scheme kept (``Bearer [REDACTED]``)."""
SECRET_HEADER_WORDS = ("key", "credential", "signature", "secret", "token", "auth", "passw",
                       "cookie", "session")
"""Any other header whose name contains one of these is redacted (``[REDACTED]``)."""


def _norm_header(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")
