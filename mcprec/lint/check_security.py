"""The security pack: what a model reads from a server (names, descriptions, schema texts,
instructions, results) checked for injection phrasing and hidden characters; lookalike and
duplicate names; secrets left in the traffic; and tools whose description changed since a
baseline recording."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import orjson

from .. import wire
from ..redact import PLACEHOLDER, Redactor
from .model import rule
from .patterns import (TOKEN, Pattern, describe, injection, invisible, looks_random, scripts,
                       skeleton)
from .walk import Checker, Item

INJECTION = rule("SEC001", "injection-phrasing", "security", "error",
                 "Instruction-shaped or injection phrasing in what the model reads about a "
                 "server: names, descriptions, schema texts, instructions.")
RESULT_INJECTION = rule("SEC002", "instruction-shaped-result", "security", "warning",
                        "Instruction-shaped text in a tool result or resource contents.")
INVISIBLE = rule("SEC003", "invisible-characters", "security", "error",
                 "Zero-width, invisible or bidi-control characters in anything a model reads.")
DUPLICATE = rule("SEC004", "duplicate-name", "security", "warning",
                 "The same tool or prompt name twice in one listing (one shadows the other).")
LOOKALIKE = rule("SEC005", "lookalike-name", "security", "warning",
                 "A tool or prompt name with non-ASCII, mixed-script or lookalike letters.")
SECRET = rule("SEC006", "secret", "security", "warning",
              "Something that looks like a secret: a known key format, a secret-named field "
              "(the redaction engine's detectors) or a high-entropy token.")
CHANGED = rule("SEC007", "changed-since-baseline", "security", "error",
               "A tool whose description, title or schemas differ from the --baseline "
               "recording (a rug pull: the model reads what changed).")

# values that are opaque by design: high entropy there is no secret
_OPAQUE_KEYS = frozenset({"requestState", "cursor", "nextCursor", "progressToken", "id",
                          "requestId", "taskId", "elicitationId", "data", "blob", "etag",
                          "io.modelcontextprotocol/subscriptionId", "signature", "hash",
                          "sha", "sha256", "digest", "checksum"})
_LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
          "resources/templates/list": "resourceTemplates"}
_SINGULAR = {"tools": "tool", "prompts": "prompt", "resources": "resource",
             "resourceTemplates": "resource template"}
_TEXT_FIELDS = ("title", "description")
_SCHEMA_TEXT_KEYS = ("description", "title")
_MAX_DEPTH = 24

Surface = tuple[str, str, tuple[Any, ...], str]
"""(kind, text, path steps, what it is)."""


class SecurityChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset({INJECTION, RESULT_INJECTION, INVISIBLE,
                                                 DUPLICATE, LOOKALIKE, SECRET, CHANGED})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        opts = self.ctx.options
        self.patterns: list[Pattern] = [p for p in getattr(opts, "patterns", ())
                                        if self.ctx.on(p.rule.code)]
        self.redactor: Redactor | None = getattr(opts, "redactor", None)
        self.baseline: dict[str, dict[str, Any]] | None = getattr(opts, "baseline_tools", None)
        self._listing: dict[str, dict[str, int]] = {}
        """Per list field: name -> seq where it appeared, for the listing being paged."""
        self._changed: set[str] = set()

    @classmethod
    def with_codes(cls, codes: frozenset[str]) -> type[SecurityChecker]:
        """This checker, also run for the codes of user patterns."""
        return type("SecurityChecker", (cls,), {"codes": cls.codes | codes})

    def message(self, item: Item) -> None:
        if self.ctx.on(SECRET) and item.kind != wire.INVALID:
            self._secrets(item)
        if item.kind != wire.RESPONSE or item.request is None or item.answered_before:
            return
        result = item.result
        if not isinstance(result, dict):
            return
        for kind, text, steps, what in surfaces(item.method or "", result):
            self._text(item, kind, text, ("result", *steps), what)
        field = _LISTS.get(item.method or "")
        if field is not None:
            self._names(item, result, field)
        if item.method == "tools/list" and self.baseline is not None and self.ctx.on(CHANGED):
            self._against_baseline(item, result)

    # --- texts ------------------------------------------------------------------------------

    def _text(self, item: Item, kind: str, text: str, steps: tuple[Any, ...], what: str) -> None:
        ctx = self.ctx
        if kind in ("name", "description", "schema", "instructions") and ctx.on(INJECTION) \
                or kind == "result" and ctx.on(RESULT_INJECTION):
            for label, matched in injection(text):
                ctx.report(INJECTION if kind != "result" else RESULT_INJECTION, item,
                           f"{what}: {label}: {_quote(matched)}", item.path(*steps))
        hidden = invisible(text)
        if hidden:
            ctx.report(INVISIBLE, item, f"{what} holds {', '.join(hidden)}", item.path(*steps))
        for p in self.patterns:
            if kind in p.surfaces:
                m = p.regex.search(text)
                if m is not None:
                    ctx.report(p.rule.code, item, f"{what}: {p.message}: {_quote(m.group(0))}",
                               item.path(*steps), rule_name=p.rule.name)

    # --- names ------------------------------------------------------------------------------

    def _names(self, item: Item, result: dict[str, Any], field: str) -> None:
        entries = result.get(field)
        if not isinstance(entries, list):
            return
        req = item.request
        first_page = not (isinstance(req.params, dict) and req.params.get("cursor")) \
            if req is not None else True
        seen = self._listing.setdefault(field, {})
        if first_page:
            seen.clear()
        one = _SINGULAR[field]
        for i, entry in enumerate(entries):
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                continue
            path = item.path("result", field, i, "name")
            if field in ("tools", "prompts"):
                if name in seen:
                    self.ctx.report(DUPLICATE, item, f"{one} {name!r} is listed twice (first "
                                    f"at seq {seen[name]}); one shadows the other", path)
                self._lookalike(item, name, one, seen, path)
            seen.setdefault(name, item.seq)

    def _lookalike(self, item: Item, name: str, one: str, seen: dict[str, int],
                   path: str) -> None:
        if name.isascii():
            return
        odd = ", ".join(dict.fromkeys(describe(c) for c in name if not c.isascii()))
        found = scripts(name)
        twin = next((other for other in seen if other != name
                     and skeleton(other) == skeleton(name)), None)
        if twin is not None:
            why = f"looks like {one} {twin!r}"
        elif len(found) > 1:
            why = f"mixes scripts ({', '.join(found)})"
        else:
            why = "is not ASCII"
        self.ctx.report(LOOKALIKE, item, f"{one} name {name!r} {why}: {odd}", path)

    # --- secrets ----------------------------------------------------------------------------

    def _secrets(self, item: Item) -> None:
        if item.obj is None:
            return
        data = item.raw if item.raw is not None else wire.dumps(item.obj)
        kinds = self.redactor.scan(data) if self.redactor is not None else []
        tokens = [t.decode() for t in TOKEN.findall(data) if looks_random(t.decode())]
        if not kinds and not tokens:
            return
        for steps, key, text in _strings(item.obj):
            if key in _OPAQUE_KEYS or PLACEHOLDER == text:
                continue
            what = None
            if kinds and self.redactor is not None:
                hit = self.redactor.scan(orjson.dumps({key or "value": text}))
                what = ", ".join(hit) if hit else None
            if what is None:
                token = next((t for t in tokens if t in text), None)
                if token is not None and not text.startswith("data:"):
                    what = f"a high-entropy token {_mask(token)}"
            if what is not None:
                self.ctx.report(SECRET, item, f"looks like a secret: {what}", item.path(*steps))

    # --- baseline ---------------------------------------------------------------------------

    def _against_baseline(self, item: Item, result: dict[str, Any]) -> None:
        assert self.baseline is not None
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        for i, tool in enumerate(tools):
            name = tool.get("name") if isinstance(tool, dict) else None
            old = self.baseline.get(name) if isinstance(name, str) else None
            if old is None or name in self._changed:
                continue
            changed = [f for f in ("description", "title", "inputSchema", "outputSchema",
                                   "annotations") if _canon(tool.get(f)) != _canon(old.get(f))]
            if changed:
                self._changed.add(name)  # type: ignore[arg-type]
                field = changed[0]
                self.ctx.report(CHANGED, item, f"tool {name!r}: {', '.join(changed)} changed "
                                f"since the baseline{_change(old.get(field), tool.get(field))}",
                                item.path("result", "tools", i, field))


def surfaces(method: str, result: dict[str, Any]) -> Iterator[Surface]:
    """The texts of a result that reach a model, with their kind and place."""
    field = _LISTS.get(method)
    if field is not None:
        entries = result.get(field)
        for i, e in enumerate(entries if isinstance(entries, list) else ()):
            if not isinstance(e, dict):
                continue
            label = f"{_SINGULAR[field]} {e.get('name')!r}"
            if isinstance(e.get("name"), str):
                yield "name", e["name"], (field, i, "name"), f"{label} name"
            for f in _TEXT_FIELDS:
                if isinstance(e.get(f), str):
                    yield "description", e[f], (field, i, f), f"{label} {f}"
            ann = e.get("annotations")
            if isinstance(ann, dict) and isinstance(ann.get("title"), str):
                yield "description", ann["title"], (field, i, "annotations", "title"), \
                    f"{label} title"
            for f in ("inputSchema", "outputSchema"):
                yield from _schema_texts(e.get(f), (field, i, f), f"{label} {f}", 0)
            args = e.get("arguments")
            for j, a in enumerate(args if isinstance(args, list) else ()):
                for f in ("name", "title", "description"):
                    if isinstance(a, dict) and isinstance(a.get(f), str):
                        yield "description", a[f], (field, i, "arguments", j, f), \
                            f"{label} argument {f}"
    elif method in ("initialize", "server/discover"):
        if isinstance(result.get("instructions"), str):
            yield "instructions", result["instructions"], ("instructions",), \
                "the server's instructions"
    elif method == "tools/call":
        yield from _content(result.get("content"), ("content",), "tool result", "result")
    elif method == "resources/read":
        contents = result.get("contents")
        for i, c in enumerate(contents if isinstance(contents, list) else ()):
            if isinstance(c, dict) and isinstance(c.get("text"), str):
                yield "result", c["text"], ("contents", i, "text"), "resource contents"
    elif method == "prompts/get":
        if isinstance(result.get("description"), str):
            yield "description", result["description"], ("description",), "prompt description"
        messages = result.get("messages")
        for i, m in enumerate(messages if isinstance(messages, list) else ()):
            if isinstance(m, dict):
                yield from _content([m.get("content")], ("messages", i, "content"),
                                    "prompt message", "prompt", flat=True)


def _content(blocks: Any, steps: tuple[Any, ...], what: str, kind: str,
             flat: bool = False) -> Iterator[Surface]:
    for i, b in enumerate(blocks if isinstance(blocks, list) else ()):
        at = steps if flat else (*steps, i)
        if not isinstance(b, dict):
            continue
        if isinstance(b.get("text"), str):
            yield kind, b["text"], (*at, "text"), what
        res = b.get("resource")
        if isinstance(res, dict) and isinstance(res.get("text"), str):
            yield kind, res["text"], (*at, "resource", "text"), what


def _schema_texts(node: Any, steps: tuple[Any, ...], what: str, depth: int) -> Iterator[Surface]:
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if k in _SCHEMA_TEXT_KEYS and isinstance(v, str):
                yield "schema", v, (*steps, k), f"{what} {k}"
            elif k in ("enum", "examples") and isinstance(v, list):
                for i, x in enumerate(v):
                    if isinstance(x, str):
                        yield "schema", x, (*steps, k, i), f"{what} {k}"
            elif k in ("default", "const") and isinstance(v, str):
                yield "schema", v, (*steps, k), f"{what} {k}"
            elif k == "properties" and isinstance(v, dict):
                for prop, sub in v.items():
                    yield "schema", prop, (*steps, k, prop), f"{what} property name"
                    yield from _schema_texts(sub, (*steps, k, prop), what, depth + 1)
            else:
                yield from _schema_texts(v, (*steps, k), what, depth + 1)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _schema_texts(v, (*steps, i), what, depth + 1)


def _strings(node: Any, steps: tuple[Any, ...] = (), key: str | None = None,
             ) -> Iterator[tuple[tuple[Any, ...], str | None, str]]:
    """(path steps, the key holding it, the string) of every string and scalar in ``node``."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, (*steps, k), k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, (*steps, i), key)
    elif isinstance(node, str):
        yield steps, key, node


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[:limit - 1] + '…'}”"


def _mask(token: str) -> str:
    return f"{token[:4]}…{token[-2:]} ({len(token)} characters)"


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _change(old: Any, new: Any) -> str:
    if isinstance(old, str) and isinstance(new, str):
        return f": {_quote(old, 60)} → {_quote(new, 60)}"
    return ""
