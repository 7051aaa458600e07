"""Normalizers: values that change on every run (timestamps, UUIDs, ids of your own) made
equal by kind, so that two runs of a clock- or id-stamping server compare equal while a real
change still shows.

    n = Normalizer.build(["timestamps", "uuids", "order_id=ORD-[0-9]+"])
    n.apply({"text": "order ORD-17 created at 2026-12-03T10:00:00Z", "ts": 1796292000})
    # {"text": "order <order_id> created at <timestamp>", "ts": "<timestamp>"}

Built-in kinds:

``iso8601``
    ISO-8601 / RFC 3339 date-times anywhere in a string (``2026-12-03T10:00:00Z``,
    ``2026-12-03 10:00:00.123+01:00``, ``20261203T100000Z``) and HTTP dates
    (``Thu, 03 Dec 2026 10:00:00 GMT``). A bare date is not a timestamp.
``times``
    Times of day with seconds anywhere in a string: ``14:31:03``, ``2:31:03 PM``,
    ``09:15:00.250`` (what ``toLocaleTimeString()`` and ``strftime("%X")`` write).
``epochs``
    Unix times from 2000-01-01 to 2100-01-01 in seconds, milliseconds, microseconds or
    nanoseconds: JSON numbers, and strings that hold nothing but such a number.
``timestamps``
    All three above.
``uuids``
    UUIDs (``8-4-4-4-12`` hex digits, any case) anywhere in a string.

A custom kind is ``NAME=REGEX``: every match of REGEX in a string becomes ``<NAME>``.

Each match becomes a placeholder (``<timestamp>``, ``<uuid>``, ``<NAME>``); a number becomes
the string ``"<timestamp>"``. Strings that hold JSON are normalized inside (they come back
parsed, as ``jsonpath.Embedded``, so that both sides of a comparison look alike). Object keys
are left as they are. Normalizing is applied to both sides of a comparison, at comparison
time; nothing stored changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import UsageError
from .jsonpath import Embedded, each_child, embedded_json

ISO8601 = (
    r"(?<![0-9])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[T ](?:[01]\d|2[0-3]):[0-5]\d"
    r"(?::[0-5]\d(?:[.,]\d+)?)?(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?(?![0-9])"
    r"|(?<![0-9])\d{4}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3])[0-5]\d[0-5]\d"
    r"(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3])[0-5]\d)?(?![0-9])"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|"
    r"Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT\b"
)
TIMES = (r"(?<![\d:.])(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:[.,]\d+)?"
         r"(?:\s?[AaPp]\.?[Mm]\.?(?![A-Za-z]))?(?![\d:])")
UUID = r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])"
EPOCH_FROM, EPOCH_TO = 946_684_800, 4_102_444_800  # 2000-01-01, 2100-01-01 (UTC)
EPOCH_SCALES = (1, 1_000, 1_000_000, 1_000_000_000)  # s, ms, µs, ns
_NUMBER = re.compile(r"\d{10,19}(?:\.\d+)?")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

TIMESTAMP_KINDS = frozenset({"iso8601", "times", "epochs"})
BUILTINS = ("timestamps", "iso8601", "times", "epochs", "uuids")
ALIASES = {"timestamp": "timestamps", "uuid": "uuids", "iso": "iso8601", "epoch": "epochs",
           "time": "times"}


@dataclass(frozen=True)
class Rule:
    """One kind: a regular expression over strings, and/or epoch numbers."""

    name: str
    placeholder: str
    pattern: re.Pattern[str] | None = None
    epochs: bool = False
    spec: str = ""
    """How it was given (a built-in name, or ``NAME=REGEX``): for command lines and reports."""


def is_epoch(value: Any) -> bool:
    """A number of seconds, ms, µs or ns since 1970 that falls in 2000..2100."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return False
    return any(EPOCH_FROM * s <= value < EPOCH_TO * s for s in EPOCH_SCALES)


def _epoch_string(text: str) -> bool:
    if not _NUMBER.fullmatch(text):
        return False
    try:
        return is_epoch(float(text))
    except ValueError:
        return False


def split_specs(values: Iterable[str]) -> list[str]:
    """Command-line values: ``timestamps,uuids`` is two kinds; ``NAME=REGEX`` takes the rest
    of its value (a regex may hold commas), so ``timestamps,order=ORD-[0-9]+`` is two."""
    out: list[str] = []
    for value in values:
        parts = value.split(",")
        for i, part in enumerate(parts):
            if "=" in part:
                out.append(",".join(parts[i:]).strip())
                break
            if part.strip():
                out.append(part.strip())
    return out


