"""The keys of the requests each recorded session holds, for replay's choice among sessions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .store import Cassette, Session

_BATCH = 500  # session ids per query (SQLite's bound on parameters is 999 in old builds)


def request_keys(cassette: Cassette, sessions: Sequence[Session]
                 ) -> dict[int, tuple[dict[tuple[str, str], int], dict[str, int], str | None]]:
    """Per session id: how many client requests it recorded under each stored (method,
    match key), how many of each method, and the match key of its first ``initialize`` (None
    when it recorded none). One grouped query per 500 sessions (per file, for a set of
    cassettes: ``sets.CassetteSet.request_keys``)."""
    own = getattr(cassette, "request_keys", None)
    if own is not None:
        found: dict[int, tuple[dict[tuple[str, str], int], dict[str, int], str | None]] = \
            own(sessions)
        return found
    out: dict[int, tuple[dict[tuple[str, str], int], dict[str, int], str | None]] = {
        s.id: ({}, {}, None) for s in sessions}
    first_init: dict[int, tuple[int, str | None]] = {}
    ids = list(out)
    for i in range(0, len(ids), _BATCH):
        part = ids[i:i + _BATCH]
        rows: Any = cassette.connection.execute(
            "SELECT session_id, method, match_key, count(*), min(seq) FROM messages "
            "WHERE kind = 'request' AND direction = 'client_to_server' AND session_id IN ("
            + ",".join("?" * len(part)) + ") GROUP BY session_id, method, match_key", part)
        for sid, method, key, n, seq in rows:
            keys, methods, _ = out[sid]
            if key is not None:
                keys[(method, key)] = n
            methods[method] = methods.get(method, 0) + n
            if method == "initialize" and (sid not in first_init or seq < first_init[sid][0]):
                first_init[sid] = (seq, key)
    for sid, (_, key) in first_init.items():
        keys, methods, _ = out[sid]
        out[sid] = (keys, methods, key)
    return out

