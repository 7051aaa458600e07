"""Redaction packs: the bundled ``pii`` and ``paths`` rules, their validators, and user packs
read from TOML files.

Imported only when a pack is in use: a replay of a cassette recorded without one never loads
this module. The rule engine is ``mcprec.redact.Redactor``; a pack is only data for it.

Each pattern below matches only characters that need no escaping in JSON (or, for Windows
paths, whole escape pairs), so what it matches can be replaced inside the raw bytes of a JSON
text. A validator runs on each candidate the pattern found, never on the whole message.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError


@dataclass(frozen=True)
class PatternRule:
    """What a regular expression matches (and its validator accepts) is redacted."""

    kind: str
    """The short name in pseudonyms: ``email`` gives ``<email:3f9a1c2b>``."""
    label: str
    """What ``scan`` calls a finding: ``email address``."""
    pattern: str
    anchors: tuple[str, ...] | None = None
    """Literals one of which every match holds: the pattern runs only on text holding one."""
    validator: str | None = None
    strategy: str | None = None
    """None: the redactor's strategy (``--redact-strategy``)."""
    replacement: str | None = None
    """The text of the ``replace`` strategy (default ``[REDACTED]``)."""
    numeric: bool = False
    """May stand as a bare JSON number (card numbers): then it is replaced by a number."""
    shapes: tuple[bytes, ...] | None = None
    """For a rule without anchors: one of these occurs in the text's shape (``SHAPE``) where
    the rule can match; the pattern runs only then."""


@dataclass(frozen=True)
class KeyRule:
    """The values of keys with these names (compared ignoring case, ``_`` and ``-``)."""

    kind: str
    keys: tuple[str, ...]
    strategy: str | None = None
    replacement: str | None = None


@dataclass(frozen=True)
class PathRule:
    """The value at this JSON path in every message."""

    kind: str
    path: str
    strategy: str | None = None
    replacement: str | None = None


# --- validators: each takes a candidate and returns how many of its characters are the thing
# (0: not the thing); fewer than all when a pattern grabbed a bit more (an IBAN and a word)


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_prefix_ok(d: str) -> bool:
    """Issuer prefixes (Visa, Mastercard, Amex, Discover, Diners, JCB, UnionPay, Maestro)."""
    if d[0] == "4":
        return True
    two, four = int(d[:2]), int(d[:4])
    return (51 <= two <= 55 or 2221 <= four <= 2720 or two in (34, 37, 36, 38, 62, 65)
            or 300 <= int(d[:3]) <= 305 or four == 6011 or 644 <= int(d[:3]) <= 649
            or 3528 <= four <= 3589 or two in (50, 56, 57, 58, 63, 67))


def valid_card(text: str) -> int:
    d = _digits(text)
    if not 13 <= len(d) <= 19 or not _card_prefix_ok(d) or not luhn_ok(d):
        return 0
    seps = {c for c in text if not c.isdigit()}
    return len(text) if len(seps) <= 1 else 0


IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def mod97_ok(iban: str) -> bool:
    moved = iban[4:] + iban[:4]
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


def valid_iban(text: str) -> int:
    """The length of the IBAN ``text`` starts with: its country's length, checked by mod 97,
    and ending where a group ends (0 when there is none)."""
    want = IBAN_LENGTHS.get(text[:2])
    if want is None:
        return 0
    n = 0
    for i, c in enumerate(text):
        if c != " ":
            n += 1
            if n == want:
                end = i + 1
                if end < len(text) and text[end] != " ":
                    return 0
                return end if mod97_ok(text[:end].replace(" ", "")) else 0
    return 0


def valid_ipv4(text: str) -> int:
    first = text.split(".", 1)[0]
    return 0 if first in ("0", "127") or text == "255.255.255.255" else len(text)


