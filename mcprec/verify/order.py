"""What verify's mock client must see from the live server before it sends a recorded client
message: the place of each server message, the client's causes, and the values the server minted.

**Places.** A server message's place is what it is and how many of its like came before it in
the session: the answer to request id N, or the n-th ``notifications/message``, the n-th
``notifications/progress`` of token T, the n-th ``sampling/createMessage``. The live server's
message at the same place corresponds to the recorded one.

**Causes.** A recorded client message with ``waits_for`` (``cassette/causality.py``: a cancel
after the 2nd progress, ``roots/list_changed`` after ``roots/list``) is sent once the live
server sent the message at the place of its cause, as long after it as the recorded client took; when the live server never does (it
answered the request, went away, or ``--timeout`` passed), at the recorded delay from the request
the cause was sent for.

**Minted values.** A string that the server sent first (anywhere in a result, a notification or a
request of its own: a task id, a cursor, a created object's id) and that the client later sent
back is rewritten, in every later client message, to the string the live server sent at the same
JSON path of the message at the same place. Limits: strings alone (not numbers), of 1 to 256
characters without white space, holding a digit or at least 8 characters long; a value found
inside a longer string (a URI holding an id, as a part between ``/ : ? & = # , ; @``) is
replaced there only when it is 8 characters or more; a value the server embeds only in free
text (a sentence) is not seen as minted.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import wire
from ..cassette import Message
from ..diff.load import LONG, rewrite

Place = tuple[str, str, int]
"""(what, qualifier, ordinal): ("answer", "3", 1), ("notifications/progress", "2", 2)."""

Path = tuple[str | int, ...]

MAX_MINTED = 256


class Places:
    """Gives each server message, in the order they come, its place."""

    def __init__(self) -> None:
        self._count: dict[tuple[str, str], int] = defaultdict(int)

    def place(self, kind: str, method: str | None, rpc_id: str | None, obj: Any) -> Place | None:
        if kind in (wire.RESPONSE, wire.ERROR):
            if rpc_id is None:
                return None
            what, qualifier = "answer", rpc_id
        elif kind in (wire.NOTIFICATION, wire.REQUEST) and method:
            what, qualifier = method, ""
            if method == "notifications/progress":
                params = obj.get("params") if isinstance(obj, dict) else None
                token = params.get("progressToken") if isinstance(params, dict) else None
                qualifier = wire.id_text(token) if token is not None else ""
        else:
            return None
        self._count[(what, qualifier)] += 1
        return (what, qualifier, self._count[(what, qualifier)])


def describe(place: Place) -> str:
    what, qualifier, n = place
    if what == "answer":
        return f"the answer to id {qualifier}"
    return f"{what} #{n}"


@dataclass(frozen=True)
class Cause:
    """A recorded client message's cause: the place of the server message it came after, the
    recorded client request that message was sent for (None: none), and the recorded delay from
    that request (or from the client's previous message) to the client message, in seconds,
    and from the cause to the client message."""

    place: Place
    request: int | None
    delay_s: float
    reaction_s: float = 0.0
    """The recorded time from the cause to the client message: the client's reaction, kept, so
    that what the server sent meanwhile (a log line right after the progress notification that
    made the client give up) still comes before the cancel."""


def payload(obj: Any) -> Any:
    """The part of a message that carries values (not ``jsonrpc``, ``id``, ``method``)."""
    if not isinstance(obj, dict):
        return None
    return {k: v for k, v in obj.items() if k in ("params", "result", "error")}


def strings(obj: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string value of ``obj`` (not keys) with its path."""
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from strings(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from strings(v, (*path, i))


def at(obj: Any, path: Path) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or step >= len(obj):
                return None
        elif not isinstance(obj, dict):
            return None
        obj = obj[step] if isinstance(step, int) else obj.get(step)
    return obj


def minted_like(value: str) -> bool:
    return (0 < len(value) <= MAX_MINTED and not any(ch.isspace() for ch in value)
            and (len(value) >= LONG or any(ch.isdigit() for ch in value)))


class ClientOrder:
    """Read once from the recorded session: places, causes and minted values."""

    def __init__(self, messages: Iterable[Message]) -> None:
        self.places: dict[int, Place] = {}
        """Recorded server message seq -> its place."""
        self.causes: dict[int, Cause] = {}
        """Recorded client message seq -> its cause."""
        self.minted: dict[str, tuple[Place, Path]] = {}
        """A minted value the client sent back -> where the server minted it."""
        self.sends_back: dict[int, list[str]] = {}
        """Recorded client message seq -> the minted values it sends back."""
        self.by_place: dict[Place, list[str]] = defaultdict(list)
        places = Places()
        by_seq: dict[int, Message] = {}
        sent: set[str] = set()
        candidates: dict[str, tuple[Place, Path]] = {}
        previous_client: Message | None = None
        for m in messages:
            by_seq[m.seq] = m
            obj = m.json
            if m.direction == wire.SERVER_TO_CLIENT:
                place = places.place(m.kind, m.method, m.rpc_id, obj)
                if place is None:
                    continue
                self.places[m.seq] = place
                for path, value in strings(payload(obj)):
                    if value not in sent and value not in candidates and minted_like(value):
                        candidates[value] = (place, path)
                continue
            if m.waits_for is not None and m.waits_for in self.places \
                    and m.kind not in (wire.RESPONSE, wire.ERROR):
                cause = by_seq.get(m.waits_for)
                request = cause.context_seq if cause is not None else None
                start = by_seq.get(request) if request is not None else previous_client
                delay = (m.t_ns - start.t_ns) / 1e9 if start is not None else 0.0
                reaction = (m.t_ns - cause.t_ns) / 1e9 if cause is not None else 0.0
                self.causes[m.seq] = Cause(self.places[m.waits_for], request, max(0.0, delay),
                                           max(0.0, reaction))
            back = self._sent_back(payload(obj), candidates, sent)
            if back:
                self.sends_back[m.seq] = back
            previous_client = m
        for value, where in self.minted.items():
            self.by_place[where[0]].append(value)
        self.raw_at: dict[Place, bytes] = {
            place: by_seq[seq].raw for seq, place in self.places.items() if place in self.by_place}
        """The recorded server message at each place that minted a value the client sent back."""

    def live_value(self, value: str, live: Any, live_raw: bytes) -> str | None:
        """The live server's counterpart of the recorded minted ``value``: ``live`` (what the
        live message at the same place holds at the same path, whose text is ``live_raw``) when
        it is a minted value in its own right — a string like one, that the live message holds
        instead of ``value`` (not beside it: a list in another order), and that the recorded
        message did not hold (a name that moved up when another was removed)."""
        if not isinstance(live, str) or live == value or not minted_like(live):
            return None
        if value.encode() in live_raw:
            return None
        recorded = self.raw_at.get(self.minted[value][0], b"")
        return None if live.encode() in recorded else live

    def _sent_back(self, obj: Any, candidates: dict[str, tuple[Place, Path]],
                   sent: set[str]) -> list[str]:
        back: list[str] = []
        values = [v for _, v in strings(obj)]
        for value in values:
            if value in candidates:
                back.append(value)
            elif len(value) > LONG:  # a long minted value as a part of it (a URI's segment)
                back.extend(part for part in _PARTS.split(value)
                            if len(part) >= LONG and part in candidates)
        for value in back:
            self.minted.setdefault(value, candidates[value])
        sent.update(values)
        return list(dict.fromkeys(back))


_PARTS = re.compile(r"[/:?&=#,;@\s]+")
"""What separates the parts of a longer string in which a minted value is looked for."""


__all__ = ["Cause", "ClientOrder", "Place", "Places", "at", "describe", "rewrite"]
