"""Redaction: what must never reach a cassette in clear.

One pipeline, applied when recording (before anything touches disk) and to incoming requests
when matching during replay, so that redacted requests still match. Replacements keep each
value's JSON type (a string stays a string, a number a number), so redacted messages stay valid
for replay: protocol fields such as ``id``, ``progressToken`` or ``maxTokens`` are never touched.

Defaults: secret HTTP headers (the header rules below); bearer tokens and well-known key formats
anywhere in a message; values of secret-named keys (``password``, ``api_key``, ``client_secret`` ...); the values of the
process's secret-named environment variables. User rules add JSON paths, key names and regexes,
from the command line or from ``[tool.mcprec.redact]`` in pyproject.toml / ``[redact]`` in
mcprec.toml.

Packs group rules: ``credentials`` (the defaults above), the bundled ``pii`` and ``paths``
(``mcprec.redact_packs``, loaded only when used), and user packs from TOML files. Each rule
replaces what it finds by one of three strategies: ``replace`` (a fixed text), ``hash`` (a
stable pseudonym, ``<email:3f9a1c2b>``, keyed by a salt) or ``mask`` (``****1111``). The
credentials rules always replace. ``Rules.manifest`` is what a cassette stores per session so
that replay, verify, redact and scan apply the same rules again (``mcprec.redact_manifest``).
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import wire
from .jsonpath import update_path

PLACEHOLDER = "[REDACTED]"
_PLACEHOLDER_B = PLACEHOLDER.encode()

STRATEGIES = ("replace", "hash", "mask")
SALT_ENV = "MCPREC_REDACT_SALT"  # also in mcprec.redact_manifest
"""A salt for hash pseudonyms, in place of the cassette's own: the same pseudonyms across
cassettes, and none stored in any of them."""
_TOKEN = re.compile(r"<[a-z0-9_]+:[0-9a-f]{8}>")
_MASK = "****"

# --- headers ---------------------------------------------------------------------------------
# The header rules, and their only copy: docs/secrets.md lists them as they are here (a test
# compares). Headers are redacted in the cassette only; the upstream gets them as sent.

KEPT_HEADERS = ("mcp-session-id", "mcp-protocol-version", "last-event-id", "www-authenticate")
"""Kept as sent by the default rules: replay needs them, and they carry no credentials."""
SCHEME_KEPT_HEADERS = ("authorization", "proxy-authorization")
"""Redacted with their scheme kept (``Bearer [REDACTED]``)."""
SECRET_HEADER_WORDS = ("key", "credential", "signature", "secret", "token", "auth", "passw",
                       "cookie", "session")
"""Any other header whose name contains one of these is redacted (``[REDACTED]``)."""


def _norm_header(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


# --- secrets in message bodies ------------------------------------------------------------------

# Well-known formats. Each matches only characters that need no escaping in JSON, so replacing
# a match inside the raw bytes of a JSON text keeps it valid JSON.
KNOWN_SECRET_PATTERNS: dict[str, str] = {
    "bearer token": r"(?<=[Bb]earer )[A-Za-z0-9._~+/=-]{8,}",
    "basic auth": r"(?<=[Bb]asic )[A-Za-z0-9+/=]{8,}",
    "OpenAI/Anthropic key": r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
    "GitHub token": r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
    "GitLab token": r"glpat-[A-Za-z0-9_-]{20,}",
    "Slack token": r"xox[abposr]-[A-Za-z0-9-]{10,}",
    "AWS access key id": r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    "Google API key": r"AIza[0-9A-Za-z_-]{35}",
    "Stripe key": r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "JWT": r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "private key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\s\\n]*?-----END [A-Z ]*PRIVATE "
                   r"KEY-----",
    "URL credentials": r"(?<=://)[^/\s:@\"\\]+:[^/\s@\"\\]+(?=@)",
    "secret query parameter": "(?:" + "|".join(
        f"(?<=[?&]{name}=)" for name in ("api_key", "apikey", "access_token", "token", "key",
                                         "secret")) + r")[^&\s\"\\#]{6,}",
}

# Literals at least one of which occurs in anything a pattern matches: a pattern runs only on
# messages holding one of its anchors, so most messages cost a few substring searches.
_ANCHORS: dict[str, tuple[str, ...]] = {
    "bearer token": ("earer ",),
    "basic auth": ("asic ",),
    "OpenAI/Anthropic key": ("sk-",),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "GitLab token": ("glpat-",),
    "Slack token": ("xox",),
    "AWS access key id": ("AKIA", "ASIA"),
    "Google API key": ("AIza",),
    "Stripe key": ("_live_", "_test_"),
    "JWT": (".eyJ",),
    "private key": ("PRIVATE KEY-----",),
    "URL credentials": ("@",),
    "secret query parameter": ("key=", "token=", "secret="),
}
# A byte every match of a pattern holds, though its anchors may not: its anchors are looked for
# only where that byte occurs (one memchr; see _gated). A 100 KB text message without "-":
# -65 µs for "xox", -29 for "PRIVATE KEY", in-process.
_REQUIRED: dict[str, str] = {
    "Slack token": "-",  # xox[abposr]-
    "private key": "-",  # -----BEGIN
}
# Literals one of which every match of a pattern directly follows (its look-behind): such a
# pattern is tried only there (_sub_led) instead of at every byte, which a pattern opening with
# a look-behind costs re. 100 KB, in-process: prose naming "Bearer " twice 1,444 -> ~5 µs for the
# bearer rule; source code holding "key=" once 11,118 -> ~5 µs for the query parameter rule.
_LEADS: dict[str, tuple[str, ...]] = {
    "bearer token": ("earer ",),
    "basic auth": ("asic ",),
    "URL credentials": ("://",),
    "secret query parameter": ("key=", "token=", "secret="),
}
_LED_MAX = 4096
"""More lead occurrences than this: the pattern runs as a whole (bounded cost per message)."""
# Words one of which a secret-named key contains (checked on the lower-cased message first).
_KEY_WORDS = (b"pass", b"secret", b"token", b"key", b"auth", b"cookie", b"credential")

# A JSON string of base64 / base64url / hex, long enough to be payload rather than a token.
_BLOB = re.compile(rb'("[A-Za-z0-9+/=_-]{1024,}")')
_BLOB_MIN = 2048
_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"  # _BLOB's
_B64_MIN = 1024  # _BLOB's
_NOT_B64 = re.compile(rb"[^A-Za-z0-9+/=_-]")

# Keys whose values are secrets. Compared after lower-casing and dropping "_" and "-", and
# matched exactly: "progressToken" or "maxTokens" are not secrets.
SECRET_KEYS = frozenset({
    "password", "passwd", "pass", "secret", "clientsecret", "apikey", "apisecret", "accesstoken",
    "refreshtoken", "idtoken", "authtoken", "sessiontoken", "token", "bearertoken",
    "authorization", "privatekey", "secretkey", "accesskey", "awssecretaccesskey", "credentials",
    "cookie", "setcookie",
})

_ENV_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|AUTH|CREDENTIAL|COOKIE|SESSION)", re.I)
_MIN_ENV_SECRET_LEN = 8


def _norm_key(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def env_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values of secret-named environment variables (long enough not to be noise) -> names."""
    env = os.environ if environ is None else environ
    return {v: k for k, v in env.items()
            if _ENV_SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET_LEN
            and not v.startswith("/")}


