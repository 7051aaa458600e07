"""Secrets in URLs and command lines, replaced for everything mcprec prints or stores.

One redactor for the places a URL or an argv is shown or kept: the ``record --target`` banner
and the stored target of an HTTP session, an ``--otlp`` collector's URL in errors, the stored
argv of a stdio session (``env MYSVC_TOKEN=… python srv.py``), and ``scan``'s look at the
stored targets. What it replaces, with ``[REDACTED]``:

- a URL's userinfo (``http://user:pass@host`` -> ``http://[REDACTED]@host``);
- a URL's query parameters whose name is secret (``?token=…``, ``&api_key=…``, ``X-Amz-Signature``);
- ``NAME=VALUE`` arguments (the environment given by ``env``) whose name is secret;
- ``--flag=value`` and ``--flag value`` whose flag name is secret.

A name is secret by the key rules of :mod:`mcprec.redact`: one of its ``SECRET_KEYS``
(compared lower-cased without ``_`` and ``-``), or containing one of the words of its
``SECRET_HEADER_WORDS`` (``key``, ``token``, ``secret``, ``auth``, ``passw`` …). A name of
``session`` alone (``--session``, ``MCP_SESSION=``) is no secret: mcprec's own option, and a
session name.

The connection itself always uses the URL as given (see ``UpstreamTarget``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .headers import SECRET_HEADER_WORDS
from .patterns import PLACEHOLDER, SECRET_KEYS

_WORDS = tuple(w for w in SECRET_HEADER_WORDS if w != "session")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*)@")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def secret_name(name: str) -> bool:
    """Whether a parameter, variable or flag of this name holds a secret (the key rules)."""
    low = name.lower().strip()
    norm = low.replace("_", "").replace("-", "")
    return bool(norm) and (norm in SECRET_KEYS or any(w in low for w in _WORDS))


def redact_url(url: str) -> str:
    """``url`` with its userinfo and its secret-named query parameters replaced."""
    m = _USERINFO.match(url)
    if m and m.group(2):
        url = f"{m.group(1)}{PLACEHOLDER}@{url[m.end():]}"
    query_at = url.find("?")
    if query_at < 0:
        return url
    end = url.find("#", query_at)
    end = len(url) if end < 0 else end
    query = url[query_at + 1:end]
    parts = re.split(r"([&;])", query)
    for i in range(0, len(parts), 2):
        name, eq, value = parts[i].partition("=")
        if eq and value and value != PLACEHOLDER and secret_name(_unquote(name)):
            parts[i] = f"{name}={PLACEHOLDER}"
    return url[: query_at + 1] + "".join(parts) + url[end:]


def redact_text(text: str) -> str:
    """Every URL in ``text`` redacted (``redact_url``)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with its secrets replaced: URLs in any argument, ``NAME=VALUE`` and
    ``--flag=value`` by name, and the value after a ``--flag`` of a secret name."""
    out = [redact_text(a) for a in argv]
    for i, arg in enumerate(out):
        name, eq, value = arg.partition("=")
        if not eq or not value or value == PLACEHOLDER:
            continue
        bare = name.lstrip("-")
        if (name.startswith("-") or _ENV_NAME.fullmatch(name)) and secret_name(bare):
            out[i] = f"{name}={PLACEHOLDER}"
    for i in range(len(out) - 1):
        arg, nxt = out[i], out[i + 1]
        if arg.startswith("-") and "=" not in arg and len(arg) > 2 and \
                secret_name(arg.lstrip("-")) and not nxt.startswith("-") and nxt != PLACEHOLDER:
            out[i + 1] = PLACEHOLDER
    return out


def redact_target(target: Any) -> Any:
    """A session's target as stored: an argv (``redact_argv``) or a URL (``redact_url``)."""
    if isinstance(target, str):
        return redact_text(target) if " " in target else (
            redact_url(target) if "://" in target else target)
    if isinstance(target, list) and all(isinstance(a, str) for a in target):
        return redact_argv(target)
    return target


def _unquote(name: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(name)
