"""Errors raised by mcprec.

    McprecError                      base class; the CLI prints ``str(error)`` as one line
    ├── CassetteError                a cassette cannot be opened, read or written
    │   ├── NotACassetteError        the path is not SQLite, or not a cassette
    │   ├── FormatTooNewError        written by a newer mcprec than this one
    │   └── SessionNotFoundError     no session of that name (also a LookupError)
    ├── ServerStartError             the target server could not be started
    ├── ReplayError                  replay cannot go on (empty or truncated session, ...)
    │   └── NoMatchError             a request has no recorded counterpart
    └── UsageError                   bad arguments or configuration (also a ValueError)

Every message says what happened, to what, and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class McprecError(Exception):
    """Base class of every error mcprec raises on purpose."""

    exit_code = 1


class CassetteError(McprecError):
    """A cassette cannot be opened, read or written."""


class NotACassetteError(CassetteError):
    """The file exists but is not SQLite, or is SQLite but not an mcprec cassette."""


class FormatTooNewError(CassetteError):
    """The cassette was written by a newer mcprec whose format this one cannot read."""


class SessionNotFoundError(CassetteError, LookupError):
    """The cassette has no session of the requested name."""


class ServerStartError(McprecError):
    """The target server could not be started (not found, not executable, ...)."""

    def __init__(self, message: str, exit_code: int = 127) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ReplayError(McprecError):
    """Replay cannot go on: the session is empty, truncated, or unusable."""


class NoMatchError(ReplayError):
    """A request has no recorded counterpart; ``report`` explains the closest candidates.

    ``request`` is the incoming request, ``candidates`` the closest recorded ones as data:
    ``{"seq", "method", "played", "differences": [{"path", "recorded", "got", "kind"}]}``.
    """

    def __init__(self, message: str, report: str = "", *, request: Any = None,
                 candidates: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.report = report
        self.request = request
        self.candidates = list(candidates)


class UsageError(McprecError, ValueError):
    """Bad arguments or configuration."""

    exit_code = 2
