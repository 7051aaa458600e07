"""The SQLite cassette: schema, reader and batched writer. The only SQL in mcprec lives here."""

from .schema import FORMAT_VERSION
from .store import Cassette, Message, Session, StderrLine, connect, open_cassette
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
