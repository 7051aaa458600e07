"""One side of a diff: a session's messages read once, in seq order, grouped by request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import wire
from ..cassette import Cassette, Message, Session
from ..errors import UsageError

ANSWERS = (wire.RESPONSE, wire.ERROR)
LONG = 8
"""A minted value this long or longer is also replaced inside longer strings."""
MINTED_TAG = "verify_minted"
"""A verification run's tag: the values its server minted that the client sent back, live value
-> the recorded one (JSON). Its diff with its reference reads them as the recorded ones."""


def minted_renames(a: Session, b: Session) -> dict[str, str]:
    """The renames that make ``b`` (a verification run of ``a``) speak ``a``'s minted values."""
    text = b.tags.get(MINTED_TAG) if b.tags.get("verify_of") == a.name else None
    if not text:
        return {}
    try:
        renamed = wire.loads(text.encode())
    except ValueError:
        return {}
    if not isinstance(renamed, dict):
        return {}
    return {str(k): str(v) for k, v in renamed.items()}


@dataclass
class Side:
    """A loaded session: the client's requests, and what the server sent for each."""

    cassette: Cassette
    session: Session
    requests: list[Message] = field(default_factory=list)
    """The client's requests, in recorded order."""
    answers: dict[int, Message] = field(default_factory=dict)
    """Request seq -> the server's response or error."""
    handled: dict[int, list[Message]] = field(default_factory=dict)
    """Request seq -> notifications and requests the server sent while handling it."""
    unsolicited: list[Message] = field(default_factory=list)
    """Server notifications and requests sent while no request was being handled."""
    batches: int = 0
    count: int = 0

    def answer_json(self, request: Message) -> Any:
        answer = self.answers.get(request.seq)
        return None if answer is None else answer.json


def load_side(cassette: Cassette, session: Session,
              renamed: dict[str, str] | None = None) -> Side:
    """Read ``session`` once (streamed in seq order) and pair it via reply_to / context_seq;
    ``renamed``: values read as others (a verification run's minted values)."""
    side = Side(cassette, session)
    requests, answers, handled = side.requests, side.answers, side.handled
    for m in cassette.messages(session):
        if renamed:
            m = _renamed(m, renamed)
        side.count += 1
        kind = m.kind
        if m.direction == wire.CLIENT_TO_SERVER:
            if kind == wire.REQUEST:
                requests.append(m)
            elif kind == wire.BATCH:
                side.batches += 1
            continue
        if kind in ANSWERS:
            if m.reply_to is not None:
                answers.setdefault(m.reply_to, m)
        elif kind in (wire.NOTIFICATION, wire.REQUEST):
            if m.context_seq is None:
                side.unsolicited.append(m)
            else:
                handled.setdefault(m.context_seq, []).append(m)
        elif kind == wire.BATCH:
            side.batches += 1
    if not requests:
        what = "is empty" if side.count == 0 else "holds no client requests"
        raise UsageError(
            f"session {session.name!r} in {cassette.path} {what}; nothing to compare "
            f"(see `mcprec show {cassette.path} {session.name}`)"
        )
    return side


def _renamed(m: Message, renamed: dict[str, str]) -> Message:
    """``m`` with the values of ``renamed`` replaced (its key made again), or ``m``."""
    if not any(k.encode() in m.raw for k in renamed):
        return m
    obj = m.json
    if obj is None:
        return m
    obj = rewrite(obj, renamed)
    key = m.match_key
    if key is not None and m.method and isinstance(obj, dict):
        key = wire.match_key(m.method, obj.get("params"))
    return Message(m.id, m.session_id, m.seq, m.t_ns, m.direction, m.kind, m.rpc_id, m.method,
                   m.reply_to, m.context_seq, m.follows, key, wire.dumps(obj), m.http,
                   m.waits_for)


def rewrite(obj: Any, renamed: dict[str, str]) -> Any:
    """``obj`` with every string equal to a key of ``renamed`` replaced by its value, and every
    long key (``LONG``) found inside a longer string replaced there."""
    if isinstance(obj, str):
        if obj in renamed:
            return renamed[obj]
        for old, new in renamed.items():
            if len(old) >= LONG and old in obj:
                obj = obj.replace(old, new)
        return obj
    if isinstance(obj, dict):
        return {k: rewrite(v, renamed) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rewrite(v, renamed) for v in obj]
    return obj
