"""One side of a diff: a session's messages read once, in seq order, grouped by request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import wire
from ..cassette import Cassette, Message, Session
from ..errors import UsageError

ANSWERS = (wire.RESPONSE, wire.ERROR)


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


def load_side(cassette: Cassette, session: Session) -> Side:
    """Read ``session`` once (streamed in seq order) and pair it via reply_to / context_seq."""
    side = Side(cassette, session)
    requests, answers, handled = side.requests, side.answers, side.handled
    for m in cassette.messages(session):
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
