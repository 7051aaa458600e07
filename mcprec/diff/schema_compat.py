"""Which catalog changes break clients: tools, resources, resource templates, prompts, server.

The rule of thumb: a change is BREAKING when a client that worked with A may fail with B.
For a tool's input schema that means B accepts less than A (a required input added, a type
changed, an input removed, an enum value removed, a tighter bound); for its output schema, B
promises less than A (a property removed or made optional, a type changed, new enum values).
Descriptions, titles, annotations and additions are COMPATIBLE. A schema keyword whose effect
mcprec cannot judge (``not``, ``if``...) counts as breaking, so a CI gate errs on the safe side.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from .model import Category, Change
from .paths import canonical, differences, same, short

Role = Literal["input", "output"]
Direction = Literal["narrower", "wider", "different"]

ANNOTATION_KEYWORDS = frozenset({
    "description", "title", "default", "examples", "$comment", "deprecated", "$schema", "$id",
    "readOnly", "writeOnly", "markdownDescription",
})
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
RESTRICTIONS = ("pattern", "format", "const", "multipleOf", "uniqueItems", "contentEncoding",
                "contentMediaType")
HANDLED = frozenset({
    "type", "enum", "properties", "required", "additionalProperties", "items", "anyOf", "oneOf",
    "$ref", "$defs", "definitions", *LOWER_BOUNDS, *UPPER_BOUNDS, *RESTRICTIONS,
}) | ANNOTATION_KEYWORDS
MAX_REF_DEPTH = 32


def _breaks(role: Role, direction: Direction) -> bool:
    """Input: accepting less breaks callers. Output: promising less breaks consumers."""
    if direction == "different":
        return True
    return direction == ("narrower" if role == "input" else "wider")


# --- JSON Schema ----------------------------------------------------------------------------


class SchemaComparison:
    """Compares two JSON Schemas of one tool (input or output) into ``Change``s."""

    def __init__(self, tool: str, role: Role, root_a: Any, root_b: Any) -> None:
        self.tool, self.role = tool, role
        self.root_a, self.root_b = root_a, root_b
        self.changes: list[Change] = []

    def run(self) -> list[Change]:
        self._node(self.root_a, self.root_b, "", 0)
        return self.changes

    # -- helpers

    def _add(self, kind: str, message: str, breaking: bool, before: Any = None,
             after: Any = None) -> None:
        self.changes.append(Change("tool", self.tool, kind, message, breaking, before, after))

    def _where(self, at: str) -> str:
        return f"{self.role} {at!r}" if at else f"{self.role} schema"

    def _resolve(self, node: Any, root: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < MAX_REF_DEPTH:
            target = _local_ref(root, node["$ref"])
            if target is None:
                return node
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest} if isinstance(target, dict) else target
            seen += 1
        return node

    # -- one schema node

    def _node(self, a: Any, b: Any, at: str, depth: int) -> None:
        if depth > MAX_REF_DEPTH:
            return
        a, b = self._resolve(a, self.root_a), self._resolve(b, self.root_b)
        if same(a, b):
            return
        if not isinstance(a, dict) or not isinstance(b, dict):
            self._add(f"{self.role}_schema_changed", f"{self._where(at)} changed", True, a, b)
            return
        self._types(a, b, at)
        self._enum(a, b, at)
        self._bounds(a, b, at)
        self._alternatives(a, b, at)
        self._properties(a, b, at, depth)
        self._additional(a, b, at)
        if "items" in a or "items" in b:
            self._node(a.get("items", {}), b.get("items", {}), f"{at}[]", depth + 1)
        self._annotations(a, b, at)
        self._unknown(a, b, at)

    def _types(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        ta, tb = _types(a), _types(b)
        if ta == tb:
            return
        direction = _type_direction(ta, tb)
        breaking = _breaks(self.role, direction)
        verb = "changed" if breaking else ("widened" if direction == "wider" else "narrowed")
        self._add(f"{self.role}_type_changed",
                  f"{self._where(at)} type {verb}: {_type_label(ta)} → {_type_label(tb)}",
                  breaking, a.get("type"), b.get("type"))

    def _enum(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        ea, eb = a.get("enum"), b.get("enum")
        if same(ea, eb):
            return
        if ea is None or eb is None:
            direction: Direction = "wider" if eb is None else "narrower"
            text = "no longer restricted to an enum" if eb is None else f"restricted to {short(eb)}"
        else:
            ka = {canonical(v): v for v in ea} if isinstance(ea, list) else {}
            kb = {canonical(v): v for v in eb} if isinstance(eb, list) else {}
            gone = [ka[k] for k in ka if k not in kb]
            new = [kb[k] for k in kb if k not in ka]
            if not gone and not new:
                return  # reordered
            direction = "different" if gone and new else "narrower" if gone else "wider"
            parts = ([f"removed {', '.join(short(v) for v in gone)}"] if gone else []) + (
                [f"added {', '.join(short(v) for v in new)}"] if new else [])
            text = "enum " + "; ".join(parts)
        self._add(f"{self.role}_enum_changed", f"{self._where(at)} {text}",
                  _breaks(self.role, direction), ea, eb)

    def _bounds(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        for key in (*LOWER_BOUNDS, *UPPER_BOUNDS, *RESTRICTIONS):
            va, vb = a.get(key), b.get(key)
            if same(va, vb):
                continue
            direction = _bound_direction(key, va, vb)
            self._add(f"{self.role}_constraint_changed",
                      f"{self._where(at)} {key} {_val(va)} → {_val(vb)}",
                      _breaks(self.role, direction), va, vb)

    def _alternatives(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        for key in ("anyOf", "oneOf"):
            va, vb = a.get(key), b.get(key)
            if same(va, vb):
                continue
            ka = {canonical(v) for v in va} if isinstance(va, list) else set()
            kb = {canonical(v) for v in vb} if isinstance(vb, list) else set()
            if va is None or vb is None:
                direction: Direction = "wider" if vb is None else "narrower"
            elif ka == kb:
                continue
            else:
                direction = ("narrower" if kb < ka else "wider" if ka < kb else "different")
            self._add(f"{self.role}_schema_changed",
                      f"{self._where(at)} {key} alternatives changed",
                      _breaks(self.role, direction), va, vb)

    def _properties(self, a: dict[str, Any], b: dict[str, Any], at: str, depth: int) -> None:
        pa, pb = _dict(a.get("properties")), _dict(b.get("properties"))
        ra, rb = _required(a), _required(b)
        for name in pa:
            sub = f"{at}.{name}" if at else name
            if name not in pb:
                self._add(f"{self.role}_property_removed", f"{self._where(sub)} removed",
                          True, pa[name], None)
                continue
            self._required_change(name in ra, name in rb, sub)
            self._node(pa[name], pb[name], sub, depth + 1)
        for name in pb:
            if name in pa:
                continue
            sub = f"{at}.{name}" if at else name
            if self.role == "input":
                req = name in rb
                self._add("required_input_added" if req else "optional_input_added",
                          f"{'required' if req else 'optional'} input {sub!r} added", req,
                          None, pb[name])
            else:
                self._add("output_property_added", f"{self._where(sub)} added", False,
                          None, pb[name])

    def _required_change(self, was: bool, now: bool, sub: str) -> None:
        if was == now:
            return
        if self.role == "input":
            kind = "input_became_required" if now else "input_became_optional"
            self._add(kind, f"input {sub!r} became {'required' if now else 'optional'}", now)
        else:
            kind = "output_became_required" if now else "output_became_optional"
            text = "is now always present" if now else "may now be missing (no longer required)"
            self._add(kind, f"output {sub!r} {text}", not now)

    def _additional(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        va, vb = a.get("additionalProperties"), b.get("additionalProperties")
        if same(va, vb):
            return
        closed_a, closed_b = va is False, vb is False
        if closed_a == closed_b:
            direction: Direction = "different"
        else:
            direction = "narrower" if closed_b else "wider"
        self._add(f"{self.role}_constraint_changed",
                  f"{self._where(at)} additionalProperties {_val(va)} → {_val(vb)}",
                  _breaks(self.role, direction), va, vb)

    def _annotations(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        keys = sorted(k for k in ANNOTATION_KEYWORDS if not same(a.get(k), b.get(k)))
        if not keys:
            return
        before = {k: a.get(k) for k in keys}
        after = {k: b.get(k) for k in keys}
        self._add(f"{self.role}_description_changed",
                  f"{self._where(at)} {', '.join(keys)} changed", False, before, after)

    def _unknown(self, a: dict[str, Any], b: dict[str, Any], at: str) -> None:
        for key in sorted((set(a) | set(b)) - HANDLED):
            if not same(a.get(key), b.get(key)):
                self._add(f"{self.role}_schema_changed",
                          f"{self._where(at)} keyword {key!r} changed (effect not judged)",
                          True, a.get(key), b.get(key))


def _local_ref(root: Any, ref: str) -> Any:
    if not ref.startswith("#/"):
        return None
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _required(schema: dict[str, Any]) -> set[str]:
    req = schema.get("required")
    return {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    """The schema's types; None when it does not restrict the type."""
    t = schema.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list):
        return frozenset(x for x in t if isinstance(x, str))
    return None


