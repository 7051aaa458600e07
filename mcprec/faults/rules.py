"""Faults on demand: a recording replayed as a server that misbehaves on purpose.

A rule is ``SELECTOR EFFECT [WHEN...]``, e.g. ``tools/call:search error=-32000:busy nth=2``:

- SELECTOR: ``*`` (any request), a method, or a method and a name: ``tools/call:NAME``,
  ``prompts/get:NAME``, ``resources/read:URI`` (the name is ``params.name``, the URI
  ``params.uri``).
- EFFECT: ``delay=DURATION`` (``250ms``, ``2s``, ``100ms..2s`` drawn uniformly),
  ``error=CODE[:MESSAGE]``, ``tool-error[=TEXT]``, ``drop``, ``disconnect[=before|after]``,
  ``malformed[=truncate|not-json|wrong-id]``, ``http=STATUS`` (``--http`` only); and the
  adversarial rewrites of an answer (``adversary.py``): ``poison[=injection|exfiltration|
  cross-tool]``, ``rug-pull[=description|schema]`` (``tools/list``, ``after=N``),
  ``schema-violation[=output|protocol]``, ``oversize[=SIZE]``, ``empty[=content|result]``.
- WHEN: ``nth=N`` (only the Nth request the selector picks, from 1), ``after=N`` (from the
  N+1th on), ``p=FLOAT`` (each with that probability; ``--seed`` repeats a run).

Rules apply in the order given; the first whose selector and conditions hold decides. Each
rule counts the requests its selector picks on its own.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError

EFFECTS = ("delay", "error", "tool-error", "drop", "disconnect", "malformed", "http", "poison",
           "rug-pull", "schema-violation", "oversize", "empty")
REPLACING = frozenset({"error", "tool-error", "drop", "http"})
"""Effects that answer in place of the recording: the recorded answer is not needed."""
REWRITING = frozenset({"poison", "rug-pull", "schema-violation", "oversize", "empty"})
"""Effects that rewrite the answer (recorded, or the live server's): ``adversary.py``."""
LIVE = frozenset({"error", "tool-error", "drop", "malformed", *REWRITING})
"""Effects ``mcprec record --fault`` applies to a live server's answers."""
MALFORMED = ("truncate", "not-json", "wrong-id")
POISON = ("injection", "exfiltration", "cross-tool")
POISONABLE = ("tools/call", "tools/list", "resources/read", "prompts/get")
RUG_PULL = ("description", "schema")
VIOLATION = ("output", "protocol")
EMPTY = ("content", "result")
DEFAULT_OVERSIZE = 1024 * 1024
_SIZE = re.compile(r"^(\d+)(b|k|kb|kib|m|mb|mib)?$", re.I)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1 << 20, "mb": 10 ** 6,
               "mib": 1 << 20}
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
         "resources/subscribe": "uri", "resources/unsubscribe": "uri"}
DISCONNECT_EXIT = 1
INJECTED_ERROR = -32603
_CONDITION = re.compile(r"^(nth|after|p)=")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0}


class Fault:
    """One rule, parsed, with its counts."""

    __slots__ = ("text", "method", "name", "effect", "arg", "nth", "after", "p", "seen",
                 "fired", "rewrites", "armed", "pulled")

    def __init__(self, text: str, method: str | None, name: str | None, effect: str,
                 arg: Any = None, nth: int | None = None, after: int | None = None,
                 p: float | None = None) -> None:
        self.text = text
        self.method = method
        self.name = name
        self.effect = effect
        self.arg = arg
        self.nth = nth
        self.after = after
        self.p = p
        self.seen = 0  # requests the selector picked
        self.fired = 0
        self.rewrites = 0  # answers rewritten (each draws its text from the seed and this)
        self.armed = False  # rug-pull: the Nth list went out; the pull is announced next
        self.pulled = False  # rug-pull: announced; every list from now on is changed

    def selects(self, method: str, obj: dict[str, Any]) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.name is None or method == "tools/list":  # tools/list:NAME names the tool changed
            return True
        params = obj.get("params")
        field = NAMED.get(method, "name")
        return isinstance(params, dict) and params.get(field) == self.name

    @property
    def replaces(self) -> bool:
        """Whether it answers in place of the recording (no recorded answer needed)."""
        return self.effect in REPLACING or self.effect == "disconnect" and self.arg == "before"

    @property
    def rewrites_answer(self) -> bool:
        """Whether it rewrites the answer (``adversary.rewrite``)."""
        return self.effect in REWRITING

    def delay_s(self, rng: random.Random) -> float:
        lo, hi = self.arg
        return lo if hi == lo else rng.uniform(lo, hi)

    def __repr__(self) -> str:
        return f"Fault({self.text!r})"


