"""A value for a JSON Schema: the schema's own ``default``, ``examples``, ``const`` or ``enum``
when it has one, else a placeholder of the right type, with a hint of what to choose.

Used for a starter scenario's tool arguments and for the scripted client's answers to
elicitation requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_FORMATS = {
    "uri": "https://example.com/", "url": "https://example.com/", "email": "user@example.com",
    "date": "2026-01-01", "date-time": "2026-01-01T00:00:00Z", "time": "00:00:00",
    "uuid": "00000000-0000-4000-8000-000000000000", "hostname": "example.com",
    "ipv4": "127.0.0.1", "ipv6": "::1",
}


def table(value: Any, key: str) -> dict[str, Any]:
    """``value[key]`` when both are JSON objects, else an empty one."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def array(value: Any, key: str) -> list[Any]:
    """``value[key]`` when it is a list, else an empty one."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


@dataclass(frozen=True)
class Example:
    value: Any
    source: str
    """Where it came from: ``default``, ``examples``, ``const``, ``enum`` or ``placeholder``."""
    hint: str = ""
    """What the schema asks for, when the value is a placeholder (or one of several)."""

    @property
    def placeholder(self) -> bool:
        return self.source == "placeholder"


def example(schema: Any) -> Example:
    """A value that ``schema`` accepts, as far as it says."""
    if not isinstance(schema, dict):
        return Example("example", "placeholder", "any value")
    for key in ("default", "const"):
        if schema.get(key) is not None:
            return Example(schema[key], key)
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and examples[0] is not None:
        return Example(examples[0], "examples")
    choices = _choices(schema)
    if choices:
        others = ", ".join(_show(c) for c in choices[1:6]) + (", ..." if len(choices) > 6 else "")
        return Example(choices[0], "enum", f"or {others}" if others else "")
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            usable = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if usable:
                merged = {k: v for k, v in schema.items() if k != key}
                return example({**usable[0], **merged} if key == "allOf" else
                               {**merged, **usable[0]})
    return _typed(schema)


def _choices(schema: dict[str, Any]) -> list[Any]:
    enum = schema.get("enum")
    if isinstance(enum, list):
        return [v for v in enum if v is not None]
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and all(
                isinstance(o, dict) and "const" in o for o in options):
            return [o["const"] for o in options if o["const"] is not None]
    return []


def _type_of(schema: dict[str, Any]) -> str | None:
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), None)
    if typ is None:
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
    return typ if isinstance(typ, str) else None


def _typed(schema: dict[str, Any]) -> Example:
    typ = _type_of(schema)
    if typ == "string":
        fmt = schema.get("format")
        if fmt in _FORMATS:
            return Example(_FORMATS[fmt], "placeholder", f"a string ({fmt})")
        if "pattern" in schema:
            return Example("example", "placeholder", f"a string matching {schema['pattern']}")
        text = "example"
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and low > len(text):
            text = text + "x" * (low - len(text))
        if isinstance(high, int) and 0 <= high < len(text):
            text = text[:high]
        return Example(text, "placeholder", "a string")
    if typ in ("integer", "number"):
        kind = "an integer" if typ == "integer" else "a number"
        return Example(_number(schema, typ), "placeholder", f"{kind}{_range(schema)}")
    if typ == "boolean":
        return Example(False, "placeholder", "true or false")
    if typ == "array":
        low = schema.get("minItems")
        if not isinstance(low, int) or low <= 0:
            return Example([], "placeholder", "a list")
        item = example(schema.get("items"))
        return Example([item.value] * low, "placeholder", f"a list of at least {low}")
    if typ == "object":
        return _object(schema)
    if typ == "null":
        return Example(None, "const")
    return Example("example", "placeholder", "any value")


def _object(schema: dict[str, Any]) -> Example:
    props = table(schema, "properties")
    required = [r for r in array(schema, "required") if r in props]
    values = {name: example(props[name]) for name in required}
    value = {name: e.value for name, e in values.items()}
    if any(e.placeholder for e in values.values()):
        return Example(value, "placeholder", "an object")
    return Example(value, "default")


def _number(schema: dict[str, Any], typ: str) -> int | float:
    bounds = {k: float(schema[k]) for k in ("minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum") if _is_number(schema.get(k))}
    step = 1 if typ == "integer" else 0.5
    value = 1.0
    if "minimum" in bounds:
        value = bounds["minimum"]
    elif "exclusiveMinimum" in bounds:
        value = bounds["exclusiveMinimum"] + step
    elif bounds.get("maximum", 1) < 1:
        value = bounds["maximum"]
    elif bounds.get("exclusiveMaximum", 2) <= 1:
        value = bounds["exclusiveMaximum"] - step
    return int(value) if typ == "integer" or value.is_integer() else value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _range(schema: dict[str, Any]) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if _is_number(low) and _is_number(high):
        return f" from {low} to {high}"
    if _is_number(low):
        return f" from {low}"
    if _is_number(high):
        return f" up to {high}"
    return ""


def _show(v: Any) -> str:
    import json

    return json.dumps(v, ensure_ascii=False)


def object_example(schema: Any) -> dict[str, Any]:
    """A value for an object schema with the required properties and those with a default:
    what a client fills in when it accepts an elicitation without being told what to say."""
    props = table(schema, "properties")
    required = array(schema, "required")
    out = {}
    for name, sub in props.items():
        e = example(sub)
        if name in required or e.source == "default":
            out[name] = e.value
    return out
