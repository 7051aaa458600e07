"""A real MCP server (official Python SDK) whose answers hold personal data, for redaction tests.

Run: ``python tests/peers/pii_server.py`` (stdio). Deterministic. Tools:

- ``lookup_customer(email)``: echoes the email and returns every kind of PII the ``pii`` pack
  knows (in text and in structured content, a card number also as a bare JSON number), with
  look-alikes that must survive redaction: an order number of 16 digits failing the Luhn
  check, an IBAN-shaped string failing mod 97, a loopback address, a time of day.
- ``account(iban)``: answers with the IBAN it was given, a card number and an IP address.
- ``whoami()``: the home directory and an absolute path (the ``paths`` pack).
- ``setting(name)``: the value of the environment variable ``name`` (``--redact-env``).
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer

# every value the pii pack must catch, by kind (tests import this table)
PII = {
    "email": "ann.lee@example.com",
    "email2": "bob.stone@example.org",
    "phone": "+1 415 555 2671",
    "phone_us": "(212) 555-0198",
    "ipv4": "203.0.113.54",
    "ipv6": "2001:db8:85a3::8a2e:370:7334",
    "iban": "DE89 3704 0044 0532 0130 00",
    "iban_compact": "GB82WEST12345698765432",
    "card": "4111 1111 1111 1111",
    "card_compact": "5555555555554444",
    "ssn": "123-45-6789",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ubGVlIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
    "pem": "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n"
           "-----END PRIVATE KEY-----",
}
BARE_CARD = 4012888888881881
"""A card number that stands as a JSON number in structured content."""
LOOKALIKES = {
    "order": "1234567812345678",  # 16 digits, fails Luhn
    "iban_bad": "GB82WEST12345698765433",  # IBAN-shaped, fails mod 97
    "loopback": "127.0.0.1",
    "time": "10:30:00",
    "version": "1.4.2",
    "date": "2026-12-03",
}
BARE_ORDER = 1234567812345678
CUSTOMER_ID = "CUST-004211"
"""For user packs: no bundled rule knows it."""

server = MCPServer(name="mcprec-pii-server", version="1.0.0")


@server.tool(description="Look a customer up by email.")
def lookup_customer(email: str) -> dict[str, object]:
    text = "; ".join(f"{k}: {v}" for k, v in PII.items())
    look = "; ".join(f"{k}: {v}" for k, v in LOOKALIKES.items())
    return {"asked": email, "summary": f"Customer {email} ({CUSTOMER_ID}). {text}. Also {look}.",
            "card_number": BARE_CARD, "order_number": BARE_ORDER,
            "contact": {"email": email, "backup": PII["email2"], "ip": PII["ipv4"]}}


@server.tool(description="An account by IBAN.")
def account(iban: str) -> str:
    return f"account {iban} card {PII['card']} last login from {PII['ipv4']}"


@server.tool(description="Where the server runs.")
def whoami() -> str:
    home = os.path.expanduser("~")
    return f"home {home}/projects/crm, config /etc/crm/settings.toml, see https://example.com/a/b"


@server.tool(description="A setting of the server's environment.")
def setting(name: str) -> str:
    return f"{name} is {os.environ.get(name, '')}"


if __name__ == "__main__":
    print("pii server starting", file=sys.stderr, flush=True)
    server.run("stdio")
