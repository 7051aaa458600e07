"""The page: one HTML skeleton, served with its scripts and style as files (live), or with
everything inline and the data embedded (a self-contained file). No CDN, no web font: the
scripts and the style are mcprec's own files in ``static/``."""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
from importlib import resources
from typing import Any

SCRIPTS = ("tree.js", "vlist.js", "common.js", "api.js", "message.js", "timeline.js", "search.js",
           "diff.js", "view.js")
STYLE = "view.css"
ASSETS = frozenset((*SCRIPTS, STYLE))

LIVE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "media-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
"""The live page's Content-Security-Policy: its own files and API only; images and audio of
messages come as ``data:`` URLs."""

_CONTENT_TYPES = {".js": b"text/javascript; charset=utf-8", ".css": b"text/css; charset=utf-8"}


def asset(name: str) -> tuple[bytes, bytes] | None:
    """(content, content type) of a file of the page, or None for any other name."""
    return _asset(name) if name in ASSETS else None


@functools.lru_cache(maxsize=len(ASSETS))
def _asset(name: str) -> tuple[bytes, bytes]:
    data = (resources.files(__package__) / "static" / name).read_bytes()
    return data, _CONTENT_TYPES[name[name.rfind("."):]]


def _skeleton(title: str, head: str, tail: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
{head}
<title>{html.escape(title)}</title>
</head>
<body>
<header class="top">
  <a class="brand" href="#/">mcprec view</a>
  <span class="cassette" id="cassette-name"></span>
  <nav>
    <a href="#/" data-nav="sessions">Sessions</a>
    <a href="#/diff" data-nav="diff">Diff</a>
  </nav>
  <form id="search-form" class="search" role="search">
    <input id="search-input" type="search" placeholder="Search: text, method:…, tool:…, kind:…"
           aria-label="Search the cassette" autocomplete="off">
  </form>
</header>
<main id="main" tabindex="-1"><p class="loading">Loading…</p></main>
{tail}
</body>
</html>
"""


def live_page(title: str = "mcprec view") -> bytes:
    head = f'<link rel="stylesheet" href="static/{STYLE}">'
    tail = "\n".join(f'<script src="static/{name}"></script>' for name in SCRIPTS)
    return _skeleton(title, head, tail).encode()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def embed_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` that
    could end the element or start a comment (JSON.parse reads the escapes back)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def static_page(data: dict[str, Any], title: str) -> str:
    """One self-contained file: the style and scripts inline, allowed by their hashes in a
    Content-Security-Policy that allows nothing else (no network at all)."""
    style = _read(STYLE)
    script = "\n".join(_read(name) for name in SCRIPTS)
    csp = (f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
           "img-src data:; media-src data:; base-uri 'none'; form-action 'none'")
    head = (f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            f"<style>{style}</style>")
    tail = (f'<script type="application/json" id="mcprec-data">{embed_json(data)}</script>\n'
            f"<script>{script}</script>")
    return _skeleton(title, head, tail)


def _read(name: str) -> str:
    found = asset(name)
    assert found is not None
    text = found[0].decode()
    if "</script" in text.lower() or "</style" in text.lower():  # would end the inline element
        raise ValueError(f"static/{name} must not contain a closing script or style tag")
    return text
