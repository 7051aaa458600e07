"""JSON paths for ``--ignore``, JSON embedded in strings, and leaf-level differences.

Path syntax (JSONPath-style): ``$.result.content[*].text``, ``result.structuredContent.ts``,
``$..timestamp`` (any depth), ``$.result._meta['io.example/key']``. A path may go on into a
string that holds JSON (``$.result.content[0].text.temperature``), and the paths that
``differences()`` reports are written the same way, so they can be pasted into ``--ignore``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .. import wire
from ..jsonpath import (  # noqa: F401 - re-exported: the path grammar lives in mcprec.jsonpath
    ANY, DESCEND, Embedded, LeafKind, Path, Segment, embedded_json, join_key, leaf_differences,
    parse_path, plain, remove_paths,
)


# --- differences ------------------------------------------------------------------------------

DiffKind = LeafKind


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
    return [PayloadDifference(p, before, after, kind, where)
            for p, before, after, kind in leaf_differences(a, b, path, embedded=True)]


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
