"""JSON paths for ``--ignore``, JSON embedded in strings, and leaf-level differences.

Path syntax (JSONPath-style): ``$.result.content[*].text``, ``result.structuredContent.ts``,
``$..timestamp`` (any depth), ``$.result._meta['io.example/key']``. A path may go on into a
string that holds JSON (``$.result.content[0].text.temperature``), and the paths that
``differences()`` reports are written the same way, so they can be pasted into ``--ignore``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal, Union

import orjson

from ..errors import UsageError


class _Token:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ANY: Final = _Token("*")
"""Any key of an object or any item of an array."""
DESCEND: Final = _Token("..")
"""The next segment may match at any depth."""

Segment = Union[str, int, _Token]
Path = tuple[Segment, ...]

_TOKEN = re.compile(
    r"""\.\.|\.|\[\s*(?:(\d+)|(\*)|'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]|([^.\[\]]+)"""
)


def parse_path(text: str) -> Path:
    """``$.a[*].b`` -> ``("a", ANY, "b")``; raises ``UsageError`` on bad syntax."""
    src = text.strip()
    body = src[1:] if src.startswith("$") else src
    out: list[Segment] = []
    pos, dangling = 0, False  # dangling: a '.' or '..' still waits for its key
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None:
            raise _bad(text, f"unexpected {body[pos]!r}")
        tok = m.group(0)
        if tok in (".", ".."):
            if dangling:
                raise _bad(text, "empty segment")
            if tok == "..":
                out.append(DESCEND)
            dangling = True
        elif m.group(5) is not None:
            if out and not dangling:
                raise _bad(text, f"missing '.' before {tok!r}")
            out.append(ANY if tok == "*" else tok)
            dangling = False
        else:
            out.append(_bracket(m))
            dangling = False
        pos = m.end()
    if dangling or not out:
        raise _bad(text, "it ends without a key")
    return tuple(out)


def _bracket(m: re.Match[str]) -> Segment:
    if m.group(1) is not None:
        return int(m.group(1))
    if m.group(2) is not None:
        return ANY
    if m.group(4) is not None:  # "double quoted": a JSON string, as the report writes keys
        try:
            return str(orjson.loads(f'"{m.group(4)}"'))
        except orjson.JSONDecodeError:
            pass
    quoted = m.group(3) if m.group(3) is not None else m.group(4)
    return re.sub(r"\\(.)", r"\1", quoted)


def _bad(text: str, why: str) -> UsageError:
    return UsageError(
        f"cannot parse JSON path {text!r}: {why}; write e.g. $.result.content[*].text, "
        "result.structuredContent.timestamp or $..timestamp"
    )


# --- JSON embedded in strings -----------------------------------------------------------------


@dataclass(frozen=True)
class Embedded:
    """A string that held a JSON object or array, parsed (and maybe pruned by ignores)."""

    value: Any


def embedded_json(text: str) -> Any:
    """The object or array that ``text`` holds, or None when it holds no JSON container."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, (dict, list)) else None


# --- removing ignored parts -------------------------------------------------------------------


def remove_paths(value: Any, paths: tuple[Path, ...]) -> Any:
    """A copy of ``value`` without what ``paths`` point at (list items become None)."""
    for path in paths:
        value = _remove(value, path)
    return value


def _remove(value: Any, path: Path) -> Any:
    if not path:
        return value
    head = path[0]
    if head is DESCEND:
        value = _remove(value, path[1:])
        return _map_children(value, lambda child: _remove(child, path))
    if isinstance(value, str) or isinstance(value, Embedded):
        inner = value.value if isinstance(value, Embedded) else embedded_json(value)
        return value if inner is None else Embedded(_remove(inner, path))
    rest = path[1:]
    if isinstance(value, dict):
        keys = list(value) if head is ANY else [head] if isinstance(head, str) else []
        hit = [k for k in keys if k in value]
        if not hit:
            return value
        out = dict(value)
        for k in hit:
            if rest:
                out[k] = _remove(out[k], rest)
            else:
                del out[k]
        return out
    if isinstance(value, list):
        idx = range(len(value)) if head is ANY else [head] if isinstance(head, int) else []
        hit_i = [i for i in idx if i < len(value)]
        if not hit_i:
            return value
        out_l = list(value)
        for i in hit_i:
            out_l[i] = _remove(out_l[i], rest) if rest else None  # keep positions stable
        return out_l
    return value


def _map_children(value: Any, fn: Any) -> Any:
    if isinstance(value, dict):
        return {k: fn(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fn(v) for v in value]
    if isinstance(value, Embedded):
        return Embedded(_map_children(value.value, fn))
    if isinstance(value, str):
        inner = embedded_json(value)
        return value if inner is None else Embedded(_map_children(inner, fn))
    return value


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


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def join_key(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENT.match(key) else f"{path}[{orjson.dumps(key).decode()}]"


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
            p = f"{path}[{i}]"
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
    try:
        return orjson.dumps(value, default=_embedded_default, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits: slower, exact
        return json.dumps(plain(value), sort_keys=True, separators=(",", ":")).encode()


def canonical_text(value: Any) -> str:
    """Compact JSON text in the key order given (for people)."""
    try:
        return orjson.dumps(value, default=_embedded_default).decode()
    except TypeError:
        return json.dumps(plain(value), separators=(",", ":"), ensure_ascii=False, default=str)


def _embedded_default(value: Any) -> Any:
    if isinstance(value, Embedded):
        return value.value
    raise TypeError


def plain(value: Any) -> Any:
    """``value`` as plain JSON data (embedded JSON back to its parsed form)."""
    if isinstance(value, Embedded):
        return plain(value.value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def short(value: Any, width: int = 80) -> str:
    """Compact JSON text of ``value``, cut to ``width`` characters."""
    text = canonical_text(value)
    return text if len(text) <= width else text[: width - 1] + "…"
