"""JSON paths: ``$.result.content[*].text``, ``params.arguments.ts``, ``$..timestamp`` (any
depth), ``$.result._meta['io.example/key']``. A path may go on into a string that holds JSON
(``$.result.content[0].text.temperature``). Used to ignore parts of messages when matching and
diffing, and to redact them; every path mcprec prints is written by ``join_key`` here, so it
parses back to the same place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, Union

import orjson

from . import wire
from .errors import UsageError


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
    if m.group(4) is not None:  # "double quoted": a JSON string, as join_key writes keys
        try:  # json, not orjson: it reads back the lone surrogates join_key may write
            return str(json.loads(f'"{m.group(4)}"'))
        except ValueError:
            pass
    quoted = m.group(3) if m.group(3) is not None else m.group(4)
    return re.sub(r"\\(.)", r"\1", quoted)


def _bad(text: str, why: str) -> UsageError:
    return UsageError(
        f"cannot parse JSON path {text!r}: {why}; write e.g. $.result.content[*].text, "
        "result.structuredContent.timestamp or $..timestamp"
    )


# --- writing paths ----------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


def join_key(path: str, key: str | int) -> str:
    """``path`` one step further down: ``params.city``, ``$.content[0]``,
    ``$.result["io.example/key"]``. A key the dotted form cannot hold (dots, slashes, brackets,
    ``*``, digits first, empty...) is written as a JSON string in brackets; ``path`` may be
    ``""`` (the first key then goes without a dot)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    # json, not orjson: a key parsed by wire.loads's exact path may hold a lone surrogate
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def format_path(steps: Iterable[str | int], root: str = "$") -> str:
    """``("result", "content", 0)`` -> ``$.result.content[0]``; ``parse_path`` reads it back."""
    path = root
    for step in steps:
        path = join_key(path, step)
    return path


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
        value = wire.loads(text.encode())  # exact: integers past 64 bits stay integers
    except (orjson.JSONDecodeError, UnicodeEncodeError):
        return None
    return value if isinstance(value, (dict, list)) else None


# --- leaf differences ---------------------------------------------------------------------------

LeafKind = Literal["changed", "removed", "added"]
Leaf = tuple[str, Any, Any, LeafKind]
"""One leaf that differs: ``(path, before, after, kind)``, kind ``changed``, ``removed`` (only
before) or ``added`` (only after)."""


def leaf_differences(a: Any, b: Any, path: str = "$", *, embedded: bool = False,
                     sort_keys: bool = False) -> list[Leaf]:
    """Leaf-level differences from ``a`` to ``b``, each at a path that ``--ignore`` takes back.

    Types count (JSON's ``1`` is not ``true``, though Python's ``==`` says so). ``embedded``:
    strings that both hold JSON compare as their parsed values (the diff's view of tool results
    that carry JSON as text). ``sort_keys``: an object's keys in sorted order, else ``a``'s
    order and then ``b``'s new keys. Replay's no-match report and the diff both report with
    this one walker."""
    out: list[Leaf] = []
    _leaves(a, b, path, embedded, sort_keys, out)
    return out