class Faults:
    """The rules of one replay, with the random draws they share (seeded for repeatability)."""

    def __init__(self, rules: Sequence[Fault], seed: int | None = None) -> None:
        self.rules = list(rules)
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.injected: list[dict[str, Any]] = []
        self.announce: Fault | None = None
        """After ``pick``: the rug-pull whose ``notifications/tools/list_changed`` goes out
        before this request's answer (the first request after the Nth list)."""
        self.live = False
        """Applied to a live server (``mcprec record``): only ``LIVE`` effects."""

    def __bool__(self) -> bool:
        return bool(self.rules)

    def pick(self, obj: dict[str, Any]) -> Fault | None:
        """The fault for this request, if a rule decides one (and count it)."""
        method = obj.get("method")
        if not isinstance(method, str):
            return None
        if self.injected:  # what the client does after a fault (``follow.py``)
            from .follow import observe

            observe(self.injected, obj)
        self.announce = None
        for rule in self.rules:
            if rule.armed:  # the Nth list went out before this request: the pull is announced
                rule.armed, rule.pulled = False, True
                self.announce = rule
                self.injected.append(_entry(obj, method, rule, announce=True))
        chosen = None
        for rule in self.rules:
            if not rule.selects(method, obj):
                continue
            rule.seen += 1
            if rule.effect == "rug-pull" and rule.after is not None and rule.seen == rule.after:
                rule.armed = True
            if chosen is not None:
                continue
            if rule.nth is not None and rule.seen != rule.nth:
                continue
            if rule.after is not None and rule.seen <= rule.after:
                continue
            if rule.p is not None and self.rng.random() >= rule.p:
                continue
            chosen = rule
        if chosen is not None:
            chosen.fired += 1
            self.injected.append(_entry(obj, method, chosen))
        return chosen

    def unfired(self) -> list[Fault]:
        return [r for r in self.rules if r.fired == 0]

    def report(self) -> dict[str, Any]:
        from .follow import outcome

        return {"seed": self.seed,
                "injected": [{k: v for k, v in e.items() if not k.startswith("_")}
                             | ({"client": outcome(e)} if "_next" in e else {})
                             for e in self.injected],
                "unfired": [r.text for r in self.unfired()]}


def _entry(obj: dict[str, Any], method: str, rule: Fault, announce: bool = False
           ) -> dict[str, Any]:
    """An injected fault, for the report (the keys with ``_`` are for ``follow.py``)."""
    params = obj.get("params")
    name = params.get(NAMED.get(method, "name")) if isinstance(params, dict) else None
    entry: dict[str, Any] = {"id": obj.get("id"), "method": method, "name": name,
                             "rule": rule.text, "effect": rule.effect}
    if announce:
        entry["notification"] = "notifications/tools/list_changed"
    entry["_request"] = (method, params)
    entry["_next"] = []
    return entry


def parse_rule(text: str) -> Fault:
    """Parse one rule; a bad one is a one-line ``UsageError`` naming the part that is wrong."""
    parts = text.split()
    if len(parts) < 2:
        raise UsageError(f"fault {text!r}: write SELECTOR EFFECT [nth=N|after=N|p=P], e.g. "
                         "'tools/call:search error=-32000:busy'")
    when: list[str] = []
    while len(parts) > 2 and _CONDITION.match(parts[-1]):
        when.insert(0, parts.pop())
    selector = parts[0]
    effect_text = " ".join(parts[1:])  # an error message may hold spaces
    method, name = _selector(text, selector)
    effect, arg = _effect(text, effect_text)
    nth = after = None
    p = None
    for w in when:
        key, _, value = w.partition("=")
        try:
            if key == "nth" and int(value) >= 1:
                nth = int(value)
            elif key == "after" and int(value) >= 0:
                after = int(value)
            elif key == "p" and 0.0 <= float(value) <= 1.0:
                p = float(value)
            else:
                raise ValueError
        except ValueError:
            raise UsageError(f"fault {text!r}: {w!r} is not a condition; use nth=N (from 1), "
                             "after=N or p=PROBABILITY (0 to 1)") from None
    fault = Fault(text, method, name, effect, arg, nth, after, p)
    return _adversarial(text, fault) if effect in REWRITING else fault


