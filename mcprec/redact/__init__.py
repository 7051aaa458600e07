"""Redaction: what must never reach a cassette in clear.

One pipeline, applied when recording (before anything touches disk) and to incoming requests
when matching during replay, so that redacted requests still match. Replacements keep each
value's JSON type (a string stays a string, a number a number), so redacted messages stay valid
for replay: protocol fields such as ``id``, ``progressToken`` or ``maxTokens`` are never touched.

Defaults: secret HTTP headers (the header rules below); bearer tokens and well-known key formats
anywhere in a message; values of secret-named keys (``password``, ``api_key``, ``client_secret`` ...); the values of the
process's secret-named environment variables. User rules add JSON paths, key names and regexes,
from the command line or from ``[tool.mcprec.redact]`` in pyproject.toml / ``[redact]`` in
mcprec.toml.

Packs group rules: ``credentials`` (the defaults above), the bundled ``pii`` and ``paths``
(``mcprec.redact.packs``, loaded only when used), and user packs from TOML files. Each rule
replaces what it finds by one of three strategies: ``replace`` (a fixed text), ``hash`` (a
stable pseudonym, ``<email:3f9a1c2b>``, keyed by a salt) or ``mask`` (``****1111``). The
credentials rules always replace. ``Rules.manifest`` is what a cassette stores per session so
that replay, verify, redact and scan apply the same rules again (``mcprec.redact.manifest``).
"""

from __future__ import annotations

# The public names, imported when first used: replay imports ``redact.manifest`` alone (a
# recording's rules, to know whether its requests need redacting at all), and must not pay for
# the redactor's patterns (~18 ms of import) before its first answer.
_EXPORTS = {
    "KEPT_HEADERS": "headers",
    "SCHEME_KEPT_HEADERS": "headers",
    "SECRET_HEADER_WORDS": "headers",
    "KNOWN_SECRET_PATTERNS": "patterns",
    "PLACEHOLDER": "patterns",
    "SALT_ENV": "patterns",
    "SECRET_KEYS": "patterns",
    "STRATEGIES": "patterns",
    "env_secrets": "patterns",
    "Redactor": "redactor",
    "default_redactor": "redactor",
    "REDACT_KEYS": "rules",
    "Rules": "rules",
    "rules_from_config": "rules",
    "split_packs": "rules",
    "placeholder_like": "values",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .headers import KEPT_HEADERS, SCHEME_KEPT_HEADERS, SECRET_HEADER_WORDS
    from .patterns import (
        KNOWN_SECRET_PATTERNS,
        PLACEHOLDER,
        SALT_ENV,
        SECRET_KEYS,
        STRATEGIES,
        env_secrets,
    )
    from .redactor import Redactor, default_redactor
    from .rules import REDACT_KEYS, Rules, rules_from_config, split_packs
    from .values import placeholder_like

__all__ = [
    "KEPT_HEADERS",
    "KNOWN_SECRET_PATTERNS",
    "PLACEHOLDER",
    "REDACT_KEYS",
    "SALT_ENV",
    "SCHEME_KEPT_HEADERS",
    "SECRET_HEADER_WORDS",
    "SECRET_KEYS",
    "STRATEGIES",
    "Redactor",
    "Rules",
    "default_redactor",
    "env_secrets",
    "placeholder_like",
    "rules_from_config",
    "split_packs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcprec.redact' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
