"""What lint reports: severities, rules (each with a short stable code), findings, and the
choice of rules a run makes (``--select``, ``--skip``, per-rule severities)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

SEVERITIES = ("info", "warning", "error")
"""From least to most severe."""

_RANK = {name: i for i, name in enumerate(SEVERITIES)}


def severity_rank(severity: str) -> int:
    return _RANK[severity]


def check_severity(value: Any, where: str) -> str:
    if value not in _RANK:
        raise UsageError(f"{where}: unknown severity {value!r}; use one of "
                         f"{', '.join(SEVERITIES)}")
    return str(value)


@dataclass(frozen=True)
class Rule:
    """One check. ``code`` is stable across releases (``SCH002``); ``name`` says what it
    checks (``result-schema``); ``pack`` is ``protocol``, ``security`` or a user pack's name."""

    code: str
    name: str
    pack: str
    severity: str
    summary: str


@dataclass(frozen=True)
class Finding:
    """One problem in one message (``seq`` is -1 for a problem of the session as a whole)."""

    cassette: str
    session: str
    seq: int
    direction: str | None
    method: str | None
    id: str | None
    """The JSON-RPC id as JSON text (``1``, ``"abc"``), as the cassette stores it."""
    code: str
    rule: str
    severity: str
    message: str
    path: str
    """Where in the message, in mcprec's JSON path notation (``$.result.content[0].text``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"cassette": self.cassette, "session": self.session, "seq": self.seq,
                "direction": self.direction, "method": self.method, "id": self.id,
                "code": self.code, "rule": self.rule, "severity": self.severity,
                "message": self.message, "path": self.path}


# --- the registry ------------------------------------------------------------------------------

RULES: dict[str, Rule] = {}
"""Every bundled rule by code, in the order the docs list them."""


def rule(code: str, name: str, pack: str, severity: str, summary: str) -> str:
    """Register a bundled rule; returns its code (rule modules keep it as a constant)."""
    if code in RULES:
        raise ValueError(f"rule code {code} registered twice")
    RULES[code] = Rule(code, name, pack, severity, summary)
    return code


_CODE = re.compile(r"[A-Z][A-Z0-9]*[0-9]{3}")
_FAMILY = re.compile(r"[A-Z]+")


def is_code(text: str) -> bool:
    return bool(_CODE.fullmatch(text))


@dataclass
class Selection:
    """Which rules run, and at what severity. A selector is a code (``SCH002``), a family
    prefix (``SCH``), a rule name (``result-schema``), a pack (``security``) or ``all``."""

    select: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    severities: Mapping[str, str] = field(default_factory=dict)

    def resolve(self, rules: Mapping[str, Rule]) -> dict[str, str]:
        """Code -> severity of every enabled rule; unknown selectors are usage errors."""
        chosen = set(rules) if not self.select else set().union(
            *(_matching(s, rules, "--select") for s in self.select))
        for s in self.skip:
            chosen -= _matching(s, rules, "--skip")
        out = {}
        for code in rules:
            if code in chosen:
                out[code] = rules[code].severity
        for key, severity in self.severities.items():
            for code in _matching(key, rules, "severity"):
                if code in out:
                    out[code] = severity
        return out


FAMILIES = {"schema": "SCH", "lifecycle": "LIF", "ids": "ID", "capabilities": "CAP",
            "progress": "PRG", "tools": "TOOL", "security": "SEC"}
"""Family names a selector may use instead of the codes' prefix."""


def family(code: str) -> str:
    m = _FAMILY.match(code)
    return m.group(0) if m else ""


def _matching(selector: str, rules: Mapping[str, Rule], where: str) -> set[str]:
    s = selector.strip()
    low, up = s.lower(), s.upper()
    if low == "all":
        return set(rules)
    if up in rules:
        return {up}
    prefix = FAMILIES.get(low, up)
    found = {c for c, r in rules.items() if r.name == low or r.pack == low or family(c) == prefix}
    if not found:
        raise UsageError(f"{where} {selector!r}: no such rule, family or pack; see "
                         "`mcprec lint --list-rules`")
    return found


def split_selectors(values: Iterable[str]) -> tuple[str, ...]:
    """``("SCH,ids", "SEC003")`` -> ``("SCH", "ids", "SEC003")``."""
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())