def _selector(text: str, selector: str) -> tuple[str | None, str | None]:
    if selector == "*":
        return None, None
    method, sep, name = selector.partition(":")
    # a URI has colons of its own: resources/read:file:///x splits at the first colon only
    if not method or "/" not in method and method not in ("initialize", "ping") or (
            sep and not name):
        raise UsageError(f"fault {text!r}: selector {selector!r} is not '*', a method "
                         "(tools/call) or a method and a name (tools/call:NAME, "
                         "resources/read:URI)")
    return method, (name if sep else None)


def _effect(text: str, effect_text: str) -> tuple[str, Any]:
    effect, has_value, value = effect_text.partition("=")
    bad = f"fault {text!r}: effect {effect_text!r}"
    if effect not in EFFECTS:
        raise UsageError(f"{bad} is not one of {', '.join(EFFECTS)}")
    if effect == "delay":
        if not value:
            raise UsageError(f"{bad}: give a duration, e.g. delay=250ms or delay=100ms..2s")
        lo_text, _, hi_text = value.partition("..")
        lo = _duration(bad, lo_text)
        hi = _duration(bad, hi_text) if hi_text else lo
        if hi < lo:
            raise UsageError(f"{bad}: the range runs backwards")
        return effect, (lo, hi)
    if effect == "error":
        code_text, _, message = value.partition(":")
        try:
            code = int(code_text)
        except ValueError:
            raise UsageError(f"{bad}: give a JSON-RPC error code, e.g. error=-32000:busy") from None
        return effect, (code, message or "mcprec: injected fault")
    if effect == "tool-error":
        return effect, value or "mcprec: injected tool error"
    if effect == "drop":
        if has_value:
            raise UsageError(f"{bad}: drop takes no value")
        return effect, None
    if effect == "disconnect":
        if value not in ("", "before", "after"):
            raise UsageError(f"{bad}: use disconnect, disconnect=before or disconnect=after")
        return effect, value or "before"
    if effect == "malformed":
        if value not in ("", *MALFORMED):
            raise UsageError(f"{bad}: use malformed=truncate, not-json or wrong-id")
        return effect, value or "truncate"
    if effect in _CHOICES:
        choices = _CHOICES[effect]
        if value not in ("", *choices):
            raise UsageError(f"{bad}: use {effect} or {effect}=" + "|".join(choices))
        return effect, value or choices[0]
    if effect == "oversize":
        if not value:
            return effect, DEFAULT_OVERSIZE
        m = _SIZE.match(value)
        if m is None or int(m.group(1)) < 1:
            raise UsageError(f"{bad}: give a size in bytes, e.g. oversize=5M or oversize=200KB")
        return effect, int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()]
    try:
        status = int(value)
        if not 100 <= status <= 599:
            raise ValueError
    except ValueError:
        raise UsageError(f"{bad}: give an HTTP status, e.g. http=503") from None
    return effect, status


_CHOICES = {"poison": POISON, "rug-pull": RUG_PULL, "schema-violation": VIOLATION,
            "empty": EMPTY}


def _adversarial(text: str, fault: Fault) -> Fault:
    """Check what an adversarial effect can select, and give a rug-pull its default after=1."""
    if fault.effect == "poison" and fault.method not in (None, *POISONABLE):
        raise UsageError(f"fault {text!r}: poison goes into the answer of "
                         f"{', '.join(POISONABLE)} (or '*'), not {fault.method}")
    if fault.effect == "rug-pull":
        if fault.method != "tools/list":
            raise UsageError(f"fault {text!r}: rug-pull selects tools/list or tools/list:NAME "
                             "(the tool that changes)")
        if fault.nth is not None or fault.p is not None or fault.after == 0:
            raise UsageError(f"fault {text!r}: rug-pull takes after=N (N >= 1: the lists "
                             "answered honestly first), not nth= or p=")
        if fault.after is None:
            fault.after = 1
    return fault


def _duration(bad: str, text: str) -> float:
    m = _DURATION.match(text)
    if m is None:
        raise UsageError(f"{bad}: {text!r} is not a duration (250ms, 2s, 1.5s)")
    return float(m.group(1)) * _UNITS[m.group(2)]


# --- rules from files ----------------------------------------------------------------------


