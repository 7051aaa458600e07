"""Record modes: when a replay may reach the real server, named as vcrpy names them.

A small module of its own so that the pytest plugin and the click-free entry point can check a
mode without importing the replay engine.
"""

from __future__ import annotations

from ._enum import TextEnum
from .errors import UsageError


class Mode(TextEnum):
    """A record mode. Members equal their names as strings (``Mode.ONCE == "once"``), as the
    command line, the environment and the pytest marker give them."""

    NONE = "none"
    """Replay only; a request with no recorded answer gets an error."""
    ONCE = "once"
    """Record when the cassette (or the session) is missing, else replay."""
    NEW_EPISODES = "new_episodes"
    """Replay, and forward unmatched requests to the real server, recording its answers."""
    ALL = "all"
    """Record again, replacing the session."""

    @classmethod
    def parse(cls, value: str | Mode, source: str = "mode") -> Mode:
        """``value`` as a mode; a :class:`UsageError` naming ``source`` and the choices if not."""
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"{source} is {value!r}; choose one of {', '.join(MODES)}") from None

    @property
    def may_record(self) -> bool:
        """Whether this mode may start the real server."""
        return self is not Mode.NONE


MODES: tuple[str, ...] = tuple(m.value for m in Mode)