def _leaves(a: Any, b: Any, path: str, embedded: bool, sort_keys: bool, out: list[Leaf]) -> None:
    if type(a) is type(b) and not isinstance(a, (dict, list, Embedded)) and a == b:
        return
    if embedded:
        a, b = _both_parsed(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b)) if sort_keys else [*a, *(k for k in b if k not in a)]
        for k in keys:
            p = join_key(path, k)
            if k not in b:
                out.append((p, a[k], None, "removed"))
            elif k not in a:
                out.append((p, None, b[k], "added"))
            else:
                _leaves(a[k], b[k], p, embedded, sort_keys, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = join_key(path, i)
            if i >= len(b):
                out.append((p, a[i], None, "removed"))
            elif i >= len(a):
                out.append((p, None, b[i], "added"))
            else:
                _leaves(a[i], b[i], p, embedded, sort_keys, out)
        return
    if a == b and type(a) is type(b):
        return
    out.append((path, a, b, "changed"))


def _both_parsed(a: Any, b: Any) -> tuple[Any, Any]:
    """Two strings (or embedded values) that both hold JSON, as their parsed values."""
    if not isinstance(a, (str, Embedded)) or not isinstance(b, (str, Embedded)):
        return a, b
    va = a.value if isinstance(a, Embedded) else embedded_json(a)
    vb = b.value if isinstance(b, Embedded) else embedded_json(b)
    if va is None or vb is None:
        return a, b
    return va, vb


# --- changing what a path points at ----------------------------------------------------------

REMOVE: Final = _Token("remove")
"""What ``update_path``'s ``at`` returns to take a key out (a list item becomes None)."""


def update_path(value: Any, path: Path, at: Callable[[Any], Any], *,
                into_strings: bool = False) -> Any:
    """``value`` with each thing ``path`` points at replaced by ``at(thing)``, or taken out when
    ``at`` returns ``REMOVE`` (list items become None, so positions stay). Containers are copied
    only where something changed: when nothing did, ``value`` itself comes back.

    ``into_strings``: the path goes on into strings that hold JSON; such a string on the way
    comes back parsed, as ``Embedded`` (changed or not, so that both sides of a comparison
    look alike).
    """
    new = _update(value, path, at, into_strings)
    return value if new is REMOVE else new


def _update(value: Any, path: Path, at: Callable[[Any], Any], into: bool) -> Any:
    if not path:
        return at(value)
    head = path[0]
    if head is DESCEND:
        value = _update(value, path[1:], at, into)
        return each_child(value, lambda child: _update(child, path, at, into), into)
    if into and isinstance(value, (str, Embedded)):
        inner = value.value if isinstance(value, Embedded) else embedded_json(value)
        return value if inner is None else Embedded(_update(inner, path, at, into))
    rest = path[1:]
    if isinstance(value, dict):
        keys = value if head is ANY else (head,) if isinstance(head, str) and head in value else ()
        out: dict[str, Any] | None = None
        for k in keys:
            new = _update(value[k], rest, at, into)
            if new is not value[k]:
                out = dict(value) if out is None else out
                if new is REMOVE:
                    del out[k]
                else:
                    out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        idx = range(len(value)) if head is ANY else (
            (head,) if isinstance(head, int) and head < len(value) else ())
        out_l: list[Any] | None = None
        for i in idx:
            new = _update(value[i], rest, at, into)
            if new is not value[i]:
                out_l = list(value) if out_l is None else out_l
                out_l[i] = None if new is REMOVE else new
        return value if out_l is None else out_l
    return value


def each_child(value: Any, fn: Callable[[Any], Any], into: bool = False) -> Any:
    """``value`` with ``fn`` applied to each of its children (copied only if one changed);
    ``into``: a string holding JSON counts as its parsed value. The one container walk of
    ``--ignore``, ``--redact-path`` and the normalizers."""
    if isinstance(value, dict):
        new = {k: fn(v) for k, v in value.items()}
        return value if all(new[k] is v for k, v in value.items()) else new
    if isinstance(value, list):
        new_l = [fn(v) for v in value]
        return value if all(a is b for a, b in zip(new_l, value)) else new_l
    if isinstance(value, Embedded):
        return Embedded(each_child(value.value, fn, into))
    if into and isinstance(value, str):
        inner = embedded_json(value)
        return value if inner is None else Embedded(each_child(inner, fn, into))
    return value


def remove_paths(value: Any, paths: tuple[Path, ...]) -> Any:
    """``value`` without what ``paths`` point at (list items become None), going on into strings
    that hold JSON."""
    for path in paths:
        value = update_path(value, path, _remove, into_strings=True)
    return value


def _remove(value: Any) -> Any:
    return REMOVE


def plain(value: Any) -> Any:
    """``value`` with every ``Embedded`` turned back into ordinary JSON values."""
    if isinstance(value, Embedded):
        return plain(value.value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
