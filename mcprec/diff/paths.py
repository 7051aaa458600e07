"""JSON paths for ``--ignore``, JSON embedded in strings, and leaf-level differences.

Path syntax (JSONPath-style): ``$.result.content[*].text``, ``result.structuredContent.ts``,
``$..timestamp`` (any depth), ``$.result._meta['io.example/key']``. A path may go on into a
string that holds JSON (``$.result.content[0].text.temperature``), and the paths that
``differences()`` reports are written the same way, so they can be pasted into ``--ignore``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from .. import wire
from ..jsonpath import (  # noqa: F401 - re-exported: the path grammar lives in mcprec.jsonpath
    ANY, DESCEND, Embedded, Path, Segment, embedded_json, join_key, parse_path, plain,
    remove_paths,
)


# --- differences ------------------------------------------------------------------------------

DiffKind = Literal["changed", "removed", "added"]


@dataclass(frozen=True)
class PayloadDifference:
    """One leaf that differs; ``where`` names the message (``response``, a notification...)."""

    path: str
    before: Any
    after: Any
    kind: DiffKind = "changed"
    where: str = "response"

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "path": self.path, "kind": self.kind,
                "before": plain(self.before), "after": plain(self.after)}


def differences(a: Any, b: Any, path: str = "$", where: str = "response") -> list[PayloadDifference]:
    """Leaf-level differences from ``a`` to ``b``; strings holding JSON compare structurally."""
    out: list[PayloadDifference] = []
    _diff(a, b, path, where, out)
    return out


def _diff(a: Any, b: Any, path: str, where: str, out: list[PayloadDifference]) -> None:
    # no `==` on containers: Python says {"x": 1} == {"x": True}; JSON does not
    if type(a) is type(b) and not isinstance(a, (dict, list, Embedded)) and a == b:
        return
    a, b = _unwrap(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                out.append(PayloadDifference(join_key(path, k), a[k], None, "removed", where))
            else:
                _diff(a[k], b[k], join_key(path, k), where, out)
        for k in b:
            if k not in a:
                out.append(PayloadDifference(join_key(path, k), None, b[k], "added", where))
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = join_key(path, i)
            if i >= len(b):
                out.append(PayloadDifference(p, a[i], None, "removed", where))
            elif i >= len(a):
                out.append(PayloadDifference(p, None, b[i], "added", where))
            else:
                _diff(a[i], b[i], p, where, out)
        return
    if a == b and type(a) is type(b):
        return
    out.append(PayloadDifference(path, a, b, "changed", where))


def _unwrap(a: Any, b: Any) -> tuple[Any, Any]:
    """Compare two strings (or embedded values) that both hold JSON as their parsed values."""
    if not isinstance(a, (str, Embedded)) or not isinstance(b, (str, Embedded)):
        return a, b
    va = a.value if isinstance(a, Embedded) else embedded_json(a)
    vb = b.value if isinstance(b, Embedded) else embedded_json(b)
    if va is None or vb is None:
        return a, b
    return va, vb


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are exactly equal (types included, key order not)."""
    return canonical(a) == canonical(b)


def canonical(value: Any) -> bytes:
    try:  # orjson reads Embedded values in place, with no plain() copy
        return orjson.dumps(value, default=_embedded_default, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits: slower, exact
        return wire.dumps(plain(value), sort_keys=True)


def canonical_text(value: Any) -> str:
    """Compact JSON text in the key order given (for people)."""
    try:
        return orjson.dumps(value, default=_embedded_default).decode()
    except TypeError:  # an integer beyond 64 bits
        return wire.dumps(plain(value)).decode()


def _embedded_default(value: Any) -> Any:
    if isinstance(value, Embedded):
        return value.value
    raise TypeError


def short(value: Any, width: int = 80) -> str:
    """Compact JSON text of ``value``, cut to ``width`` characters."""
    text = canonical_text(value)
    return text if len(text) <= width else text[: width - 1] + "…"
