"""``mcprec view``: serve a cassette's view on a local port until Ctrl-C."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import _log
from ..cassette import Cassette
from ..redact import Redactor, default_redactor
from .data import ViewData


def start_fragment(c: Cassette, session: str | None, diff: Sequence[str] | None) -> str:
    """The part of the URL after ``#`` that opens the page on a session or a diff."""
    if diff:
        a, b = (c.session(name, stats=False) for name in diff)
        return f"#/diff?a={a.id}&b={b.id}"
    if session is not None:
        return f"#/s/{c.session(session, stats=False).id}"
    return "#/"


def serve_view(
    cassette: str | os.PathLike[str],
    session: str | None = None,
    *,
    listen: str = "127.0.0.1:0",
    open_browser: bool = True,
    diff: Sequence[str] | None = None,
    redact: Redactor | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Serve the view of ``cassette`` (opened read-only) until SIGINT/SIGTERM. Calls ``on_ready(url)``
    once listening (port 0 picks a free port; the command line prints it on stdout) and opens it in a browser unless told not
    to. ``session`` or ``diff`` (two session names) choose the page it opens on."""
    from ..transports.http_serve import bind, parse_listen, run_app, url_of
    from .app import ViewApp

    host, port = parse_listen(listen)
    path = Path(cassette)
    c = Cassette.open(path, read_only=True, wait=False)
    try:
        fragment = start_fragment(c, session, diff)
        sock = bind(host, port)
        data = ViewData(c, redact if redact is not None else default_redactor(),
                        reopen=lambda: Cassette.open(path, read_only=True, wait=False))
        app = ViewApp(data, bound_host=host, allowed_hosts=tuple(allowed_hosts),
                      allowed_origins=tuple(allowed_origins))
        url = url_of(sock, "/") + fragment

        def ready() -> None:
            _log.info("view", f"viewing {path} (read-only) at {url}; Ctrl-C to stop")
            if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
                _log.warning("view", f"warning: listening on {host}: other machines can read "
                             "this cassette's traffic")
            if open_browser:
                threading.Thread(target=_open, args=(url,), daemon=True).start()
            if on_ready is not None:
                on_ready(url)

        async def cleanup() -> None:
            data.close()

        run_app(app, sock, announce=ready, cleanup=cleanup)
    finally:
        c.close()
    return 0


def _open(url: str) -> None:
    import webbrowser

    try:
        webbrowser.open(url)
    except Exception:  # no browser here: the URL is on stdout
        pass