def valid_ipv6(text: str) -> int:
    import ipaddress  # here: only a candidate needs it

    try:
        ip = ipaddress.IPv6Address(text)
    except ValueError:
        return 0
    return 0 if ip.is_loopback or ip.is_unspecified else len(text)


def valid_ssn(text: str) -> int:
    area, group, serial = text.split("-")
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return 0
    return len(text)


def valid_phone(text: str) -> int:
    return len(text) if 8 <= len(_digits(text)) <= 15 else 0


def valid_luhn(text: str) -> int:
    d = _digits(text)
    return len(text) if len(d) >= 2 and luhn_ok(d) else 0


def valid_mod97(text: str) -> int:
    compact = text.replace(" ", "").upper()
    return len(text) if len(compact) > 4 and mod97_ok(compact) else 0


VALIDATORS: dict[str, Callable[[str], int]] = {
    "card": valid_card, "luhn": valid_luhn, "iban": valid_iban, "mod97": valid_mod97,
    "ipv4": valid_ipv4, "ipv6": valid_ipv6, "ssn": valid_ssn, "phone": valid_phone,
}
"""By name, for user packs too (``validator = "luhn"``)."""


# --- the bundled packs ------------------------------------------------------------------------

SHAPE = bytes(0x39 if 0x30 <= c <= 0x39 else 0x61 if 0x61 <= c <= 0x7A
              else 0x41 if 0x41 <= c <= 0x5A else c for c in range(256))
"""A text's shape, for ``bytes.translate``: digits become ``9``, letters ``a`` or ``A``, the
rest stays. A rule whose matches share no literal still shares shapes (a card number holds
``9999 9999`` or thirteen ``9``): a few substring tests on the shape tell which rules can match
at all. Without them the six patterns ran on every message (3 MB/s on the benchmark's mix);
with them a message without candidates costs a translate and 17 substring tests (~5 µs for
200 bytes, ~1.3 ms for 100 KB)."""

_EMAIL = (r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
          r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
          r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}"
          r"(?![A-Za-z0-9-])")
# international: a parenthesised group only right after the country code (+1 (415) 555-2671),
# so that a number never runs on into the next one's area code (+14155552671 (415) 555-2671)
_PHONE = (r"(?<![0-9A-Za-z_+.-])(?:\+[1-9][0-9]{0,2}(?: ?\([0-9]{1,4}\))?[0-9 .-]{5,18}[0-9]"
          r"|(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[-. ])[2-9][0-9]{2}[-. ][0-9]{4})"
          r"(?![0-9A-Za-z_]|[.-][0-9])")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"(?<![0-9A-Za-z_.])(?:{_OCTET}\.){{3}}{_OCTET}(?![0-9A-Za-z_]|\.[0-9])"
_IPV6 = (r"(?<![0-9A-Za-z_:.])(?=[0-9A-Fa-f:.]*[0-9])(?:[0-9A-Fa-f]{0,4}:){2,7}"
         r"(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?(?![0-9A-Za-z_:])")
_IBAN = r"(?<![0-9A-Za-z])[A-Z]{2}[0-9]{2}(?: ?[0-9A-Z]){11,30}(?![0-9A-Za-z])"
_CARD = r"(?<![0-9A-Za-z_.+-])[0-9](?:[ -]?[0-9]){12,18}(?![0-9A-Za-z_]|\.[0-9])"
_SSN = r"(?<![0-9A-Za-z_.-])[0-9]{3}-[0-9]{2}-[0-9]{4}(?![0-9A-Za-z_]|[.-][0-9])"
_JWT = r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
_PEM = (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\s\\n]*?-----END [A-Z ]*PRIVATE "
        r"KEY-----")
_SEG = r"[A-Za-z0-9._@%+=~-]"  # no comma: "see /etc/x, then" ends at the comma
_HOME = (r"(?<![0-9A-Za-z_.~\\-])(?:/home|/Users)/[A-Za-z0-9._-]+(?:/" + _SEG + r"+)*/?(?<!\.)"
         r"|(?<![0-9A-Za-z_])[A-Za-z]:(?:\\\\|\\)(?:Users|Documents and Settings)(?:\\\\|\\)"
         r"[^\\\"\s,;]+(?:(?:\\\\|\\)[^\\\"\s,;]+)*")  # no comma, as _SEG
