"""The rule tables: placeholders and strategies, secret formats with their anchors, secret key
names and secret-named environment variables."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

PLACEHOLDER = "[REDACTED]"
_PLACEHOLDER_B = PLACEHOLDER.encode()

STRATEGIES = ("replace", "hash", "mask")
SALT_ENV = "MCPREC_REDACT_SALT"
"""A salt for hash pseudonyms, in place of the cassette's own: the same pseudonyms across
cassettes, and none stored in any of them."""
_TOKEN = re.compile(r"<[a-z0-9_]+:[0-9a-f]{8}>")
_MASK = "****"

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
