"""Placeholders of a value's own JSON type, and JSON held in a string: what the redactor puts
in place of a secret and where it looks."""
from __future__ import annotations

import re
from typing import Any

from .. import wire
from .patterns import _MASK, _TOKEN, PLACEHOLDER, _norm_key


class _Lazy:
    """A regular expression compiled when first used."""

    __slots__ = ("source", "_rx")

    def __init__(self, source: Any) -> None:
        self.source = source
        self._rx: Any = None

    def __getattr__(self, name: str) -> Any:  # sub, finditer, search ...
        if self._rx is None:
            self._rx = re.compile(self.source)
        return getattr(self._rx, name)


def _bare_number(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` (digits) stands as a JSON number: a value between ``:``,
    ``,`` or ``[`` and ``,``, ``}`` or ``]``. Inside a string the test may say yes too; the
    number put there is then still text of a string."""
    i = start - 1
    while i >= 0 and data[i] in b" \t\r\n":
        i -= 1
    if i < 0 or data[i] not in b":,[":
        return False
    j = end
    while j < len(data) and data[j] in b" \t\r\n":
        j += 1
    return j == len(data) or data[j] in b",}]"


_COMPACT = frozenset({"card", "iban", "luhn", "mod97"})
_MIN_NAMED_ENV_LEN = 4
"""``--redact-env NAME``: shorter values are not redacted (they would hit everywhere)."""


def _path_kind(path: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", path)
    return words[-1].lower() if words else "value"


def placeholder_like(value: Any) -> Any:
    """A placeholder of the same JSON type as ``value``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    return PLACEHOLDER


def _placeholder_at(value: Any) -> Any:
    """A scalar's placeholder (the very value when it already reads as one, so that an
    already-redacted message is left as it is); containers and null stay."""
    if isinstance(value, (dict, list)) or value is None:
        return value
    new = placeholder_like(value)
    return value if new == value and str(new) == str(value) else new  # -0.0 reads "-0.0"


def _all_placeholders(value: Any, keys: frozenset[str]) -> bool:
    """Whether every secret-named key already holds a placeholder (an already-redacted message)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if _norm_key(k) in keys and not isinstance(v, (dict, list)) and v is not None:
                if not isinstance(v, bool) and v not in (0, 0.0) and not (
                        isinstance(v, str) and (PLACEHOLDER in v  # e.g. "Bearer [REDACTED]"
                                                or v.startswith(_MASK) or _TOKEN.fullmatch(v))):
                    return False
            elif not _all_placeholders(v, keys):
                return False
        return True
    if isinstance(value, list):
        return all(_all_placeholders(v, keys) for v in value)
    if isinstance(value, str) and value[:1] in _JSON_OPENERS:
        inner = _json_in(value)
        return inner is None or _all_placeholders(inner, keys)
    return True


_JSON_OPENERS = ("{", "[")


def _json_in(text: str) -> Any:
    """The object or array a string holds as JSON (a tool's text content often does), or None."""
    from ..jsonpath import embedded_json

    return embedded_json(text)


def _as_json_text(value: Any, like: str) -> str:
    """``value`` written back as JSON text in the style of ``like``: indented (2 spaces, as the
    SDKs write structured results as text) when it was on several lines, else compact."""
    if "\n" in like:
        import json

        return json.dumps(value, indent=2, ensure_ascii=False)
    return wire.dumps(value).decode()


