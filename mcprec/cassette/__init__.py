"""The SQLite cassette: schema, reader and batched writer. The only SQL in mcprec lives here.

The writer is imported lazily: replaying never needs it, and start-up time matters there.
"""

from __future__ import annotations

# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .schema import FORMAT_VERSION
from .store import Cassette, Message, Session, StderrLine, connect, open_cassette

if TYPE_CHECKING:
    from .writer import SessionWriter, open_session_writer

__all__ = [
    "FORMAT_VERSION",
    "Cassette",
    "Message",
    "Session",
    "SessionWriter",
    "StderrLine",
    "connect",
    "open_cassette",
    "open_session_writer",
]


def __getattr__(name: str) -> Any:
    if name in ("SessionWriter", "open_session_writer"):
        from . import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'mcprec.cassette' has no attribute {name!r}")
