"""``mcprec view``: the click layer over ``mcprec.view``. Registered in ``cli/__init__.py``."""

from __future__ import annotations

import sys

import click

from ._common import CommandError, session_choice


@click.command("view", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("session", required=False)
@session_choice
@click.option("--listen", default="127.0.0.1:0", show_default=True, metavar="HOST:PORT",
              help="Where to serve the page; port 0 picks a free port. The URL is printed on "
                   "stdout.")
@click.option("--no-open", "no_open", is_flag=True,
              help="Do not open a browser; only print the URL.")
@click.option("--diff", "diff", nargs=2, metavar="A B",
              help="Open on the diff of sessions A and B of CASSETTE.")
@click.option("--html", "html", type=click.Path(dir_okay=False, allow_dash=True),
              metavar="OUT.html",
              help="Write the view (of SESSION, or of the --diff) as one self-contained HTML "
                   "file instead of serving it ('-': stdout).")
@click.option("--allow-host", "allow_host", multiple=True, metavar="HOST",
              help="A Host name to accept besides local ones (repeatable).")
@click.option("--allow-origin", "allow_origin", multiple=True, metavar="ORIGIN",
              help="A browser Origin to accept besides local ones (repeatable).")
def view_command(cassette: str, session: str | None, listen: str, no_open: bool,
                 diff: tuple[str, str] | None, html: str | None, allow_host: tuple[str, ...],
                 allow_origin: tuple[str, ...]) -> None:
    """See CASSETTE in the browser: sessions, timelines, messages, search and diffs.

    Serves a page on 127.0.0.1 (a free port by default; the URL is printed on stdout) and
    opens it, until Ctrl-C. The cassette is opened read-only. With SESSION the page opens on
    that session's timeline; with --diff A B on the diff of two sessions.

    \b
      mcprec view cassettes/weather.db
      mcprec view cassettes/weather.db v1 --no-open
      mcprec view cassettes/weather.db --diff v1 v2
      mcprec view cassettes/weather.db v1 --html v1.html     # one file, works offline

    Whatever `mcprec scan` would flag as a secret is shown only after a warning, and is left
    out of --html files.
    """
    if html is not None:
        _write_html(cassette, session, diff, html)
        return
    from ..view import serve_view

    sys.exit(serve_view(cassette, session, listen=listen, open_browser=not no_open, diff=diff,
                        allowed_hosts=allow_host, allowed_origins=allow_origin,
                        on_ready=click.echo))


def _write_html(cassette: str, session: str | None, diff: tuple[str, str] | None,
                out: str) -> None:
    from ..view.export import diff_html, view_html

    if diff:
        from ..diff import diff_sessions

        text = diff_html(diff_sessions(cassette, diff[0], cassette, diff[1]))
    else:
        text = view_html(cassette, session)
    if out == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(out, "wb") as f:
            f.write(text.encode("utf-8", "replace"))
    except OSError as e:
        raise CommandError(f"cannot write {out}: {e.strerror}", 2) from e
    click.echo(f"mcprec: wrote {out}", err=True)