def load_file(path: str | os.PathLike[str]) -> list[Fault]:
    """Rules from a TOML or JSON file: ``[[faults]]`` / ``{"faults": [...]}`` entries, each a
    rule string, a table ``{rule = "..."}``, or ``{select, effect, nth, after, p}``; and an
    mcp-cassette fault overlay (``{"faults": [{"target": ..., "type": ..., "params": ...}]}``)
    as it is."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read faults file {p}: {e.strerror}") from e
    if p.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise UsageError(f"faults file {p} is not valid JSON: {e}") from e
    else:
        from ..config import read

        data = read(p)
        data = data.get("faults", data.get("replay", {}).get("faults") if isinstance(
            data.get("replay"), dict) else None)
        data = {"faults": data}
    entries = data.get("faults") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise UsageError(f"faults file {p} has no list of faults ([[faults]] or "
                         '{"faults": [...]})')
    return rules_from_entries(entries, str(p))


def rules_from_entries(entries: Iterable[Any], where: str) -> list[Fault]:
    """Rules from config entries (``[[replay.faults]]``, a faults file, a pytest marker)."""
    out = []
    for i, entry in enumerate(entries, 1):
        try:
            out.append(parse_rule(_entry_text(entry)))
        except UsageError as e:
            raise UsageError(f"{where}: fault #{i}: {e}") from None
    return out


def _entry_text(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        raise UsageError(f"{entry!r} is neither a rule string nor a table")
    if "rule" in entry:
        return str(entry["rule"])
    if "target" in entry and "type" in entry:
        return _overlay_text(entry)
    if "select" not in entry or "effect" not in entry:
        raise UsageError("a fault table needs rule = '...', or select and effect")
    when = [f"{k}={entry[k]}" for k in ("nth", "after", "p") if entry.get(k) is not None]
    return " ".join([str(entry["select"]), str(entry["effect"]), *when])


def _overlay_text(entry: dict[str, Any]) -> str:
    """An mcp-cassette overlay fault as a rule of ours."""
    target = entry.get("target") or {}
    kind = entry.get("type")
    params = entry.get("params") or {}
    method = target.get("method") or "*"
    if kind == "delay":
        effect = f"delay={int(params.get('ms', 0))}ms"
    elif kind == "timeout":
        effect = "drop"
    elif kind == "error":
        message = str(params.get("message", ""))
        effect = f"error={int(params.get('code', INJECTED_ERROR))}" + (
            f":{message}" if message else "")
    elif kind == "malformed":
        effect = "malformed=" + str(params.get("strategy", "truncate")).replace("_", "-")
    elif kind == "disconnect":
        effect = "disconnect=" + ("after" if params.get("after_response") else "before")
    else:
        raise UsageError(f"unknown fault type {kind!r}")
    nth = target.get("nth")
    return f"{method} {effect}" + (f" nth={nth}" if nth is not None else "")


def check_against(rules: Sequence[Fault], methods: Iterable[tuple[str, Any]]) -> list[str]:
    """Warnings for rules that select nothing in the recording: ``methods`` yields each
    recorded client request as (method, parsed message)."""
    picked: set[int] = set()
    for method, obj in methods:
        for i, rule in enumerate(rules):
            if i not in picked and isinstance(obj, dict) and rule.selects(method, obj):
                picked.add(i)
    return [f"warning: fault {r.text!r} selects no recorded request"
            for i, r in enumerate(rules) if i not in picked]


def from_config() -> list[Fault]:
    """``[[replay.faults]]`` (or ``[replay] faults = [...]``) from ./mcprec.toml and
    ./pyproject.toml (``[tool.mcprec.replay]``)."""
    from ..config import sections

    out: list[Fault] = []
    for path, table in sections("replay"):
        entries = table.get("faults", [])
        if not isinstance(entries, list):
            raise UsageError(f"config file {path}: replay.faults must be a list")
        out.extend(rules_from_entries(entries, str(path)))
    return out


def summary(faults: Faults) -> str:
    """The one-line account at exit: how many were injected, and rules that never fired."""
    n = len(faults.injected)
    counts: dict[str, int] = {}
    for f in faults.injected:
        counts[f["rule"]] = counts.get(f["rule"], 0) + 1
    line = f"{n} fault{'s' if n != 1 else ''} injected"
    if counts:
        line += " (" + "; ".join(f"{rule!r} x{k}" for rule, k in counts.items()) + ")"
    never = faults.unfired()
    if never:
        line += "; never fired: " + ", ".join(repr(r.text) for r in never)
    return line + f"; seed {faults.seed}"