def parse_custom(name: str, regex: str, where: str = "") -> Rule:
    """``NAME=REGEX`` checked: a sane name, a regex that compiles and matches some text."""
    origin = f"{where}: " if where else ""
    if not _NAME.fullmatch(name):
        raise UsageError(f"{origin}normalizer name {name!r} must be letters, digits, '_' or '-' "
                         "(starting with a letter)")
    if name in BUILTINS or name in ALIASES:
        raise UsageError(f"{origin}normalizer {name!r} is built in; give your own kind "
                         "another name")
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise UsageError(f"{origin}normalizer {name!r}: bad regular expression {regex!r}: {e}"
                         ) from None
    if pattern.fullmatch(""):
        raise UsageError(f"{origin}normalizer {name!r}: {regex!r} matches the empty string")
    return Rule(name, f"<{name}>", pattern, spec=f"{name}={regex}")


def _builtin(name: str) -> list[Rule]:
    if name == "timestamps":
        return _builtin("iso8601") + _builtin("times") + _builtin("epochs")
    if name == "iso8601":
        return [Rule("iso8601", "<timestamp>", re.compile(ISO8601), spec="iso8601")]
    if name == "times":
        return [Rule("times", "<timestamp>", re.compile(TIMES), spec="times")]
    if name == "epochs":
        return [Rule("epochs", "<timestamp>", epochs=True, spec="epochs")]
    assert name == "uuids"
    return [Rule("uuids", "<uuid>", re.compile(UUID), spec="uuids")]


class Normalizer:
    """Rewrites JSON values so that values of one kind compare equal (see the module doc)."""

    def __init__(self, rules: Sequence[Rule] = ()) -> None:
        seen: dict[str, Rule] = {}
        for r in rules:
            seen.setdefault(r.name, r)
        self.rules = tuple(seen.values())
        self._patterns = tuple((r.pattern, r.placeholder) for r in self.rules if r.pattern)
        self._epochs = any(r.epochs for r in self.rules)

    @classmethod
    def build(cls, specs: Iterable[str], custom: dict[str, str] | None = None,
              where: str = "") -> Normalizer:
        """From names (built-in kinds, or names ``custom`` defines as regexes) and
        ``NAME=REGEX`` specs. An unknown name is a ``UsageError``."""
        custom = custom or {}
        rules: list[Rule] = []
        for spec in split_specs(specs):
            if "=" in spec:
                name, _, regex = spec.partition("=")
                rules.append(parse_custom(name.strip(), regex, where))
                continue
            name = ALIASES.get(spec, spec)
            if name in BUILTINS:
                rules.extend(_builtin(name))
            elif spec in custom:
                rules.append(parse_custom(spec, custom[spec], where))
            else:
                known = ", ".join([*BUILTINS, *sorted(custom)])
                raise UsageError(f"{where + ': ' if where else ''}unknown normalizer {spec!r}; "
                                 f"known: {known}, or NAME=REGEX")
        return cls(rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    @property
    def specs(self) -> tuple[str, ...]:
        """The rules as ``--normalize`` values (custom ones as ``NAME=REGEX``)."""
        names = {r.name for r in self.rules}
        whole = TIMESTAMP_KINDS <= names
        out: list[str] = ["timestamps"] if whole else []
        out += [r.spec for r in self.rules if not (whole and r.name in TIMESTAMP_KINDS)]
        return tuple(out)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.partition("=")[0] for s in self.specs)

    # -- applying

    def apply(self, value: Any) -> Any:
        """``value`` with every match replaced by its placeholder; containers are copied only
        where something changed."""
        if not self.rules:
            return value
        return self._value(value)

    def text(self, text: str) -> str:
        """One string, not looked into as JSON."""
        if self._epochs and _epoch_string(text):
            return "<timestamp>"
        for pattern, placeholder in self._patterns:
            if pattern is not None:
                text = pattern.sub(placeholder, text)
        return text

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            inner = embedded_json(value) if value[:1] in "{[" or value[:1].isspace() else None
            if inner is not None:
                return Embedded(self._value(inner))
            return self.text(value)
        if isinstance(value, (dict, list, Embedded)):
            return each_child(value, self._value)
        if self._epochs and is_epoch(value):
            return "<timestamp>"
        return value


NONE = Normalizer()


def from_config(section: str, values: Iterable[str] = ()) -> tuple[str, ...]:
    """The specs for ``values`` (a command line's ``--normalize``) after ``[section] normalize``
    from ./mcprec.toml and ./pyproject.toml, names of custom kinds expanded to
    ``NAME=REGEX`` from ``[section.normalizers]``, then ``[diff.normalizers]``: one definition
    of a kind serves diff and replay alike. Checked: an unknown name is a ``UsageError``."""
    from .config import sections, string_list

    specs: list[str] = []
    custom: dict[str, str] = {}
    for name in dict.fromkeys((section, "diff")):
        for p, table in sections(name):
            if name == section:
                specs += [s for s in string_list(table, "normalize", p) if s not in specs]
            found = table.get("normalizers", {})
            if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
                raise UsageError(f"config file {p}: [{name}.normalizers] must map names to "
                                 'regular expressions, e.g. order_id = "ORD-[0-9]+"')
            for k, v in found.items():
                custom.setdefault(k, v)
    specs += [s for s in split_specs(values) if s not in specs]
    return Normalizer.build(specs, custom).specs
