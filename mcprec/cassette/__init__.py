"""The SQLite cassette: schema, connections, reading. The only SQL in mcprec lives here
(recording's rows are written by ``mcprec.record.writer`` through ``rows``)."""

from __future__ import annotations

from .schema import FORMAT_VERSION
from .store import Cassette, open_cassette
from .models import Message, Session, StderrLine
from .connect import connect

__all__ = [
    "FORMAT_VERSION",
    "Cassette",
    "Message",
    "Session",
    "StderrLine",
    "connect",
    "open_cassette",
]