_PATH = r"(?<![0-9A-Za-z_.~:\\-])(?<!:/)/(?:" + _SEG + r"+/)+" + _SEG + r"*(?<!\.)"

PACKS: dict[str, tuple[PatternRule, ...]] = {
    "pii": (
        PatternRule("email", "email address", _EMAIL, anchors=("@",)),
        PatternRule("jwt", "JWT", _JWT, anchors=("eyJ",)),
        PatternRule("private_key", "private key", _PEM, anchors=("PRIVATE KEY",)),
        # no literal every match holds: these run where their shapes occur
        PatternRule("iban", "IBAN", _IBAN, validator="iban",
                    shapes=(b"AA99",)),
        PatternRule("card", "card number", _CARD, validator="card", numeric=True,
                    shapes=(b"9999999999999", b"9999 9999", b"9999-9999")),
        PatternRule("ssn", "US SSN", _SSN, validator="ssn", shapes=(b"999-99-9999",)),
        PatternRule("phone", "phone number", _PHONE, validator="phone",
                    shapes=(b"+9", b"(999)", b"999-999-9999", b"999.999.9999", b"999 999 9999")),
        PatternRule("ipv4", "IPv4 address", _IPV4, validator="ipv4",
                    shapes=(b".9.", b".99.", b".999.")),
        PatternRule("ipv6", "IPv6 address", _IPV6, validator="ipv6",
                    shapes=(b"::", b"9:", b"a:9", b"A:9")),
    ),
    "paths": (
        PatternRule("home", "home path", _HOME, anchors=("/home/", "/Users/", "Users\\"),
                    replacement="<PATH>"),
        PatternRule("path", "absolute path", _PATH, anchors=("/",), replacement="<PATH>"),
    ),
}
"""The bundled packs besides ``credentials`` (the default rules of ``mcprec.redact``)."""
BUILTIN = ("credentials", *PACKS)


# --- user packs -----------------------------------------------------------------------------


_PACK_KEYS = ("name", "strategy", "rules")
_RULE_KEYS = ("kind", "pattern", "keys", "paths", "anchors", "validator", "strategy",
              "replacement")


@dataclass(frozen=True)
class UserPack:
    """A pack of rules from a TOML file, with the SHA-256 of the file's bytes."""

    file: str
    sha256: str
    name: str
    text: str
    patterns: tuple[PatternRule, ...] = ()
    keys: tuple[KeyRule, ...] = ()
    paths: tuple[PathRule, ...] = ()
    strategy: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "sha256": self.sha256, "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UserPack:
        return parse_pack(str(d["text"]), str(d["file"]), sha256=str(d["sha256"]))


