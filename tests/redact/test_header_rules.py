"""The header rules: one list in mcprec/redact/headers.py, listed exactly in docs/secrets.md, applied
to names case-insensitively, with --redact-key names added and the MCP headers kept."""

from __future__ import annotations

import re

import pytest

from support.helpers import REPO
from mcprec.redact import (
    KEPT_HEADERS, PLACEHOLDER, SCHEME_KEPT_HEADERS, SECRET_HEADER_WORDS, Redactor, Rules,
)

CANONICAL = {"mcp-session-id": "Mcp-Session-Id", "mcp-protocol-version": "MCP-Protocol-Version",
             "last-event-id": "Last-Event-ID", "www-authenticate": "WWW-Authenticate",
             "authorization": "Authorization", "proxy-authorization": "Proxy-Authorization"}


def _docs_rules() -> list[str]:
    text = (REPO / "docs" / "secrets.md").read_text()
    block = re.search(r"<!-- header rules:.*?-->\n(.*?)<!-- end of header rules -->", text, re.S)
    assert block, "docs/secrets.md has no marked list of header rules"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_docs_list_the_rules_of_the_code_exactly() -> None:
    """docs/secrets.md lists the kept, scheme-kept and secret-word rules exactly as the code."""
    def names(items: tuple[str, ...]) -> str:
        return ", ".join(f"`{CANONICAL[n]}`" for n in items)

    assert _docs_rules() == [
        f"- kept as sent: {names(KEPT_HEADERS)}",
        f"- redacted with their scheme kept (`Bearer [REDACTED]`): {names(SCHEME_KEPT_HEADERS)}",
        "- redacted (`[REDACTED]`) when the name contains: "
        + ", ".join(f"`{w}`" for w in SECRET_HEADER_WORDS),
    ]


@pytest.mark.parametrize("name", ["X-Access-Key", "X-Signature", "X-Api-Key", "Cookie",
                                  "Set-Cookie", "X-Auth-Token", "X-Client-Secret", "X-Password",
                                  "X-Credential", "X-Session", "Idempotency-KEY"])
def test_secret_names_are_redacted(name: str) -> None:
    """Names containing a secret word, in any case, have their values redacted."""
    assert Redactor().redact_headers([(name, "v4lue-1234")]) == {name.lower(): PLACEHOLDER}


@pytest.mark.parametrize("name", ["Mcp-Session-Id", "MCP-Protocol-Version", "Last-Event-ID",
                                  "Content-Type", "Accept", "User-Agent"])
def test_other_names_are_kept(name: str) -> None:
    """The MCP headers and ordinary headers are kept as sent."""
    assert Redactor().redact_headers([(name, "v")]) == {name.lower(): "v"}


def test_challenge_is_kept() -> None:
    """WWW-Authenticate (a challenge, which replay serves again) is kept."""
    value = 'Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/x"'
    assert Redactor().redact_headers([("WWW-Authenticate", value)]) == {"www-authenticate": value}


def test_authorization_keeps_its_scheme() -> None:
    """Authorization and Proxy-Authorization keep their scheme, nothing else."""
    out = Redactor().redact_headers([("Authorization", "Bearer abc.def"),
                                     ("Proxy-Authorization", "Basic Zm9vOmJhcg==")])
    assert out == {"authorization": "Bearer [REDACTED]",
                   "proxy-authorization": "Basic [REDACTED]"}


@pytest.mark.parametrize("given", ["x-tenant-pin", "X_TENANT_PIN", "XTenantPin"])
def test_redact_key_applies_to_header_names(given: str) -> None:
    """--redact-key names headers too, compared ignoring case, '_' and '-'."""
    out = Redactor(Rules(keys=(given,))).redact_headers([("X-Tenant-Pin", "4821")])
    assert out == {"x-tenant-pin": PLACEHOLDER}


def test_defaults_off_keeps_headers_but_not_redact_keys() -> None:
    """defaults = false turns the header rules off; --redact-key names still apply."""
    r = Redactor(Rules(defaults=False, env=False, keys=("x-pin",)))
    assert r.redact_headers([("Authorization", "Bearer abc"), ("X-Pin", "1")]) == {
        "authorization": "Bearer abc", "x-pin": PLACEHOLDER}


def test_scan_headers_names_the_ones_in_clear() -> None:
    """scan_headers flags secret headers stored in clear, not those already redacted."""
    r = Redactor(Rules(keys=("x-tenant-pin",)))
    found = r.scan_headers({"x-access-key": "abc", "authorization": "Bearer [REDACTED]",
                            "x-tenant-pin": "1", "accept": "*/*"})
    assert found == ["secret header x-access-key", "secret header x-tenant-pin"]
