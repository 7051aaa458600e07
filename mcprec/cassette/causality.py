"""What a server message waited for: derived from the recorded order, stored as ``waits_for``.

A server message sent while handling a client request R was often caused by more than R alone:
the SDK answers a cancelled call with an error only after the client's ``notifications/cancelled``;
a tool that asked the client for sampling goes on only after the client's answer; a server that
re-reads the roots does so after ``notifications/roots/list_changed``. Replay must hold such a
message until its cause arrives, and must not hold a message whose cause came later in the
recording (a server that sent ``roots/list`` and answered a ping without waiting for the roots).

The rule: a server message in R's context waits for the latest client message, recorded before
it, that relates to R — the client's cancellation of R, the client's answer to a request the
server sent in R's context, or a ``roots/list_changed`` after the server asked R's roots. The
recorder computes it as rows are made; older cassettes get it computed once by a migration.

The client side is stored alike: a client message's ``waits_for`` is the seq of the server
message it came after and answered to — its answer to a server request (that request), its
cancellation of R (the latest server message sent in R's context before it: the second progress
notification after which the client gave up), a ``roots/list_changed`` (the latest ``roots/list``
the server sent before it). verify's mock client sends such a message only once the live server
sent the corresponding message (``verify/order.py``).
"""

from __future__ import annotations

from typing import Any

from .. import wire
from .models import text_bytes

_LIMIT = 10_000  # requests remembered; causes are recent, and recording must stay bounded


class Causality:
    """Feed every message of one session in recorded order; ``observe`` returns ``waits_for``."""

    def __init__(self) -> None:
        # client request seq -> the latest related client message seq
        self._cause: dict[int, int] = {}
        # client request id text -> its seq (requests the client may cancel)
        self._client_ids: dict[str, int] = {}
        # seq of a server request sent in a client request's context -> that client request
        self._asked_by: dict[int, int] = {}
        # client requests whose handling asked the client for its roots
        self._asked_roots: dict[int, None] = {}
        # client request seq -> the latest server message sent in its context
        self._latest_in: dict[int, int] = {}
        # the latest roots/list the server sent
        self._roots_asked: int | None = None

    def observe(self, seq: int, direction: str, kind: str, method: str | None,
                rpc_id: str | None, reply_to: int | None, context: int | None,
                obj: Any) -> int | None:
        if direction == wire.CLIENT_TO_SERVER:
            return self._client(seq, kind, method, rpc_id, reply_to, obj)
        if kind == wire.REQUEST and method == "roots/list":
            self._roots_asked = seq
        if context is not None and kind not in (wire.RESPONSE, wire.ERROR):
            self._remember(self._latest_in, context, seq)
        if kind == wire.REQUEST and context is not None:
            self._remember(self._asked_by, seq, context)
            if method == "roots/list":
                self._remember(self._asked_roots, context, None)
        return self._cause.get(context) if context is not None else None

    def _client(self, seq: int, kind: str, method: str | None, rpc_id: str | None,
                reply_to: int | None, obj: Any) -> int | None:
        """What the client message at ``seq`` waited for (a server message's seq), if any."""
        if kind == wire.REQUEST:
            if rpc_id is not None:
                self._remember(self._client_ids, rpc_id, seq)
        elif kind in (wire.RESPONSE, wire.ERROR):
            asker = self._asked_by.get(reply_to) if reply_to is not None else None
            if asker is not None:
                self._remember(self._cause, asker, seq)
            return reply_to
        elif kind == wire.NOTIFICATION and method == "notifications/cancelled":
            params = obj.get("params") if isinstance(obj, dict) else None
            target = params.get("requestId") if isinstance(params, dict) else None
            cancelled = self._client_ids.get(wire.id_text(target)) if target is not None else None
            if cancelled is not None:
                self._remember(self._cause, cancelled, seq)
                return self._latest_in.get(cancelled)
        elif kind == wire.NOTIFICATION and method == "notifications/roots/list_changed":
            for asker in self._asked_roots:
                self._remember(self._cause, asker, seq)
            return self._roots_asked
        return None

    @staticmethod
    def _remember(d: dict[Any, Any], key: Any, value: Any) -> None:
        d.pop(key, None)  # most recent last: the oldest goes first when the limit is reached
        d[key] = value
        if len(d) > _LIMIT:
            del d[next(iter(d))]


def backfill(conn: Any, *, direction: str | None = None) -> None:
    """Compute ``waits_for`` for every message already in the cassette (one pass, in order);
    ``direction``: store it for that side's messages alone."""
    updates: list[tuple[int, int]] = []
    session_id, tracker = None, Causality()
    rows = conn.execute(
        "SELECT id, session_id, seq, direction, kind, method, rpc_id, reply_to, context_seq, "
        "CASE WHEN kind = 'notification' AND direction = 'client_to_server' "
        "AND method = 'notifications/cancelled' THEN raw END "
        "FROM messages ORDER BY session_id, seq"
    )
    for (id_, sid, seq, side, kind, method, rpc_id, reply_to, context, raw) in rows:
        if sid != session_id:
            session_id, tracker = sid, Causality()
        obj = _parse(raw) if raw is not None else None
        waits = tracker.observe(seq, side, kind, method, rpc_id, reply_to, context, obj)
        if waits is not None and (direction is None or side == direction):
            updates.append((waits, id_))
    if updates:
        conn.executemany("UPDATE messages SET waits_for = ? WHERE id = ?", updates)


def _parse(raw: bytes) -> Any:
    try:
        return wire.loads(text_bytes(raw))
    except ValueError:
        return None