def _kind(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "value"


def check_strategy(value: Any, where: str) -> str | None:
    from . import STRATEGIES

    if value is None:
        return None
    if value not in STRATEGIES:
        raise UsageError(f"{where}: unknown redaction strategy {value!r}; known: "
                         f"{', '.join(STRATEGIES)}")
    return str(value)


def load_pack(path: str | os.PathLike[str]) -> UserPack:
    """A user pack from its file; a missing or bad file is a one-line ``UsageError``."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise UsageError(f"redaction pack {p}: cannot read it ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"redaction pack {p}: not UTF-8 text") from None
    return parse_pack(text, str(path), sha256=hashlib.sha256(data).hexdigest())


def parse_pack(text: str, file: str, *, sha256: str) -> UserPack:
    from ..config import _toml_module

    toml = _toml_module()
    if toml is None:
        raise UsageError(f"redaction pack {file}: reading TOML needs Python 3.11+ or tomli")
    try:
        table = toml.loads(text)
    except toml.TOMLDecodeError as e:
        raise UsageError(f"redaction pack {file}: not valid TOML: {e}") from None
    unknown = sorted(set(table) - set(_PACK_KEYS))
    if unknown:
        raise UsageError(f"redaction pack {file}: unknown setting(s) {', '.join(unknown)}; "
                         f"known: {', '.join(_PACK_KEYS)}")
    name = table.get("name", Path(file).stem)
    if not isinstance(name, str) or not name:
        raise UsageError(f"redaction pack {file}: name must be a non-empty string")
    if name in BUILTIN:
        raise UsageError(f"redaction pack {file}: the name {name!r} is a bundled pack's")
    strategy = check_strategy(table.get("strategy"), f"redaction pack {file}")
    rules = table.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise UsageError(f"redaction pack {file}: rules must be an array of tables ([[rules]])")
    patterns: list[PatternRule] = []
    keys: list[KeyRule] = []
    paths: list[PathRule] = []
    for i, r in enumerate(rules, 1):
        where = f"redaction pack {file}, rule {i}"
        unknown = sorted(set(r) - set(_RULE_KEYS))
        if unknown:
            raise UsageError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: "
                             f"{', '.join(_RULE_KEYS)}")
        what = [k for k in ("pattern", "keys", "paths") if k in r]
        if len(what) != 1:
            raise UsageError(f"{where}: give exactly one of pattern, keys, paths")
        for k in ("kind", "pattern", "validator", "replacement"):
            if k in r and not isinstance(r[k], str):
                raise UsageError(f"{where}: {k} must be a string")
        for k in ("keys", "paths", "anchors"):
            if k in r and (not isinstance(r[k], list)
                           or not all(isinstance(v, str) and v for v in r[k])):
                raise UsageError(f"{where}: {k} must be a list of non-empty strings")
        rule_strategy = check_strategy(r.get("strategy"), where) or strategy
        replacement = r.get("replacement")
        if replacement is not None and ('"' in replacement or "\\" in replacement):
            raise UsageError(f"{where}: replacement must hold no quote or backslash")
        if "pattern" in r:
            try:
                compiled = re.compile(r["pattern"])
            except re.error as e:
                raise UsageError(f"{where}: bad pattern {r['pattern']!r}: {e}") from None
            if compiled.fullmatch("") is not None:
                raise UsageError(f"{where}: pattern {r['pattern']!r} matches the empty string")
            validator = r.get("validator")
            if validator is not None and validator not in VALIDATORS:
                raise UsageError(f"{where}: unknown validator {validator!r}; known: "
                                 f"{', '.join(VALIDATORS)}")
            kind = _kind(r.get("kind", name))
            patterns.append(PatternRule(
                kind, r.get("kind", f"{name} pattern"), r["pattern"],
                anchors=tuple(r["anchors"]) if "anchors" in r else None,
                validator=validator, strategy=rule_strategy, replacement=replacement))
        else:
            if "validator" in r or "anchors" in r:
                raise UsageError(f"{where}: validator and anchors go with pattern")
            if "keys" in r:
                keys.append(KeyRule(_kind(r.get("kind", r["keys"][0])), tuple(r["keys"]),
                                    rule_strategy, replacement))
            else:
                from ..jsonpath import parse_path

                for p in r["paths"]:
                    try:
                        parse_path(p)
                    except Exception as e:  # noqa: BLE001 - any parse error, one line
                        raise UsageError(f"{where}: bad path {p!r}: {e}") from None
                    paths.append(PathRule(_kind(r.get("kind", _last_segment(p))), p,
                                          rule_strategy, replacement))
    return UserPack(file, sha256, name, text, tuple(patterns), tuple(keys), tuple(paths),
                    strategy)


def _last_segment(path: str) -> str:
    words = re.findall(r"[A-Za-z0-9_-]+", path)
    return words[-1] if words else "value"
