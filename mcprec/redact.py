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
"""

from __future__ import annotations

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
    "JWT": ("eyJ",),
    "private key": ("PRIVATE KEY",),
    "URL credentials": ("@",),
    "secret query parameter": ("key=", "token=", "secret="),
}
# Words one of which a secret-named key contains (checked on the lower-cased message first).
_KEY_WORDS = (b"pass", b"secret", b"token", b"key", b"auth", b"cookie", b"credential")

# A JSON string of base64 / base64url / hex, long enough to be payload rather than a token.
_BLOB = re.compile(rb'("[A-Za-z0-9+/=_-]{1024,}")')
_BLOB_MIN = 2048

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
    env: bool = True
    """Also redact the values of this process's secret-named environment variables."""
    extra_values: Sequence[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"paths": list(self.paths), "keys": list(self.keys),
                "patterns": list(self.patterns), "defaults": self.defaults, "env": self.env,
                "extra_values": list(self.extra_values)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rules:
        return cls(paths=tuple(d.get("paths", ())), keys=tuple(d.get("keys", ())),
                   patterns=tuple(d.get("patterns", ())), defaults=bool(d.get("defaults", True)),
                   env=bool(d.get("env", True)), extra_values=list(d.get("extra_values", ())))

    def merged(self, other: Rules) -> Rules:
        return Rules(
            paths=(*self.paths, *other.paths), keys=(*self.keys, *other.keys),
            patterns=(*self.patterns, *other.patterns), defaults=self.defaults and other.defaults,
            env=self.env and other.env, extra_values=[*self.extra_values, *other.extra_values],
        )


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


class Redactor:
    """Applies ``Rules`` to raw messages (``redact``) and finds what they would catch (``scan``)."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.rules = rules = rules or Rules()
        from .jsonpath import parse_path

        checks: list[tuple[str, str, tuple[str, ...] | None]] = []
        if rules.defaults:
            checks += [(name, p, _ANCHORS.get(name)) for name, p in KNOWN_SECRET_PATTERNS.items()]
        for i, p in enumerate(rules.patterns):
            try:
                re.compile(p)
            except re.error as e:
                from .errors import UsageError

                raise UsageError(f"bad redaction pattern {p!r}: {e}") from None
            checks.append((f"pattern {p!r}", p, None))
        values = {v: "a given secret value" for v in rules.extra_values}
        if rules.env:
            values.update({v: f"value of ${k}" for v, k in env_secrets().items()})
        for v in sorted(values, key=len, reverse=True):
            checks.append((values[v], re.escape(v), (v,)))
        # compiled at first use: a message rarely holds an anchor, and compiling every pattern
        # up front cost replay's first redacted request ~20 ms
        self._checks_b = [(name, _Lazy(p.encode()),
                           None if anchors is None else tuple(a.encode() for a in anchors))
                          for name, p, anchors in checks]
        self._checks_s = [(name, _Lazy(p), anchors) for name, p, anchors in checks]
        # flat (anchor, check) pairs: one tight loop of substring tests picks the checks to run
        self._anchors_b = [(a, i) for i, (_, _, anchors) in enumerate(self._checks_b)
                           for a in anchors or ()]
        self._anchors_s = [(a, i) for i, (_, _, anchors) in enumerate(self._checks_s)
                           for a in anchors or ()]
        self._always = [i for i, (_, _, anchors) in enumerate(self._checks_b) if anchors is None]
        # one pass over the message finds whether any anchor occurs at all (the usual answer:
        # none), before the per-anchor look
        self._any_anchor_b = re.compile(b"|".join(re.escape(a) for a, _ in self._anchors_b)) \
            if self._anchors_b else None
        self._any_anchor_s = re.compile("|".join(re.escape(a) for a, _ in self._anchors_s)) \
            if self._anchors_s else None
        keys = (SECRET_KEYS if rules.defaults else frozenset()) | {_norm_key(k) for k in rules.keys}
        self._keys = frozenset(keys)
        # a cheap pre-check on raw bytes: does any secret-named key occur at all?
        self._key_probe = re.compile(rb'"([A-Za-z_-]*)"\s*:') if self._keys else None
        self._key_words = _KEY_WORDS if rules.defaults else ()
        if rules.keys:
            self._key_words = ()  # user key names can be anything: always look
        self._paths = [parse_path(p) for p in rules.paths]
        self._header_keys = frozenset(_norm_header(k) for k in rules.keys)
        self._header_cache: dict[str, bool] = {}

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
        are cleared of. Repeated headers are joined with ", " as HTTP allows."""
        out: dict[str, str] = {}
        for name, value in headers:
            lower = name.lower()
            if self.is_secret_header(lower):
                scheme = value.split(" ", 1)[0] if lower in SCHEME_KEPT_HEADERS and " " in value \
                    else ""
                value = f"{scheme} {PLACEHOLDER}" if scheme else PLACEHOLDER
            else:
                value = self.redact_text(value)
            out[lower] = f"{out[lower]}, {value}" if lower in out else value
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
        if len(raw) > _BLOB_MIN and _BLOB.search(raw) is not None:
            parts = _BLOB.split(raw)  # even: the message around them; odd: the payloads
            redacted = [p if i % 2 else self._redact_patterns(p) for i, p in enumerate(parts)]
            raw = b"".join(redacted)
            if bool(self._paths) or any(self._has_secret_key(p) for p in parts[::2]):
                raw = self._redact_keys_and_paths(raw)
            return raw
        raw = self._redact_keys_and_paths(raw) if (
            self._paths or self._has_secret_key(raw)) else raw
        return self._redact_patterns(raw)

    def _redact_patterns(self, raw: bytes) -> bytes:
        for i in self._selected(raw, self._anchors_b, self._any_anchor_b):
            raw = self._checks_b[i][1].sub(_PLACEHOLDER_B, raw)
        return raw

    def _redact_keys_and_paths(self, raw: bytes) -> bytes:
        try:  # exact: orjson alone would round integers past 64 bits to floats
            obj = wire.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        changed, obj = self._redact_tree(obj)
        return wire.dumps(obj) if changed else raw

    def redact_text(self, text: str) -> str:
        for i in self._selected(text, self._anchors_s, self._any_anchor_s):
            text = self._checks_s[i][1].sub(PLACEHOLDER, text)
        return text

    def _selected(self, data: Any, anchors: list[tuple[Any, int]], any_anchor: Any) -> list[int]:
        """The checks worth running on ``data``: those with an anchor in it, and anchorless ones."""
        # small messages: one regex pass beats many substring searches; large ones (base64
        # payloads): the substring searches run at memchr speed, the regex does not
        if len(data) <= 4096 and (any_anchor is None or any_anchor.search(data) is None):
            return self._always
        picked = list(self._always)
        for a, i in anchors:
            if a in data and i not in picked:
                picked.append(i)
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
                    out[i + 1] = PLACEHOLDER
            for i, v in enumerate(out):
                if isinstance(v, str) and v.startswith("-") and "=" in v:
                    k, _, _ = v.partition("=")
                    if _norm_key(k.lstrip("-")) in self._keys:
                        out[i] = f"{k}={PLACEHOLDER}"
            return out
        if isinstance(value, dict):
            return self._redact_tree(value)[1]
        return value

    def _has_secret_key(self, raw: bytes) -> bool:
        if self._key_probe is None:
            return False
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
            for path in self._paths:
                new = update_path(obj, path, _placeholder_at)
                changed = changed or new is not obj
                obj = new
        if self._keys:
            hit, obj = self._redact_keys(obj)
            changed = changed or hit
        return changed, obj

    def _redact_keys(self, value: Any) -> tuple[bool, Any]:
        if isinstance(value, dict):
            changed = False
            out = {}
            for k, v in value.items():
                if _norm_key(k) in self._keys and not isinstance(v, (dict, list)) and v is not None:
                    out[k] = placeholder_like(v)
                    changed = True
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
        return False, value

    # -- scanning

    def scan(self, raw: bytes) -> list[str]:
        """Names of the kinds of secrets found in ``raw`` (empty when clean); long base64 or hex
        payloads are skipped, as ``redact`` skips them."""
        if len(raw) > _BLOB_MIN and _BLOB.search(raw) is not None:
            raw = b'""'.join(_BLOB.split(raw)[::2])
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
        for i in self._selected(text, self._anchors_s, self._any_anchor_s):
            name, rx, _ = self._checks_s[i]
            if any(PLACEHOLDER not in m.group(0) for m in rx.finditer(text)) and name not in found:
                found.append(name)
        return found


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


def _all_placeholders(value: Any, keys: frozenset[str]) -> bool:
    """Whether every secret-named key already holds a placeholder (an already-redacted message)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if _norm_key(k) in keys and not isinstance(v, (dict, list)) and v is not None:
                if not isinstance(v, bool) and v not in (0, 0.0) and not (
                        isinstance(v, str) and PLACEHOLDER in v):  # e.g. "Bearer [REDACTED]"
                    return False
            elif not _all_placeholders(v, keys):
                return False
        return True
    if isinstance(value, list):
        return all(_all_placeholders(v, keys) for v in value)
    return True


# --- configuration -------------------------------------------------------------------------------


REDACT_KEYS = ("paths", "keys", "patterns", "defaults", "env")


def _mentioned(cwd: str | os.PathLike[str], word: bytes) -> bool:
    """Whether ./mcprec.toml or ./pyproject.toml holds ``word`` at all."""
    for name in ("mcprec.toml", "pyproject.toml"):
        try:
            with open(os.path.join(cwd, name), "rb") as f:
                if word in f.read():
                    return True
        except OSError:
            continue
    return False


def rules_from_config(path: str | os.PathLike[str] | None = None,
                      cwd: str | os.PathLike[str] = ".") -> Rules:
    """Rules from ``[redact]`` in ./mcprec.toml and ``[tool.mcprec.redact]`` in ./pyproject.toml
    (lists add up; ``defaults`` / ``env`` turned off by either file stay off)."""
    rules = Rules()
    if path is None and not _mentioned(cwd, b"redact"):
        return rules  # no file here says a word of redaction: no TOML to parse (~10 ms)
    from .config import sections, string_list
    from .errors import UsageError

    for p, table in sections("redact", path, cwd):
        unknown = sorted(set(table) - set(REDACT_KEYS))
        if unknown:
            raise UsageError(f"config file {p}: unknown redact setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(REDACT_KEYS)}")
        for flag in ("defaults", "env"):
            if flag in table and not isinstance(table[flag], bool):
                raise UsageError(f"config file {p}: {flag} must be true or false")
        rules = rules.merged(Rules(
            paths=tuple(string_list(table, "paths", p)), keys=tuple(string_list(table, "keys", p)),
            patterns=tuple(string_list(table, "patterns", p)),
            defaults=table.get("defaults", True), env=table.get("env", True)))
    return rules


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
