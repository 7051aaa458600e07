"""What replay is made of, free of any I/O: the runs of recorded scripts (``Run``), the client
requests they answer (``Play``), the client messages they wait for (``Cause``), what a replay
answered (``ReplayStats``), and the recorded answer given the client's id (``with_id``).

On replay's start-up path: nothing here imports more than ``wire`` and the cassette's rows.
"""

from __future__ import annotations

from collections.abc import Callable
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..faults.rules import Fault

from .. import wire
from .._plain import Plain
from ..cassette import Message
from ..cassette.models import StoredMessage, StoredText
from ..errors import NoMatchError
from .settings import PROTOCOL_VERSION_POLICIES as PROTOCOL_VERSION_POLICIES

NO_MATCH_CODE = -32000
UNANSWERED_CODE = -32001
INTERNAL_ERROR = -32603
CANCELLED = "notifications/cancelled"
# Answered with an empty result when nothing was recorded for them: their result carries nothing.
EMPTY_RESULT_METHODS = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# How long a message waits for a client notification it waited for in the recording (a
# cancellation) before it is played anyway: twice the recorded wait, within these bounds.
CAUSE_WAIT_MIN_S = 1.0
CAUSE_WAIT_MAX_S = 30.0

Outgoing = tuple["bytes | StoredText", "str | None"]
"""``(message, related)``: one message for the client. ``related`` is the id text of the client
request it belongs to (HTTP routes it onto that request's stream), or None. An empty message
means: end that request's stream abruptly, as the recorded upstream did. A large recorded
answer comes as a ``StoredText``: the driver sends its ``pieces()`` as it reads them from the
cassette (or ``bytes()`` of it, whole)."""

Unmatched = Callable[[dict[str, "Any"], NoMatchError], bool]
"""``unmatched(request, error) -> handled``: a driver's own answer to an unmatched request
(the live fallback); False lets the engine answer it."""


class ReplayStats(Plain):
    """What a replay answered. A plain class, not a dataclass: building the dataclass was
    0.6-0.7 ms of CPU at every replay's start-up (with its repr and equality kept)."""

    __slots__ = ("requests", "matched", "repeated", "unmatched", "unanswered", "forwarded")
    _FIELDS = __slots__

    def __init__(self, requests: int = 0, matched: int = 0, repeated: int = 0,
                 unmatched: list[dict[str, Any]] | None = None,
                 unanswered: list[dict[str, Any]] | None = None, forwarded: int = 0) -> None:
        self.requests = requests
        self.matched = matched
        self.repeated = repeated
        self.unmatched: list[dict[str, Any]] = [] if unmatched is None else unmatched
        self.unanswered: list[dict[str, Any]] = [] if unanswered is None else unanswered
        """Matched requests the recording has no usable answer for (the server exited, the
        session was cut off, the answer was recorded truncated), with the reason."""
        self.forwarded = forwarded


error_response = wire.error_message


class Cause:
    """A client message a run may wait for; ``arrived`` once it has come."""

    __slots__ = ("arrived", "waiters")

    def __init__(self) -> None:
        self.arrived = False
        self.waiters: list[Run] = []


class Play:
    """One replayed request in progress: what its script may still wait for."""

    __slots__ = ("key", "request", "answers", "cancelled", "notified", "expects_cancel", "run")

    def __init__(self, key: str, request: Message) -> None:
        self.key = key
        self.request = request
        self.answers: dict[int, Cause] = {}  # recorded client answer seq -> arrived
        self.cancelled = Cause()
        self.notified: dict[str, Cause] = {}  # client notification method -> arrived
        self.expects_cancel = False
        self.run: Run | None = None

    def answer(self, seq: int) -> Cause:
        c = self.answers.get(seq)
        if c is None:
            c = self.answers[seq] = Cause()
        return c

    def notification(self, method: str) -> Cause:
        if method == CANCELLED:
            return self.cancelled
        c = self.notified.get(method)
        if c is None:
            c = self.notified[method] = Cause()
        return c


class Run:
    """A script being played: messages, where it is, and what holds it up."""

    __slots__ = ("messages", "i", "clock", "rid", "token", "related", "play", "done",
                 "deadline", "cause", "stopped", "gave_up", "released", "fault", "version",
                 "pace")

    def __init__(self, messages: list[Message], clock: tuple[float, int] | None, rid: Any,
                 token: Any, related: str | None, play: Play | None,
                 done: Callable[[Run], None] | None) -> None:
        self.messages = messages
        self.i = 0
        self.clock = clock
        self.rid = rid
        self.token = token
        self.related = related
        self.play = play
        self.done = done
        self.deadline: float | None = None  # resume at (timing, or a bounded cause wait)
        self.cause: Cause | None = None  # waiting for it
        self.stopped = False
        self.gave_up: Callable[[], None] | None = None  # what a cause wait's deadline does
        self.released = -1  # the message whose cause was waited for in vain: it plays now
        self.fault: Fault | None = None  # injected into the answer (malformed, disconnect)
        self.version: str | None = None  # initialize: answer with this protocolVersion
        self.pace: float | None = None  # played at this --timing whatever replay's (tasks)


def same_bytes(raw: bytes, req: Message) -> bool:
    """Whether ``raw`` is the recorded request ``req`` but for its id."""
    cut, recorded = wire.id_cut(raw), wire.id_cut(req.raw)
    return cut is not None and recorded is not None and cut[0] == recorded[0]


def with_id(m: Message, rid: Any) -> bytes | StoredText:
    """The recorded answer ``m`` with the client's id, every other byte as recorded (spliced
    where the id is found without parsing: a 50 MB answer 188 -> 33 ms, a small one 1.5 ->
    0.9 µs; else parsed and rebuilt, its numbers exactly as recorded). A large answer
    (``StoredMessage``) whose id is found from its first and last bytes is not read here: it
    comes as its ``StoredText`` with the id replaced, read as it is sent."""
    if type(m) is StoredMessage:
        streamed = stored_with_id(m, rid)
        if streamed is not None:
            return streamed
    spliced = wire.with_id(m.raw, rid)
    return spliced if spliced is not None else wire.dumps({**m.json, "id": rid})


def stored_with_id(m: StoredMessage, rid: Any) -> StoredText | None:
    """``m``'s text in the cassette with ``rid`` where ``wire.with_id`` would put it, found from
    its head (and tail); None where Python cannot read it in pieces, or the head and tail do not
    say where the id is (``wire.id_span``)."""
    text = m.text()
    if text is None:
        return None
    size = m.size
    span = wire.id_span(text.read(0, wire.ID_HEAD), size, lambda n: text.read(size - n, n))
    if span is None:
        text.close()
        return None
    return text.replace(*span, wire.dumps(rid))


def with_version(m: Message, rid: Any, version: str) -> bytes:
    """The recorded ``initialize`` answer with the client's id and ``version`` in its result."""
    return wire.dumps({**m.json, "id": rid, "result": {**m.json["result"],
                                                       "protocolVersion": version}})


def param_of(obj: Any, name: str) -> Any:
    params = obj.get("params") if isinstance(obj, dict) else None
    return params.get(name) if isinstance(params, dict) else None

