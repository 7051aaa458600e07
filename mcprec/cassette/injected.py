"""The faults ``mcprec record --fault`` injected into live traffic (``injected_faults``)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from .._lazy import orjson

if TYPE_CHECKING:
    from .models import Session
    from .store import Cassette


def injected_faults(cassette: Cassette, session: Session | int) -> list[dict[str, Any]]:
    """A session's injected faults, in order: ``{seq, rule, effect, request_id, detail}``,
    each marking the message the client received (none for a cassette of an older format)."""
    sid = session if isinstance(session, int) else session.id
    try:
        rows = cassette.connection.execute(
            "SELECT seq, rule, effect, request_id, detail FROM injected_faults "
            "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    except sqlite3.OperationalError:  # a cassette of an older format, read as it is
        return []
    return [{"seq": seq, "rule": rule, "effect": effect, "request_id": rid,
             "detail": orjson.loads(detail) if detail else None}
            for seq, rule, effect, rid, detail in rows]
