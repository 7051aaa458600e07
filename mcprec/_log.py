"""The library's notices, through :mod:`logging` under the ``mcprec`` logger.

Library code calls :func:`info` or :func:`warning` with a one-line text; it never prints. A
program embedding mcprec gets the notices in its own logging set-up (pytest's ``caplog``, a
handler of its own); with none, Python's last-resort handler still shows warnings on stderr. The
command line (and the recorder's own process) calls :func:`to_stderr` once, which shows INFO and
up as ``mcprec: <text>`` lines, as the commands always have.

:mod:`logging` is imported at the first notice, not before: it costs 5-10 ms (``python -X
importtime``), which replay's start-up (the first answer) does not pay. On the command line,
while nothing else has imported it, a notice is written straight to stderr in the handler's
format (see ``_direct``), so it is not imported at all.
"""

from __future__ import annotations

import sys

from .terminal import safe_lines
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_to_stderr = False
_installed = False


def to_stderr() -> None:
    """Show the library's notices (INFO and up) on stderr, one ``mcprec: <text>`` line each."""
    global _to_stderr
    _to_stderr = True
    if "logging" in sys.modules:  # already paid for: install now
        _logger("")


def info(area: str, text: str) -> None:
    """A notice of what is happening (``recording … into …``)."""
    if _direct(text):
        return
    _logger(area).info(text)


def warning(area: str, text: str) -> None:
    """A notice that something did not go as asked (shown even with no logging set up)."""
    if _direct(text):
        return
    _logger(area).warning(text)


def _direct(text: str) -> bool:
    """The command line's notice while nothing has imported :mod:`logging`: nobody can have set
    a handler, so the line the stderr handler would write is written as it would (and flushed),
    without importing logging first. Replay announces its session before its first answer:
    that import was ~5 ms of its start-up (``python -X importtime``, medians of 7 runs)."""
    if not _to_stderr or "logging" in sys.modules:
        return False
    stream = sys.stderr
    if stream is not None:
        try:
            stream.write(f"mcprec: {safe_lines(text)}\n")
            stream.flush()
        except (OSError, ValueError):  # as logging's handler, a closed stderr is not an error
            pass
    return True


def _logger(area: str) -> Any:
    import logging

    global _installed
    if _to_stderr and not _installed:
        _installed = True

        class Stderr(logging.StreamHandler):  # type: ignore[type-arg]
            """Writes to ``sys.stderr`` as it is at each notice (click and tests swap it)."""

            @property  # type: ignore[override]
            def stream(self) -> Any:
                return sys.stderr

            @stream.setter
            def stream(self, _value: Any) -> None:
                pass

        handler = Stderr()
        class Safe(logging.Formatter):
            """``mcprec: <text>``, with control characters escaped (``terminal.safe_lines``):
            a notice can quote a recording."""

            def format(self, record: logging.LogRecord) -> str:
                return safe_lines(super().format(record))

        handler.setFormatter(Safe("mcprec: %(message)s"))
        top = logging.getLogger("mcprec")
        top.addHandler(handler)
        top.setLevel(logging.INFO)
    return logging.getLogger(f"mcprec.{area}" if area else "mcprec")