@dataclass
class Rules:
    """What to redact, beyond the defaults (which ``defaults=False`` turns off)."""

    paths: Sequence[str] = ()
    """JSON paths into each message, e.g. ``params.arguments.password``; ``*`` is a wildcard."""
    keys: Sequence[str] = ()
    """Extra key names whose values are secrets, anywhere in a message."""
    patterns: Sequence[str] = ()
    """Extra regular expressions; what they match is replaced inside strings."""
    defaults: bool = True
    """The ``credentials`` pack: secret headers, known secret formats, secret-named keys."""
    env: bool = True
    """Also redact the values of this process's secret-named environment variables."""
    extra_values: Sequence[str] = field(default_factory=list)
    packs: Sequence[str] = ()
    """Bundled packs besides ``credentials``: ``pii``, ``paths``."""
    user_packs: Sequence[Any] = ()
    """``mcprec.redact_packs.UserPack`` objects, read from their TOML files."""
    strategy: str | None = None
    """``replace`` (None: the same), ``hash`` or ``mask``: for every rule that names none,
    except the credentials rules and secret values, which always replace."""
    env_names: Sequence[str] = ()
    """Environment variables whose values are redacted, whatever their names."""

    def to_dict(self) -> dict[str, Any]:
        """Everything, user packs' text included, for a process of mcprec's own (the
        recorder); ``manifest`` is what a cassette keeps."""
        return {"paths": list(self.paths), "keys": list(self.keys),
                "patterns": list(self.patterns), "defaults": self.defaults, "env": self.env,
                "extra_values": list(self.extra_values), "packs": list(self.packs),
                "user_packs": [p.to_dict() for p in self.user_packs],
                "strategy": self.strategy, "env_names": list(self.env_names)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rules:
        packs: list[Any] = []
        if d.get("user_packs"):
            from .redact_packs import UserPack

            packs = [UserPack.from_dict(p) for p in d["user_packs"]]
        return cls(paths=tuple(d.get("paths", ())), keys=tuple(d.get("keys", ())),
                   patterns=tuple(d.get("patterns", ())), defaults=bool(d.get("defaults", True)),
                   env=bool(d.get("env", True)), extra_values=list(d.get("extra_values", ())),
                   packs=tuple(d.get("packs", ())), user_packs=tuple(packs),
                   strategy=d.get("strategy"), env_names=tuple(d.get("env_names", ())))

    def merged(self, other: Rules) -> Rules:
        def union(a: Sequence[Any], b: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        users = {(p.file, p.sha256): p for p in (*self.user_packs, *other.user_packs)}
        return Rules(
            paths=union(self.paths, other.paths), keys=union(self.keys, other.keys),
            patterns=union(self.patterns, other.patterns),
            defaults=self.defaults and other.defaults,
            env=self.env and other.env, extra_values=[*self.extra_values, *other.extra_values],
            packs=union(self.packs, other.packs), user_packs=tuple(users.values()),
            strategy=other.strategy or self.strategy,
            env_names=union(self.env_names, other.env_names),
        )

    @property
    def pack_names(self) -> list[str]:
        """Every pack in use, bundled and user ones: ``credentials``, ``pii``, ``crm`` ..."""
        return [*(["credentials"] if self.defaults else []), *self.packs,
                *(p.name for p in self.user_packs)]

    @property
    def adds_to_defaults(self) -> bool:
        """Whether these rules do more than the defaults (``Rules()``) do."""
        return bool(self.paths or self.keys or self.patterns or self.extra_values or self.packs
                    or self.user_packs or self.env_names or self.strategy not in (None, "replace")
                    or not self.defaults or not self.env)

    def manifest(self, *, salt: str | None = None) -> dict[str, Any]:
        """What a cassette keeps of these rules, per session: packs, rules, the SHA-256 of each
        user pack's file (not its text), never a secret value nor the salt (``salt`` says only
        where it comes from: ``cassette`` or ``env``)."""
        return {"version": 1, "packs": self.pack_names,
                "user_packs": [{"name": p.name, "file": p.file, "sha256": p.sha256}
                               for p in self.user_packs],
                "strategy": self.strategy or "replace", "paths": list(self.paths),
                "keys": list(self.keys), "patterns": list(self.patterns), "env": self.env,
                "env_names": list(self.env_names), "salt": salt}


class _Lazy:
    """A regular expression compiled when first used."""

    __slots__ = ("source", "_rx")

    def __init__(self, source: Any) -> None:
        self.source = source
        self._rx: Any = None

    def __getattr__(self, name: str) -> Any:  # sub, finditer, search ...
        if self._rx is None:
            self._rx = re.compile(self.source)
        return getattr(self._rx, name)


def _bare_number(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` (digits) stands as a JSON number: a value between ``:``,
    ``,`` or ``[`` and ``,``, ``}`` or ``]``. Inside a string the test may say yes too; the
    number put there is then still text of a string."""
    i = start - 1
    while i >= 0 and data[i] in b" \t\r\n":
        i -= 1
    if i < 0 or data[i] not in b":,[":
        return False
    j = end
    while j < len(data) and data[j] in b" \t\r\n":
        j += 1
    return j == len(data) or data[j] in b",}]"


class Redactor:
    """Applies ``Rules`` to raw messages (``redact``) and finds what they would catch (``scan``).

    ``salt`` keys the ``hash`` strategy's pseudonyms; without one, ``$MCPREC_REDACT_SALT``,
    else a random salt of this redactor's own (stable within it only). Recording binds the
    cassette's salt (``with_salt``)."""

    def __init__(self, rules: Rules | None = None, *, salt: bytes | None = None) -> None:
        self.rules = rules = rules or Rules()
        self._salt = salt
        from .jsonpath import parse_path

        self.strategy = rules.strategy or "replace"
        if self.strategy not in STRATEGIES:
            from .errors import UsageError

            raise UsageError(f"unknown redaction strategy {self.strategy!r}; known: "
                             f"{', '.join(STRATEGIES)}")
        # (name, pattern, anchors, rule): rule None replaces with the placeholder (the fast
        # path); a rule (mcprec.redact_packs.PatternRule) validates and picks a strategy
        checks: list[tuple[str, str, tuple[str, ...] | None, Any]] = []
        combined: list[Any] = []  # bundled rules with no anchor: one pass for all of them
        key_rules: dict[str, tuple[str, str | None, str | None]] = {}
        path_rules: list[tuple[Any, str, str | None, str | None]] = []
        if rules.defaults:
            checks += [(name, p, _ANCHORS.get(name), None)
                       for name, p in KNOWN_SECRET_PATTERNS.items()]
        for i, p in enumerate(rules.patterns):
            try:
                compiled = re.compile(p)
            except re.error as e:
                from .errors import UsageError

                raise UsageError(f"bad redaction pattern {p!r}: {e}") from None
            if compiled.fullmatch("") is not None:
                from .errors import UsageError

                raise UsageError(f"redaction pattern {p!r} matches the empty string: it would "
                                 "put a placeholder between every two characters")
            if self.strategy == "replace":
                checks.append((f"pattern {p!r}", p, None, None))
            else:
                from .redact_packs import PatternRule

                checks.append((f"pattern {p!r}", p, None, PatternRule("pattern", "pattern", p)))
        if rules.packs or rules.user_packs:
            from .redact_packs import PACKS, BUILTIN

            for name in rules.packs:
                if name == "credentials":
                    continue
                if name not in PACKS:
                    from .errors import UsageError

                    raise UsageError(f"unknown redaction pack {name!r}; bundled: "
                                     f"{', '.join(BUILTIN)} (or give a TOML file)")
                for r in PACKS[name]:
                    if r.anchors is None:
                        combined.append(r)
                    else:
                        checks.append((r.label, r.pattern, r.anchors, r))
            for pack in rules.user_packs:
                checks += [(r.label, r.pattern, r.anchors, r) for r in pack.patterns]
                for kr in pack.keys:
                    for k in kr.keys:
                        key_rules[_norm_key(k)] = (kr.kind, kr.strategy, kr.replacement)
                for pr in pack.paths:
                    path_rules.append((parse_path(pr.path), pr.kind, pr.strategy,
                                       pr.replacement))
        values = {v: "a given secret value" for v in rules.extra_values}
        if rules.env:
            values.update({v: f"value of ${k}" for v, k in env_secrets().items()})
        for name in rules.env_names:
            v = os.environ.get(name, "")
            if len(v) >= _MIN_NAMED_ENV_LEN:
                values[v] = f"value of ${name}"
        for v in sorted(values, key=len, reverse=True):
            checks.append((values[v], re.escape(v), (v,), None))
        # compiled at first use: a message rarely holds an anchor, and compiling every pattern
        # up front cost replay's first redacted request ~20 ms
        self._checks_b = [(name, _Lazy(p.encode()),
                           None if anchors is None else tuple(a.encode() for a in anchors), rule)
                          for name, p, anchors, rule in checks]
        self._checks_s = [(name, _Lazy(p), anchors, rule) for name, p, anchors, rule in checks]
        self._schemes = frozenset(i for i, c in enumerate(checks)
                                  if c[0] in ("bearer token", "basic auth"))
        # flat (anchor, check) pairs: one tight loop of substring tests picks the checks to run
        self._anchors_b = [(a, i) for i, (_, _, anchors, _) in enumerate(self._checks_b)
                           for a in anchors or ()]
        self._anchors_s = [(a, i) for i, (_, _, anchors, _) in enumerate(self._checks_s)
                           for a in anchors or ()]
        self._always = [i for i, (_, _, anchors, _) in enumerate(self._checks_b)
                        if anchors is None]
        # the bundled patterns' own facts (_REQUIRED, _LEADS), for them alone: a pack's rule or a
        # user pattern may share a name, not a pattern
        own = [i for i, (name, p, _, rule) in enumerate(checks)
               if rule is None and KNOWN_SECRET_PATTERNS.get(name) == p]
        required = {i: _REQUIRED[checks[i][0]] for i in own if checks[i][0] in _REQUIRED}
        self._gated_b = _gated(self._anchors_b, {i: g.encode() for i, g in required.items()})
        self._gated_s = _gated(self._anchors_s, required)
        self._required = required
        # the anchors of a large text looked for in one pass (_Literals); built at first use,
        # False where Hyperscan is not to be had
        self._literals: _Literals | bool | None = None if self._anchors_b else False
        self._leads_b = {i: tuple(a.encode() for a in _LEADS[checks[i][0]]) for i in own
                         if checks[i][0] in _LEADS}
        self._leads_s = {i: _LEADS[checks[i][0]] for i in own if checks[i][0] in _LEADS}
        # one pass over the message finds whether any anchor occurs at all (the usual answer:
        # none), before the per-anchor look
        self._any_anchor_b = re.compile(b"|".join(re.escape(a) for a, _ in self._anchors_b)) \
            if self._anchors_b else None
        self._any_anchor_s = re.compile("|".join(re.escape(a) for a, _ in self._anchors_s)) \
            if self._anchors_s else None
        # bundled rules with no anchor: each runs where one of its shapes occurs
        self._shaped = [(r, _Lazy(r.pattern.encode()), _Lazy(r.pattern), r.shapes)
                        for r in combined]
        # secret-named keys: kind, strategy (None: the redactor's), replacement
        if rules.defaults:
            for k in SECRET_KEYS:
                key_rules.setdefault(k, ("secret", "replace", None))
        for k in rules.keys:
            key_rules[_norm_key(k)] = (_norm_key(k) or "value", None, None)
        self._key_rules = key_rules
        self._keys = frozenset(key_rules)
        # a cheap pre-check on raw bytes: does any secret-named key occur at all?
        # a key, or a key of JSON held in a string (a tool's text content: \"password\": ...)
        self._key_probe = re.compile(rb'\\?"([A-Za-z_-]*)\\?"\s*:') if self._keys else None
        self._key_words = _KEY_WORDS if rules.defaults else ()
        if rules.keys or len(key_rules) > (len(SECRET_KEYS) if rules.defaults else 0):
            self._key_words = ()  # user key names can be anything: always look
        for p in rules.paths:
            path_rules.append((parse_path(p), _path_kind(p), None, None))
        self._paths = path_rules
        self._header_keys = frozenset(_norm_header(k) for k in (*rules.keys, *(
            k for pack in rules.user_packs for kr in pack.keys for k in kr.keys)))
        self._header_cache: dict[str, bool] = {}
        self.needs_salt = self.strategy == "hash" and bool(
            combined or rules.patterns or rules.keys or rules.paths or any(
                r[3] is not None for r in checks)) or any(
            r[3] is not None and r[3].strategy == "hash" for r in checks) or any(
            s == "hash" for _, s, _ in key_rules.values()) or any(
            s == "hash" for _, _, s, _ in path_rules)
        """Whether a rule pseudonymizes (``hash``): the cassette then needs its salt."""

    def with_salt(self, salt: bytes | None) -> Redactor:
        """The same rules, with pseudonyms keyed by ``salt``."""
        return Redactor(self.rules, salt=salt)

    # -- strategies

    def _salt_bytes(self) -> bytes:
        if self._salt is None:
            env = os.environ.get(SALT_ENV)
            self._salt = env.encode() if env else os.urandom(32)
        return self._salt

    def _digest(self, kind: str, value: str) -> str:
        import hmac

        return hmac.new(self._salt_bytes(), f"{kind}\0{value}".encode(), "sha256").hexdigest()

    def token(self, kind: str, value: str, strategy: str, replacement: str | None = None) -> str:
        """What a found text value becomes: ``[REDACTED]`` (or the rule's text),
        ``<kind:3f9a1c2b>``, or ``****1111``."""
        if strategy == "hash":
            if kind == "email":  # Ann@Example.com and ann@example.com: one person, one token
                value = value.lower()
            return f"<{kind}:{self._digest(kind, value)[:8]}>"
        if strategy == "mask":
            if kind == "email" and "@" in value:
                return _MASK + value[value.index("@"):]
            tail = [c for c in value if c.isalnum()][-4:]
            return _MASK + "".join(tail)
        return PLACEHOLDER if replacement is None else replacement

    def _number(self, kind: str, digits: str, strategy: str) -> str:
        """A bare JSON number's replacement, a number: 0, its last four digits, or a pseudonym
        of as many digits that fails the Luhn check (so that no rule finds it again)."""
        if strategy == "mask":
            return str(int(digits[-4:]))
        if strategy != "hash":
            return "0"
        h = int(self._digest(kind, digits), 16)
        n = len(digits)
        out = str(10 ** (n - 1) + h % (9 * 10 ** (n - 1)))
        from .redact_packs import luhn_ok

        if luhn_ok(out):
            out = out[:-1] + str((int(out[-1]) + 1) % 10)
        return out

    def _replace_found(self, rule: Any, found: Any, m: Any, json: bool) -> Any:
        is_bytes = isinstance(found, bytes)
        text = found.decode("utf-8", "replace") if is_bytes else found
        if text.startswith(_MASK) or _TOKEN.fullmatch(text):
            return found
        tail = ""
        if rule.validator is not None:
            from .redact_packs import VALIDATORS

            n = VALIDATORS[rule.validator](text)
            if n <= 0:
                return found
            text, tail = text[:n], text[n:]
        strategy = rule.strategy or self.strategy
        if json and rule.numeric and text.isdigit() and _bare_number(m.string, m.start(),
                                                                     m.start() + len(text)):
            out = self._number(rule.kind, text, strategy)
        else:
            value = text
            if rule.validator in _COMPACT:  # the same number, however it is spaced
                value = value.replace(" ", "").replace("-", "")
            if json and "\\" in value:  # the value, not its JSON escapes, is what is hashed
                try:
                    value = orjson.loads(f'"{value}"')
                except orjson.JSONDecodeError:
                    pass
            out = self.token(rule.kind, value, strategy, rule.replacement)
        out += tail
        return out.encode() if is_bytes else out

    def _sub(self, check: tuple[Any, ...], data: Any, json: bool, placeholder: Any) -> Any:
        rule = check[3]
        if rule is None:
            return check[1].sub(placeholder, data)
        return check[1].sub(lambda m: self._replace_found(rule, m.group(0), m, json), data)

    def _shaped_picks(self, data: Any) -> list[tuple[Any, ...]]:
        """The shaped rules (bundled, without anchors) that can match in ``data``."""
        if not self._shaped:
            return []
        from .redact_packs import SHAPE

        shape = (data if isinstance(data, bytes) else data.encode("utf-8", "replace")
                 ).translate(SHAPE)
        return [s for s in self._shaped if any(x in shape for x in s[3])]

    def _sub_shaped(self, data: Any, json: bool) -> Any:
        for rule, rx_b, rx_s, _ in self._shaped_picks(data):
            rx = rx_b if json else rx_s
            data = rx.sub(lambda m, r=rule: self._replace_found(r, m.group(0), m, json), data)
        return data

    # -- headers

    def is_secret_header(self, name: str) -> bool:
        """Whether a header's value is redacted: ``--redact-key`` names (compared ignoring
        case, ``_`` and ``-``), then the default header rules above."""
        lower = name.lower()
        found = self._header_cache.get(lower)
        if found is None:
            if _norm_header(lower) in self._header_keys:
                found = True
            elif not self.rules.defaults or lower in KEPT_HEADERS:
                found = False
            else:
                found = lower in SCHEME_KEPT_HEADERS or any(w in lower
                                                            for w in SECRET_HEADER_WORDS)
            if len(self._header_cache) < 4096:
                self._header_cache[lower] = found
        return found

    def redact_headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict for the cassette: names lower-cased, secret values replaced (the
        scheme of ``Authorization`` kept), and every value cleared of the secrets that messages
        are cleared of (a ``WWW-Authenticate`` challenge names a scheme, not a credential: the
        bearer and basic rules leave it alone). Repeated headers are joined with ", " as HTTP
        allows. Idempotent: headers already redacted stay as they are."""
        out: dict[str, str] = {}
        for name, value in headers:
            lower = name.lower()
            if self.is_secret_header(lower):
                scheme = value.split(" ", 1)[0] if lower in SCHEME_KEPT_HEADERS and " " in value \
                    else ""
                value = f"{scheme} {PLACEHOLDER}" if scheme else PLACEHOLDER
            else:
                value = self._redact_text(value, self._schemes if lower == "www-authenticate"
                                          else frozenset())
            out[lower] = f"{out[lower]}, {value}" if lower in out else value
        return out

    def redact_http(self, http: Mapping[str, Any]) -> dict[str, Any]:
        """A message's HTTP details for the cassette: headers by ``redact_headers``, every
        other text value (a path's query string ...) by the message rules."""
        out: dict[str, Any] = {}
        for k, v in http.items():
            if k == "headers" and isinstance(v, Mapping):
                out[k] = self.redact_headers(v.items())
            elif k == "path" and isinstance(v, str):  # the endpoint stays: replay serves it
                path, sep, query = v.partition("?")
                out[k] = path + self.redact_text(sep + query) if sep else v
            elif isinstance(v, str):
                out[k] = self.redact_text(v)
            else:
                out[k] = v
        return out

    def scan_headers(self, headers: Mapping[str, Any]) -> list[str]:
        """Names of the headers whose values the header rules would redact but are in clear."""
        return [f"secret header {name}" for name, value in headers.items()
                if isinstance(value, str) and self.is_secret_header(name)
                and not value.endswith(PLACEHOLDER)]

    # -- redaction

    def redact(self, raw: bytes) -> bytes:
        """``raw`` with every secret replaced; unchanged bytes when there is nothing to hide.

        Long base64 or hex strings (images, audio, files) are payload, not prose: the patterns
        are not run inside them. That keeps large messages cheap, and it keeps a payload that
        happens to contain, say, ``AIza`` and 35 more characters from being corrupted.
        """
        # a 100 KB message with nothing to redact, in-process, before the shortcuts (_blob_parts,
        # _key_names, _REQUIRED, _LEADS, merged anchors) -> after: a text message 372 -> 256
        # µs, prose 4,000 -> 1,325, source code 15,600 -> 1,410, a tools list 6,200 -> 1,245,
        # an image 290 -> 89 (tests/test_redact_speed_equivalence.py: the same bytes out)
        parts = _blob_parts(raw) if len(raw) > _BLOB_MIN else None
        if parts is not None and len(parts) > 1:  # even: the message around them; odd: payloads
            redacted = [p if i % 2 else self._redact_patterns(p) for i, p in enumerate(parts)]
            raw = b"".join(redacted)
            if bool(self._paths) or any(self._has_secret_key(p) for p in parts[::2]):
                raw = self._redact_keys_and_paths(raw)
            return raw
        raw = self._redact_keys_and_paths(raw) if (
            self._paths or self._has_secret_key(raw)) else raw
        return self._redact_patterns(raw)

    def redact_many(self, raws: Sequence[bytes]) -> list[bytes]:
        """``[self.redact(raw) for raw in raws]``, with the look for anything to redact done
        once over the small messages joined (a secret-named key's words, the patterns' anchors,
        the shaped rules' shapes): only the messages where one of them occurs go through
        ``redact``; the others have nothing to redact, and stay as they are.

        Each look is for a literal (the anchors and key words in the text, the shapes in its
        ``SHAPE`` translation): any occurrence in a message is one in the joined text too, found
        there at the message's offset. 500 ~200 B messages (a recorder's batch), none holding
        one, in-process: 8.1 -> 1.4 µs a message. Paths, and patterns without an anchor, run on
        every message: with those, each goes through ``redact``."""
        if self._paths or self._always or (self._key_probe is not None and not self._key_words):
            return [self.redact(raw) for raw in raws]
        out = list(raws)
        small = [i for i, raw in enumerate(raws) if len(raw) <= _BLOB_MIN]
        if len(small) < len(raws):
            for i in set(range(len(raws))).difference(small):
                out[i] = self.redact(raws[i])
        if not small:
            return out
        starts = []
        at = 0
        for i in small:
            starts.append(at)
            at += len(raws[i]) + 1
        joined = b"\n".join([raws[i] for i in small])
        hits: set[int] = set()

        def mark(data: bytes, literal: bytes) -> None:
            at = data.find(literal)
            while at != -1:
                hits.add(bisect.bisect_right(starts, at) - 1)
                at = data.find(literal, at + 1)

        if self._key_probe is not None:
            low = joined.lower()
            for word in self._key_words:
                mark(low, word)
        picked = self._selected(joined, self._gated_b, self._any_anchor_b)
        if picked:
            for anchor, i in self._anchors_b:
                if i in picked:
                    mark(joined, anchor)
        if self._shaped:
            from .redact_packs import SHAPE

            shape = joined.translate(SHAPE)
            for rule in self._shaped:
                for x in rule[3]:
                    mark(shape, x)
        for n in hits:
            i = small[n]
            out[i] = self.redact(raws[i])
        return out

    def _redact_patterns(self, raw: bytes) -> bytes:
        for i in self._selected(raw, self._gated_b, self._any_anchor_b):
            leads = self._leads_b.get(i)
            raw = self._sub(self._checks_b[i], raw, True, _PLACEHOLDER_B) if leads is None \
                else self._sub_led(self._checks_b[i], raw, leads, True, _PLACEHOLDER_B)
        return self._sub_shaped(raw, True) if self._shaped else raw

    def _sub_led(self, check: tuple[Any, ...], data: Any, leads: tuple[Any, ...], json: bool,
                 placeholder: Any) -> Any:
        """``_sub``, for a pattern every match of which begins right after one of ``leads``:
        tried at those places alone, left to right, each from the end of the last match, as
        ``re.sub`` does (its look-behind still sees the text before)."""
        starts: set[int] = set()
        for lead in leads:
            n = len(lead)
            at = data.find(lead)
            while at != -1:
                starts.add(at + n)
                if len(starts) > _LED_MAX:
                    return self._sub(check, data, json, placeholder)
                at = data.find(lead, at + 1)
        rx, rule = check[1], check[3]
        out: list[Any] = []
        last = 0
        for at in sorted(starts):
            if at < last:
                continue
            m = rx.match(data, at)
            if m is None:
                continue
            out.append(data[last:at])
            out.append(placeholder if rule is None else
                       self._replace_found(rule, m.group(0), m, json))
            last = m.end()
        if not out:
            return data
        out.append(data[last:])
        return data[:0].join(out)

    def _redact_keys_and_paths(self, raw: bytes) -> bytes:
        try:  # exact: orjson alone would round integers past 64 bits to floats
            obj = wire.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        changed, obj = self._redact_tree(obj)
        return wire.dumps(obj) if changed else raw

    def redact_text(self, text: str) -> str:
        return self._redact_text(text, frozenset())

    def _redact_text(self, text: str, skip: frozenset[int]) -> str:
        for i in self._selected(text, self._gated_s, self._any_anchor_s):
            if i not in skip:
                leads = self._leads_s.get(i)
                text = self._sub(self._checks_s[i], text, False, PLACEHOLDER) if leads is None \
                    else self._sub_led(self._checks_s[i], text, leads, False, PLACEHOLDER)
        return self._sub_shaped(text, False) if self._shaped else text

    def _selected(self, data: Any, gated: _Gated, any_anchor: Any) -> list[int]:
        """The checks worth running on ``data``: those with an anchor in it, and anchorless ones."""
        # small messages: one regex pass beats many substring searches; large ones (base64
        # payloads): the substring searches run at memchr speed, the regex does not
        if len(data) <= 4096:
            if any_anchor is None or any_anchor.search(data) is None:
                return self._always
        elif self._literals is not False:
            found = self._found(data)
            if found is not None:
                return found
        picked = list(self._always)
        # anchors holding a byte that prose seldom has (_ = - @) are looked for only where
        # that byte occurs: one memchr instead of a search each (a 100 KB text message:
        # 1.15 -> 0.45 ms for the credential anchors, measured in-process)
        for gate, group, at_gate in gated:
            if gate is not None and gate not in data:
                continue
            if at_gate is not None:
                picked.extend(i for i in at_gate.picked(data) if i not in picked)
            for a, ids in group:
                if (a in data) if type(a) is not re.Pattern else (a.search(data) is not None):
                    picked.extend(i for i in ids if i not in picked)
        return sorted(picked)

    def _found(self, data: Any) -> list[int] | None:
        """``_selected`` of a large text by one pass of Hyperscan for all the anchors
        (``_Literals``); None where it cannot be had."""
        literals = self._literals
        if literals is None:
            literals = self._literals = _Literals.build([a for a, _ in self._anchors_b]) or False
        if literals is False:
            return None
        assert isinstance(literals, _Literals)
        if type(data) is str:
            data_b = data.encode("utf-8", "surrogatepass")  # substrings stay substrings
        else:
            data_b = data
        if len(data_b) >= 1 << 32:  # past a block scan's 32-bit length: searched for
            return None
        found = literals.found(data_b)
        if found is None:  # Hyperscan failed: the searches from now on
            self._literals = False
            return None
        picked = set(self._always)
        for n in found:
            i = self._anchors_b[n][1]
            gate = self._required.get(i)
            if gate is None or (gate if type(data) is str else gate.encode()) in data:
                picked.add(i)
        return sorted(picked)

    def redact_value(self, value: Any) -> Any:
        """A JSON value (argv, URL, tags ...) with secrets replaced."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, list):
            out = [self.redact_value(v) for v in value]
            # `--api-key VALUE` / `--token=VALUE` on a command line
            for i in range(len(out) - 1):
                if isinstance(out[i], str) and out[i].startswith("-") and \
                        _norm_key(out[i].lstrip("-")) in self._keys:
                    out[i + 1] = self._key_value(_norm_key(out[i].lstrip("-")), out[i + 1])
            for i, v in enumerate(out):
                if isinstance(v, str) and v.startswith("-") and "=" in v:
                    k, _, rest = v.partition("=")
                    if _norm_key(k.lstrip("-")) in self._keys:
                        out[i] = f"{k}={self._key_value(_norm_key(k.lstrip('-')), rest)}"
            return out
        if isinstance(value, dict):
            return self._redact_tree(value)[1]
        return value

    def _has_secret_key(self, raw: bytes) -> bool:
        if self._key_probe is None:
            return False
        if len(raw) > 4096:
            # a large message is mostly string content: look at its keys alone, found where a
            # quote meets a colon (a 100 KB text message: 390 -> ~10 µs; in-process), each
            # distinct key once (a 100 KB tools list, 4,600 keys: 6,700 -> ~1,000 µs)
            keys = _key_names(raw)
            return any(_norm_key(k.rstrip(b"\\").decode("utf-8", "replace")) in self._keys
                       for k in keys)
        if self._key_words:
            low = raw.lower()
            if not any(w in low for w in self._key_words):
                return False
        for m in self._key_probe.finditer(raw):
            if _norm_key(m.group(1).decode("ascii", "replace")) in self._keys:
                return True
        return False

    def _redact_tree(self, obj: Any) -> tuple[bool, Any]:
        changed = False
        if self._paths:
            for path, kind, strategy, replacement in self._paths:
                new = update_path(obj, path, functools.partial(
                    self._value_at, kind=kind, strategy=strategy, replacement=replacement))
                changed = changed or new is not obj
                obj = new
        if self._keys:
            hit, obj = self._redact_keys(obj)
            changed = changed or hit
        return changed, obj

    def _key_value(self, norm: str, v: Any) -> Any:
        kind, strategy, replacement = self._key_rules[norm]
        return self._value_at(v, kind, strategy, replacement)

    def _value_at(self, v: Any, kind: str, strategy: str | None, replacement: str | None) -> Any:
        """A scalar's replacement by a key or path rule (the very value when it already reads
        as one: redacting again changes nothing); containers and null stay."""
        if isinstance(v, (dict, list)) or v is None:
            return v
        strategy = strategy or self.strategy
        if not isinstance(v, str):  # numbers have no room for a token: as replace
            return _placeholder_at(v)
        if strategy == "replace":
            new = PLACEHOLDER if replacement is None else replacement
            return v if v == new else new
        if v.startswith(_MASK) or _TOKEN.fullmatch(v):
            return v
        return self.token(kind, v, strategy, replacement)

    def _redact_keys(self, value: Any) -> tuple[bool, Any]:
        if isinstance(value, dict):
            changed = False
            out = {}
            for k, v in value.items():
                norm = _norm_key(k)
                if norm in self._keys and not isinstance(v, (dict, list)) and v is not None:
                    out[k] = new = self._key_value(norm, v)
                    changed = changed or new is not v
                else:
                    hit, out[k] = self._redact_keys(v)
                    changed = changed or hit
            return changed, out
        if isinstance(value, list):
            changed = False
            items = []
            for v in value:
                hit, nv = self._redact_keys(v)
                changed = changed or hit
                items.append(nv)
            return changed, items
        if isinstance(value, str) and value[:1] in _JSON_OPENERS:
            inner = _json_in(value)
            if inner is not None:
                hit, new = self._redact_keys(inner)
                if hit:
                    return True, _as_json_text(new, value)
        return False, value

    # -- scanning

    def scan(self, raw: bytes) -> list[str]:
        """Names of the kinds of secrets found in ``raw`` (empty when clean); long base64 or hex
        payloads are skipped, as ``redact`` skips them."""
        parts = _blob_parts(raw) if len(raw) > _BLOB_MIN else None
        if parts is not None and len(parts) > 1:
            raw = b'""'.join(parts[::2])
        found: list[str] = []
        if self._has_secret_key(raw):
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                obj = None
            if obj is not None and self._redact_keys(obj)[0] and not _all_placeholders(
                    obj, self._keys):
                found.append("secret-named key")
        text = raw.decode("utf-8", "replace")
        for i in self._selected(text, self._gated_s, self._any_anchor_s):
            name, rx, _, rule = self._checks_s[i]
            if name not in found and any(self._in_clear(rule, m.group(0))
                                         for m in rx.finditer(text)):
                found.append(name)
        for rule, _, rx, _ in self._shaped_picks(raw):
            if rule.label not in found and any(self._in_clear(rule, m.group(0))
                                               for m in rx.finditer(text)):
                found.append(rule.label)
        return found

    def _in_clear(self, rule: Any, text: str) -> bool:
        """Whether a match is a value in clear (not a placeholder, a token, or a look-alike
        that its validator rejects)."""
        if PLACEHOLDER in text or text.startswith(_MASK) or _TOKEN.fullmatch(text):
            return False
        if rule is not None and rule.validator is not None:
            from .redact_packs import VALIDATORS

            return VALIDATORS[rule.validator](text) > 0
        return True


_COMPACT = frozenset({"card", "iban", "luhn", "mod97"})
_MIN_NAMED_ENV_LEN = 4
"""``--redact-env NAME``: shorter values are not redacted (they would hit everywhere)."""


def _path_kind(path: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", path)
    return words[-1].lower() if words else "value"


def placeholder_like(value: Any) -> Any:
    """A placeholder of the same JSON type as ``value``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    return PLACEHOLDER


def _placeholder_at(value: Any) -> Any:
    """A scalar's placeholder (the very value when it already reads as one, so that an
    already-redacted message is left as it is); containers and null stay."""
    if isinstance(value, (dict, list)) or value is None:
        return value
    new = placeholder_like(value)
    return value if new == value and str(new) == str(value) else new  # -0.0 reads "-0.0"


_GATES = ("_", "=", "-", "@")
_GATES_ANY = frozenset((*_GATES, *(g.encode() for g in _GATES)))
_PRESENCE_GATES = (".", " ")
"""Bytes that prose has plenty of, and base64 none or few ("2.0" in every JSON-RPC message): an
anchor holding one and no rarer gate (.eyJ; earer , asic ) is looked for at each of them when
there are few (``_Sparse``), else searched for. The anchor searches of a 100 KB message,
in-process (best of 5, 4 runs alternating with the tree before): letters and digits
(bench_record's large load) 194-199 -> 142-147 µs, a base64 image 202-209 -> 54-58 µs, prose
the same (456-489 against 456-472). bench_record large, 7 rounds: 1,232 -> 1,578 req/s."""
_PRESENCE_ANY = frozenset((*_PRESENCE_GATES, *(g.encode() for g in _PRESENCE_GATES)))
_SPARSE = 16
"""Gate bytes past this many: the anchors behind a presence gate are searched for instead."""
_KEY_END = re.compile(rb'"\s*:')  # the end of a key (of JSON held in a string too: \":)
_KEY_END_REVERSED = re.compile(rb':\s*"(?=([^"]{0,99})")')  # on the message reversed
_WS = b" \t\n\r\f\v"  # \s of a bytes pattern
_FEW = 32
_MANY_KEYS = 128


def _key_names(raw: bytes) -> set[bytes]:
    """The distinct keys of a JSON text as bytes, of JSON held in its strings too: for each
    quote followed by blanks and a colon (``_KEY_END``), the bytes from the quote before it, if
    that is at most 100 bytes back. 100 KB, in-process: few colons, each found by ``find``
    (memchr speed; a text message: 55 -> ~3 µs); else re finds the keys' ends, up to
    ``_MANY_KEYS`` of them (prose or source code, 95 of them: ~200 -> ~100 µs); more (a tools
    list, 4,600 keys: 6,700 -> ~1,000 µs), one pass of re over the message reversed, where the
    colon leads and the key follows: re tries each colon, not each quote, and Python sees each
    distinct key once."""
    colons: list[int] = []
    at = raw.find(b":")
    while at != -1:
        if len(colons) == _FEW:
            break
        colons.append(at)
        at = raw.find(b":", at + 1)
    out: set[bytes] = set()
    if at == -1:
        for at in colons:
            end = at - 1
            while end >= 0 and raw[end] in _WS:
                end -= 1
            if end >= 0 and raw[end] == 0x22:
                start = raw.rfind(b'"', max(0, end - 100), end)
                if start != -1:
                    out.add(raw[start + 1:end])
        return out
    for n, m in enumerate(_KEY_END.finditer(raw)):
        if n == _MANY_KEYS:
            return {k[::-1] for k in set(_KEY_END_REVERSED.findall(raw[::-1]))}
        end = m.start()
        start = raw.rfind(b'"', max(0, end - 100), end)
        if start != -1:
            out.add(raw[start + 1:end])
    return out


def _blob_parts(raw: bytes) -> list[bytes]:
    """``_BLOB.split(raw)``: the message around its base64 payloads (even indexes) and the
    payloads (odd), or ``[raw]``, found without re where it can be (100 KB, in-process; re's
    pass took 50-60 µs on text, prose or code, 260-410 on a tools list, twice 250 where it
    found a payload: search, then split).

    Few quotes (found by ``find``, memchr speed): a payload is the bytes between two of them,
    at least 1,024 and all of the base64 alphabet (``translate`` deletes them all): a text
    message ~5 µs, an image ~60. Many: a payload string holds 1,024 bytes or more that are
    neither a quote nor a blank, so a whole 512-byte block at a multiple of 512; where every
    block holds a blank or a quote (one or two ``find`` a block), there is none: prose, source
    code or a tools list ~25 µs; else re splits."""
    quotes: list[int] = []
    at = raw.find(b'"')
    while at != -1:
        if len(quotes) == _FEW:
            for at in range(0, len(raw) - 511, 512):
                if raw.find(b" ", at, at + 512) == -1 and raw.find(b'"', at, at + 512) == -1:
                    return _BLOB.split(raw)
            return [raw]
        quotes.append(at)
        at = raw.find(b'"', at + 1)
    parts: list[bytes] = []
    last = 0
    i = 0
    while i + 1 < len(quotes):
        a, b = quotes[i], quotes[i + 1]
        if b - a > _B64_MIN and _NOT_B64.search(raw, a + 1, min(b, a + 65)) is None \
                and not raw[a + 1:b].translate(None, _B64_CHARS):
            parts += (raw[last:a], raw[a:b + 1])
            last = b + 1
            i += 2  # the closing quote is taken: it opens no payload
        else:
            i += 1
    if not parts:
        return [raw]
    parts.append(raw[last:])
    return parts


_Gated = list[tuple[Any, list[tuple[Any, tuple[int, ...]]], "_AtGate | _Sparse | None"]]


class _Literals:
    """Which of the anchors occur in a large text, found in one pass by Hyperscan (the
    ``hyperscan`` package: Vectorscan, SIMD matching of many literals at once) instead of a
    substring search each (CPython's search for a literal of more than one byte runs at ~0.5 ns
    a byte, on one byte at a time; Hyperscan looks at 16 or more at once). The bundled anchors
    in 100 KB, in-process: letters and digits (bench_record's large load) ~140 -> 16 µs, prose
    ~250 -> 23 µs, a base64 image 16 µs; the recorder's writing thread, per 100 KB message of
    the large load 384 -> 245 µs (without redaction 205), of the prose load 1,170 -> 660 µs.
    Small texts (up to 4 KiB) keep their one regex pass (~1 µs): a scan's call costs ~0.6 µs.
    Where Hyperscan cannot be imported or refuses the machine, ``_selected``'s own searches
    run, with the same result."""

    __slots__ = ("_db", "_local", "_error")

    def __init__(self, db: Any, error: Any) -> None:
        import threading

        self._db = db
        self._error = error
        self._local = threading.local()  # a scratch space per thread: it is not shareable

    @classmethod
    def build(cls, anchors: Sequence[bytes]) -> _Literals | None:
        try:
            import hyperscan

            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            # each byte as \xHH: any anchor (a secret value may hold anything) is a literal
            db.compile(expressions=[b"".join(b"\\x%02x" % c for c in a) for a in anchors],
                       ids=list(range(len(anchors))), elements=len(anchors),
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(anchors))
            hyperscan.Scratch(db)  # a CPU it cannot run on says so here
        except Exception:  # not installed, no build for this machine, a CPU too old
            return None
        return cls(db, hyperscan.error)

    def found(self, data: Any) -> list[int] | None:
        """The indexes of the anchors that occur in ``data`` (shorter than 4 GiB; None:
        Hyperscan failed)."""
        found: list[int] = []
        try:
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                import hyperscan

                scratch = self._local.scratch = hyperscan.Scratch(self._db)
            self._db.scan(data, match_event_handler=lambda i, *_: found.append(i),
                          scratch=scratch)
        except self._error:
            return None
        return found


class _Sparse:
    """A presence gate's anchors (``_PRESENCE_GATES``), each looked for where the gate byte is
    when it is there few times (``_SPARSE``), else searched for: ``_AtGate``'s job for a byte
    too common to stop at each time."""

    __slots__ = ("gate", "members")

    def __init__(self, gate: Any, members: list[tuple[Any, int, tuple[int, ...]]]) -> None:
        self.gate = gate
        self.members = members  # (anchor, index of the gate byte in it, checks)

    def picked(self, data: Any) -> list[int]:
        """The checks of the anchors that occur in ``data``."""
        at: list[int] = []
        i = data.find(self.gate)
        while i >= 0:
            if len(at) == _SPARSE:
                return [c for a, _, ids in self.members if a in data for c in ids]
            at.append(i)
            i = data.find(self.gate, i + 1)
        return [c for a, k, ids in self.members
                if any(p >= k and data.startswith(a, p - k) for p in at) for c in ids]


class _AtGate:
    """A gate's anchors that hold the gate byte, looked for in one pass: a regex that stops only
    at a gate byte where one of them is (the byte, then a look behind and ahead for each), and
    each anchor tried where it stops. The text between gate bytes is skipped at re's scan for a
    literal, not searched once per anchor. A 100 KB prose message (the docs: 1,400 "-", 150
    "="), in-process on a quiet machine: 142 -> 76 µs for sk-, glpat-, PRIVATE KEY-----; 94 ->
    52 µs for the GitHub and Stripe anchors; 157 -> 34 µs for key=, token=, secret=; its whole
    redaction 0.86x (medians of 10 runs alternating with the tree before). A gate with many
    anchors behind it gains nothing: Slack's six xox?- there took as long as a search for xox.
    Text with no gate byte (letters and digits) never runs it."""

    __slots__ = ("rx", "members")

    def __init__(self, gate: Any, members: list[tuple[Any, int, tuple[int, ...]]]) -> None:
        def lit(text: str) -> Any:
            return text.encode() if isinstance(gate, bytes) else text

        alts = []
        for a, k, _ in members:
            alt = lit("(?<=") + re.escape(a[:k + 1]) + lit(")")
            if a[k + 1:]:
                alt += lit("(?=") + re.escape(a[k + 1:]) + lit(")")
            alts.append(alt)
        self.rx = re.compile(re.escape(gate) + lit("(?:") + lit("|").join(alts) + lit(")"))
        self.members = members  # (anchor, index of the gate byte in it, checks)

    def picked(self, data: Any) -> list[int]:
        """The checks of the anchors that occur in ``data``."""
        left = list(self.members)
        out: list[int] = []
        for m in self.rx.finditer(data):
            at = m.start()
            for member in list(left):
                a, k, ids = member
                if at >= k and data.startswith(a, at - k):
                    out.extend(ids)
                    left.remove(member)
            if not left:
                break
        return out


def _gated(anchors: list[tuple[Any, int]], required: Mapping[int, Any]) -> _Gated:
    """The anchors grouped by a byte that prose seldom has (None: no such byte), each with the
    checks it selects: a byte every match of the check holds (``required``: check -> byte),
    else one of the anchor's own (else one of ``_PRESENCE_GATES``). Of a gate's anchors, those
    holding the gate byte (and longer than it) are looked for together (``_AtGate``), but for a
    presence gate; the rest one by one (``_merged``)."""
    groups: dict[Any, list[tuple[Any, int]]] = {}
    for a, i in anchors:
        key = required.get(i)
        if key is None:
            text = a.decode("latin-1") if isinstance(a, bytes) else a
            gate = next((g for g in (*_GATES, *_PRESENCE_GATES) if g in text), None)
            key = gate.encode() if gate is not None and isinstance(a, bytes) else gate
        groups.setdefault(key, []).append((a, i))
    out: _Gated = []
    for gate, group in groups.items():
        at_gate: dict[Any, list[int]] = {}
        rest = []
        presence = gate in _PRESENCE_ANY
        for a, i in group:
            if gate is not None and gate in a and a != gate:
                at_gate.setdefault(a, []).append(i)
            else:
                rest.append((a, i))
        members = [(a, a.index(gate), tuple(ids)) for a, ids in at_gate.items()]
        combined = None if not at_gate else _Sparse(gate, members) if presence \
            else _AtGate(gate, members)
        out.append((gate, _merged(rest), combined))
    return out


def _merged(group: list[tuple[Any, int]]) -> list[tuple[Any, tuple[int, ...]]]:
    """Anchors that begin with the same upper-case letter (AKIA, ASIA, AIza), or with the same
    two bytes (ghp_, gho_ ... github_pat_), looked for in one regex: re finds their common
    prefix, then tries each there, in one pass instead of one each. A 100 KB message without
    them, in-process: 168 -> 63-70 µs for AKIA, ASIA, AIza (text, prose, code alike); 340 ->
    55-63 µs for the six GitHub anchors and 110 -> 56-72 µs for _live_, _test_ (prose, code, a
    tools list: they hold "_"), whose first byte is a gate. Not for one
    lower-case first letter: one as common as "e" (earer, eyJ) made the pass 218 µs on prose,
    slower than two searches."""
    by_first: dict[Any, list[tuple[Any, int]]] = {}
    for a, i in group:
        first = a[:1]
        by_first.setdefault(first if first.isupper() or first in _GATES_ANY else a[:2],
                            []).append((a, i))
    out: list[tuple[Any, tuple[int, ...]]] = []
    for first, items in by_first.items():
        if len(items) > 1 and len({a for a, _ in items}) > 1 and (
                first.isupper() or first in _GATES_ANY or len(first) == 2):
            alts = sorted({a for a, _ in items}, key=len, reverse=True)
            joined = (b"|" if isinstance(first, bytes) else "|").join(re.escape(a) for a in alts)
            out.append((re.compile(joined), tuple(sorted({i for _, i in items}))))
        else:
            out.extend((a, (i,)) for a, i in items)
    return out


def _all_placeholders(value: Any, keys: frozenset[str]) -> bool:
    """Whether every secret-named key already holds a placeholder (an already-redacted message)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if _norm_key(k) in keys and not isinstance(v, (dict, list)) and v is not None:
                if not isinstance(v, bool) and v not in (0, 0.0) and not (
                        isinstance(v, str) and (PLACEHOLDER in v  # e.g. "Bearer [REDACTED]"
                                                or v.startswith(_MASK) or _TOKEN.fullmatch(v))):
                    return False
            elif not _all_placeholders(v, keys):
                return False
        return True
    if isinstance(value, list):
        return all(_all_placeholders(v, keys) for v in value)
    if isinstance(value, str) and value[:1] in _JSON_OPENERS:
        inner = _json_in(value)
        return inner is None or _all_placeholders(inner, keys)
    return True


_JSON_OPENERS = ("{", "[")


def _json_in(text: str) -> Any:
    """The object or array a string holds as JSON (a tool's text content often does), or None."""
    from .jsonpath import embedded_json

    return embedded_json(text)


def _as_json_text(value: Any, like: str) -> str:
    """``value`` written back as JSON text in the style of ``like``: indented (2 spaces, as the
    SDKs write structured results as text) when it was on several lines, else compact."""
    if "\n" in like:
        import json

        return json.dumps(value, indent=2, ensure_ascii=False)
    return wire.dumps(value).decode()


# --- configuration -------------------------------------------------------------------------------


REDACT_KEYS = ("paths", "keys", "patterns", "defaults", "env", "packs", "strategy", "env_names")


def rules_from_config(path: str | os.PathLike[str] | None = None,
                      cwd: str | os.PathLike[str] = ".") -> Rules:
    """Rules from ``[redact]`` in ./mcprec.toml and ``[tool.mcprec.redact]`` in ./pyproject.toml
    (lists add up; ``defaults`` / ``env`` turned off by either file stay off)."""
    rules = Rules()
    from .config import mentions, sections, string_list

    if path is None and not mentions(b"redact", cwd=cwd):
        return rules  # no file here says a word of redaction: no TOML to parse (~10 ms)
    from .errors import UsageError

    for p, table in sections("redact", path, cwd):
        unknown = sorted(set(table) - set(REDACT_KEYS))
        if unknown:
            raise UsageError(f"config file {p}: unknown redact setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(REDACT_KEYS)}")
        for flag in ("defaults", "env"):
            if flag in table and not isinstance(table[flag], bool):
                raise UsageError(f"config file {p}: {flag} must be true or false")
        strategy = table.get("strategy")
        if strategy is not None and strategy not in STRATEGIES:
            raise UsageError(f"config file {p}: strategy must be one of {', '.join(STRATEGIES)}")
        bundled, files = split_packs(string_list(table, "packs", p), base=p.parent)
        rules = rules.merged(Rules(
            paths=tuple(string_list(table, "paths", p)), keys=tuple(string_list(table, "keys", p)),
            patterns=tuple(string_list(table, "patterns", p)),
            defaults=table.get("defaults", True), env=table.get("env", True),
            packs=bundled, user_packs=files, strategy=strategy,
            env_names=tuple(string_list(table, "env_names", p))))
    return rules


def split_packs(names: Sequence[str], base: str | os.PathLike[str] | None = None
                ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """``--redact-pack`` values: bundled pack names, and user packs read from their TOML
    files (a value holding a path separator or ending in ``.toml``; relative to ``base``)."""
    bundled: list[str] = []
    files: list[Any] = []
    for name in names:
        if "/" in name or os.sep in name or name.endswith(".toml"):
            from .redact_packs import load_pack

            path = name if base is None or os.path.isabs(name) else os.path.join(base, name)
            files.append(load_pack(os.path.normpath(path) if base is not None else path))
        else:
            if name not in ("credentials", "pii", "paths"):
                from .errors import UsageError

                raise UsageError(f"unknown redaction pack {name!r}; bundled: credentials, pii, "
                                 "paths (a user pack is a TOML file: ./name.toml)")
            if name != "credentials":
                bundled.append(name)
    return tuple(bundled), tuple(files)


_defaults: dict[str, Redactor] = {}


def default_redactor() -> Redactor:
    """The built-in rules plus the config files of the current directory (``mcprec.toml``,
    ``pyproject.toml``): what the library applies when it is given no ``Redactor``. Cached per
    directory, so a process that changes directory gets that directory's rules, not whichever
    directory asked first."""
    cwd = os.getcwd()
    found = _defaults.get(cwd)
    if found is None:
        found = _defaults[cwd] = Redactor(rules_from_config(cwd=cwd))
    return found