def _covers(types: frozenset[str], t: str) -> bool:
    return t in types or (t == "integer" and "number" in types)


def _type_direction(ta: frozenset[str] | None, tb: frozenset[str] | None) -> Direction:
    if ta is None:
        return "narrower"
    if tb is None:
        return "wider"
    if all(_covers(tb, t) for t in ta):
        return "wider"
    if all(_covers(ta, t) for t in tb):
        return "narrower"
    return "different"


def _type_label(types: frozenset[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))


def _bound_direction(key: str, va: Any, vb: Any) -> Direction:
    if va is None:
        return "narrower"  # a new restriction
    if vb is None:
        return "wider"
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (va, vb))
    if key in LOWER_BOUNDS and numeric:
        return "narrower" if vb > va else "wider"
    if key in UPPER_BOUNDS and numeric:
        return "narrower" if vb < va else "wider"
    return "different"


def _val(value: Any) -> str:
    return "(none)" if value is None else short(value, 40)


# --- catalog items --------------------------------------------------------------------------


def compare_tools(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Tools keyed by name: removed is breaking, added is compatible, changes by field."""
    out = _added_removed("tool", a, b, removed_breaks=True)
    for name in a.keys() & b.keys():
        out.extend(compare_tool(name, a[name], b[name]))
    return out


def compare_tool(name: str, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    out.extend(SchemaComparison(name, "input", a.get("inputSchema"), b.get("inputSchema")).run()
               if not same(a.get("inputSchema"), b.get("inputSchema")) else [])
    oa, ob = a.get("outputSchema"), b.get("outputSchema")
    if oa is None and ob is not None:
        out.append(Change("tool", name, "output_schema_added", "output schema added", False,
                          None, ob))
    elif oa is not None and ob is None:
        out.append(Change("tool", name, "output_schema_removed",
                          "output schema removed (structured output no longer promised)", True,
                          oa, None))
    elif not same(oa, ob):
        out.extend(SchemaComparison(name, "output", oa, ob).run())
    out.extend(_plain_fields("tool", name, a, b, skip={"name", "inputSchema", "outputSchema"}))
    return out


def compare_prompts(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Prompts keyed by name: removed, or a new required argument, breaks callers."""
    out = _added_removed("prompt", a, b, removed_breaks=True)
    for name in a.keys() & b.keys():
        out.extend(_prompt_arguments(name, a[name].get("arguments"), b[name].get("arguments")))
        out.extend(_plain_fields("prompt", name, a[name], b[name], skip={"name", "arguments"}))
    return out


def _prompt_arguments(prompt: str, a: Any, b: Any) -> Iterator[Change]:
    args_a = {x["name"]: x for x in a or () if isinstance(x, dict) and "name" in x}
    args_b = {x["name"]: x for x in b or () if isinstance(x, dict) and "name" in x}
    for name, arg in args_a.items():
        if name not in args_b:
            yield Change("prompt", prompt, "argument_removed", f"argument {name!r} removed", True,
                         arg, None)
            continue
        was, now = bool(arg.get("required")), bool(args_b[name].get("required"))
        if was != now:
            kind = "argument_became_required" if now else "argument_became_optional"
            yield Change("prompt", prompt, kind,
                         f"argument {name!r} became {'required' if now else 'optional'}", now)
        for c in _plain_fields("prompt", prompt, arg, args_b[name], skip={"name", "required"}):
            yield Change("prompt", prompt, "argument_" + c.kind,
                         f"argument {name!r} {c.message}", False, c.before, c.after)
    for name, arg in args_b.items():
        if name not in args_a:
            req = bool(arg.get("required"))
            yield Change("prompt", prompt,
                         "required_argument_added" if req else "optional_argument_added",
                         f"{'required' if req else 'optional'} argument {name!r} added", req,
                         None, arg)


def compare_resources(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Resources keyed by URI: removed is breaking; field changes are compatible."""
    return _compare_simple("resource", a, b, key="uri")


def compare_templates(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Resource templates keyed by URI template: removed is breaking."""
    return _compare_simple("resource_template", a, b, key="uriTemplate")


def _compare_simple(category: Category, a: dict[str, Any], b: dict[str, Any],
                    key: str) -> list[Change]:
    out = _added_removed(category, a, b, removed_breaks=True)
    for name in a.keys() & b.keys():
        out.extend(_plain_fields(category, name, a[name], b[name], skip={key}))
    return out


def _added_removed(category: Category, a: dict[str, Any], b: dict[str, Any], *,
                   removed_breaks: bool) -> list[Change]:
    out = [Change(category, n, "removed", "removed", removed_breaks, a[n], None)
           for n in a if n not in b]
    out += [Change(category, n, "added", "added", False, None, b[n]) for n in b if n not in a]
    return out


def _plain_fields(category: Category, name: str, a: dict[str, Any], b: dict[str, Any],
                  skip: set[str]) -> list[Change]:
    """Compatible changes of descriptive fields (description, title, annotations, ...)."""
    out = []
    for key in [k for k in a if k not in skip] + [k for k in b if k not in a and k not in skip]:
        va, vb = a.get(key), b.get(key)
        if same(va, vb):
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            detail = "; ".join(f"{d.path}: {_val(d.before)} → {_val(d.after)}"
                               for d in differences(va, vb, key)[:4])
            msg = f"{key} changed ({detail})"
        elif isinstance(va, str) and isinstance(vb, str):
            msg = f"{key} changed: {short(va, 60)} → {short(vb, 60)}"
        else:
            msg = f"{key} {'added' if va is None else 'removed' if vb is None else 'changed'}"
        out.append(Change(category, name, f"{key.lstrip('_')}_changed", msg, False, va, vb))
    return out


# --- the server -----------------------------------------------------------------------------


def compare_server(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """protocolVersion, serverInfo, capabilities (a capability lost breaks), instructions."""
    out: list[Change] = []
    if not same(a.get("protocolVersion"), b.get("protocolVersion")):
        out.append(Change("server", "", "protocol_version_changed",
                          f"protocolVersion {_val(a.get('protocolVersion'))} → "
                          f"{_val(b.get('protocolVersion'))}", False,
                          a.get("protocolVersion"), b.get("protocolVersion")))
    for d in differences(a.get("serverInfo") or {}, b.get("serverInfo") or {}, "serverInfo"):
        out.append(Change("server", "", "server_info_changed",
                          f"{d.path}: {_val(d.before)} → {_val(d.after)}", False, d.before,
                          d.after))
    for d in differences(a.get("capabilities") or {}, b.get("capabilities") or {}, "capabilities"):
        lost = d.kind == "removed" or (d.before is True and d.after is not True)
        kind = "capability_removed" if lost else (
            "capability_added" if d.kind == "added" else "capability_changed")
        out.append(Change("server", "", kind, f"{d.path}: {_val(d.before)} → {_val(d.after)}",
                          lost, d.before, d.after))
    if not same(a.get("instructions"), b.get("instructions")):
        out.append(Change("server", "", "instructions_changed",
                          f"instructions changed: {_val(a.get('instructions'))} → "
                          f"{_val(b.get('instructions'))}", False,
                          a.get("instructions"), b.get("instructions")))
    return out
