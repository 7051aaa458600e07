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
from typing import Any, Final, Union

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


def plain(value: Any) -> Any:
    """``value`` with every ``Embedded`` turned back into ordinary JSON values."""
    if isinstance(value, Embedded):
        return plain(value.value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
