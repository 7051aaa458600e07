"""Text heuristics of the security pack: injection phrasing, invisible characters, lookalike
names and high-entropy tokens; and user pattern packs (TOML) that add rules of their own.

A pack file:

    [pack]
    name = "acme"                       # optional; default: the file's name

    [[pattern]]
    code = "ACME001"                    # its rule code: letters then three digits
    name = "internal-host"              # optional rule name
    regex = '\\bstaging\\.acme\\.internal\\b'
    message = "mentions an internal host"
    severity = "warning"                # info, warning (default) or error
    surfaces = ["description", "schema"] # optional; see SURFACES
    ignore-case = true                  # optional
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from ..errors import UsageError
from .model import Rule, check_severity, is_code

SURFACES = ("name", "description", "schema", "instructions", "result", "prompt")
"""Where texts come from: names of tools, prompts and resources; their titles and
descriptions; texts inside tool schemas; the server's instructions; tool results and resource
contents; prompt messages."""
MODEL_FACING = ("name", "description", "schema", "instructions")

# Each: (label, regex, words one of which any match contains, lower-cased). Phrasings that
# address the model rather than describe the tool. Words between the key terms are bounded
# ({0,n}) so that the match stays within one thought. The words let most texts skip the regex.
_GAP = r"(?:[\w'’,-]+\s+){0,%d}?"
INJECTION: list[tuple[str, str, tuple[str, ...]]] = [
    ("override earlier instructions",
     r"\b(?:ignore|disregard|forget|override|bypass)\s+" + _GAP % 4
     + r"(?:previous|prior|preceding|above|earlier|all|any|other|system|original|your)\s+"
     + _GAP % 2 + r"(?:instructions?|prompts?|rules?|directives?|guidelines?|context)\b",
     ("ignore", "disregard", "forget", "override", "bypass")),
    ("conceal from the user",
     r"\b(?:do\s+not|don[’']?t|never|without)\s+" + _GAP % 3
     + r"(?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|reveal(?:ing)?|notify(?:ing)?|"
       r"alert(?:ing)?|show(?:ing)?|ask(?:ing)?)\s+" + _GAP % 2 + r"(?:the\s+)?users?\b",
     ("user",)),
    ("hidden directive markup",
     r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin)\s*>|\[\s*(?:system|INST)"
     r"\s*\]|<\|im_start\|>|\bBEGIN\s+(?:SYSTEM|HIDDEN)\s+(?:PROMPT|INSTRUCTIONS)\b",
     ("<", "[", "begin")),
    ("role reassignment",
     r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you|act\s+as\s+(?:an?\s+)?(?:system|admin|root|"
     r"developer\s+mode)|new\s+(?:system\s+)?instructions\s*:|your\s+new\s+(?:task|role|"
     r"instructions))\b",
     ("now", "act", "new")),
    ("covert action",
     r"\b(?:secretly|silently|covertly|quietly)\s+" + _GAP % 3
     + r"(?:call|send|read|include|add|run|execute|copy|pass|upload|forward)\b",
     ("secretly", "silently", "covertly", "quietly")),
    ("sensitive files",
     r"(?:~/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa)\b|\.aws/credentials|/etc/(?:passwd|shadow)\b|"
     r"\bmcp\.json\b|claude_desktop_config|\bwallet\.dat\b)",
     (".ssh", "id_", "credentials", "/etc/", "mcp.json", "claude_desktop", "wallet.dat")),
    ("exfiltration",
     r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|e-?mail)\s+" + _GAP % 6
     + r"(?:to|at)\s+(?:https?://|[\w.+-]+@[\w-]+\.)",
     ("://", "@")),
    ("tool hijacking",
     r"\b(?:instead\s+of|rather\s+than|before\s+(?:using|calling|invoking))\s+" + _GAP % 3
     + r"(?:any|the|other|another)\s+" + _GAP % 2 + r"tools?\b",
     ("tool",)),
]
INJECTION_RX = [(label, re.compile(rx, re.IGNORECASE), words) for label, rx, words in INJECTION]
# one pass tells whether any key word is there at all (the usual answer: none)
_ANY_WORD = re.compile("|".join(sorted({re.escape(w) for _, _, ws in INJECTION for w in ws})))


def injection(text: str) -> list[tuple[str, str]]:
    """(label, matched text) of each bundled injection pattern found in ``text``."""
    low = text.lower()
    if _ANY_WORD.search(low) is None:
        return []
    out = []
    for label, rx, words in INJECTION_RX:
        if any(w in low for w in words):
            m = rx.search(text)
            if m is not None:
                out.append((label, m.group(0)))
    return out


# --- invisible and direction-changing characters ----------------------------------------------

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\U000e0000-\U000e007f]")
_ZWJ, _BLACK_FLAG = "\u200d", "\U0001f3f4"


def invisible(text: str) -> list[str]:
    """The invisible, zero-width and bidi-control characters in ``text``, as ``U+XXXX NAME``
    (a zero-width joiner inside an emoji sequence and the tags of a flag emoji are fine)."""
    found: dict[str, None] = {}
    for m in _INVISIBLE.finditer(text):
        c, i = m.group(0), m.start()
        if c == _ZWJ and 0 < i < len(text) - 1 and _pictographic(text[i - 1]) \
                and _pictographic(text[i + 1]):
            continue
        if "\U000e0020" <= c <= "\U000e007f" and _flag_tags(text, i):
            continue
        found[describe(c)] = None
    return list(found)


def _pictographic(c: str) -> bool:
    return ord(c) >= 0x2000 and unicodedata.category(c) in ("So", "Sk", "Mn", "Cf")


def _flag_tags(text: str, i: int) -> bool:
    while i > 0 and "\U000e0020" <= text[i - 1] <= "\U000e007f":
        i -= 1
    return i > 0 and text[i - 1] == _BLACK_FLAG


def describe(c: str) -> str:
    return f"U+{ord(c):04X} {unicodedata.name(c, 'UNNAMED CHARACTER')}"


# --- lookalike names -------------------------------------------------------------------------

# letters of other scripts drawn like Latin ones (after NFKC, which folds fullwidth forms)
_LOOKALIKE = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ı": "i",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J",
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "κ": "k", "τ": "t", "υ": "u",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
})


def skeleton(name: str) -> str:
    """What ``name`` looks like: lookalike letters folded to Latin, case folded."""
    return unicodedata.normalize("NFKC", name).translate(_LOOKALIKE).casefold()


def scripts(name: str) -> list[str]:
    """The scripts of the letters in ``name`` (``LATIN``, ``CYRILLIC``...)."""
    return sorted({unicodedata.name(c, "UNKNOWN").split()[0] for c in name if c.isalpha()})


# --- high-entropy tokens ---------------------------------------------------------------------

# a whole run of key characters (not a slice of a longer one, such as a payload)
TOKEN = re.compile(rb"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,256}={0,2}(?![A-Za-z0-9+/_\-=])")
_HEX = re.compile(r"[0-9a-fA-F-]+")
_WORDY = re.compile(r"[A-Za-z]+(?:[_\-/][A-Za-z]+)*\d{0,4}")


def entropy(token: str) -> float:
    n = len(token)
    return -sum(k / n * math.log2(k / n) for k in Counter(token).values())


def looks_random(token: str) -> bool:
    """Whether ``token`` reads like a key or a password rather than a word, an identifier, a
    hex digest or a UUID: letters and digits mixed, high entropy per character."""
    if _HEX.fullmatch(token) or _WORDY.fullmatch(token):
        return False
    digits = sum(c.isdigit() for c in token)
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    if digits == 0 or (upper == 0 and lower == 0):
        return False
    if sum(c in "_-/" for c in token) > len(token) // 6:
        return False  # snake_case-ish identifiers and paths
    return entropy(token) >= min(4.5, math.log2(len(token)) - 0.4)


# --- user packs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """A rule of a user pack: a regex over some surfaces."""

    rule: Rule
    regex: re.Pattern[str]
    message: str
    surfaces: frozenset[str]


def load_pack(path: str | Path, taken: set[str]) -> list[Pattern]:
    """The patterns of one pack file; ``taken`` holds the codes already in use."""
    from .. import config

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"pattern pack {p} not found")
    if config._toml_module() is None:
        raise UsageError(f"cannot read pattern pack {p}: {config.NO_TOML}")
    data = config.read(p)
    pack = str((data.get("pack") or {}).get("name") or p.stem).lower()
    entries = data.get("pattern")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"pattern pack {p} has no [[pattern]] entries")
    out = []
    for i, e in enumerate(entries, 1):
        where = f"pattern pack {p}, pattern {i}"
        if not isinstance(e, dict):
            raise UsageError(f"{where}: must be a table")
        unknown = set(e) - {"code", "name", "regex", "message", "severity", "surfaces",
                            "ignore-case", "ignore_case"}
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        code = str(e.get("code", "")).upper()
        if not is_code(code):
            raise UsageError(f"{where}: code {e.get('code')!r} must be letters then three "
                             "digits, e.g. ACME001")
        if code in taken:
            raise UsageError(f"{where}: code {code} is already taken")
        taken.add(code)
        regex = e.get("regex")
        if not isinstance(regex, str) or not regex:
            raise UsageError(f"{where}: regex must be a non-empty string")
        flags = re.IGNORECASE if e.get("ignore-case", e.get("ignore_case", False)) else 0
        try:
            rx = re.compile(regex, flags)
        except re.error as err:
            raise UsageError(f"{where}: bad regex {regex!r}: {err}") from None
        surfaces = e.get("surfaces", list(MODEL_FACING))
        if not isinstance(surfaces, list) or not set(surfaces) <= set(SURFACES):
            raise UsageError(f"{where}: surfaces must be a list of {', '.join(SURFACES)}")
        severity = check_severity(e.get("severity", "warning"), where)
        message = str(e.get("message") or f"matches {regex}")
        name = str(e.get("name") or code.lower())
        out.append(Pattern(Rule(code, name, pack, severity, message), rx, message,
                           frozenset(surfaces)))
    return out
