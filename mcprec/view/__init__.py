"""``mcprec view``: a recording, a diff and a verify run in the browser.

A local page over one cassette, opened read-only (``server.serve_view``), and the same page as
one self-contained HTML file (``export``). Modules: ``data`` (the JSON of every answer, bounded),
``app`` (the ASGI app: the page, its files and the JSON API, behind Host/Origin checks and a
Content-Security-Policy), ``page`` (the HTML skeleton, live or inline), ``export`` (the file),
``static/`` (the page's own JavaScript and CSS: no build step, nothing fetched from elsewhere).
The SQL lives in ``mcprec.cassette.views``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .export import diff_html, view_html, write_view_html
    from .server import serve_view

__all__ = ["diff_html", "serve_view", "view_html", "write_view_html"]


def __getattr__(name: str) -> Any:
    if name == "serve_view":
        from .server import serve_view

        return serve_view
    if name in ("diff_html", "view_html", "write_view_html"):
        from . import export

        return getattr(export, name)
    raise AttributeError(f"module 'mcprec.view' has no attribute {name!r}")
