"""Id rules: a usable id on every request, unique among the sender's requests, and every
request answered exactly once."""

from __future__ import annotations

from typing import Any, ClassVar

from .. import wire
from .model import rule
from .walk import OTHER, Checker, Item

BAD_ID = rule("ID001", "id-type", "protocol", "error",
              "A request id that is not a string or an integer (null, a fraction, an object), "
              "or a result with a null id.")
IN_FLIGHT = rule("ID002", "id-in-flight", "protocol", "error",
                 "A request reuses the id of a request of the same side still in flight.")
REUSED = rule("ID003", "id-reused", "protocol", "warning",
              "A request reuses an id the same side used earlier in the session.")
UNKNOWN = rule("ID004", "answer-unknown-id", "protocol", "error",
               "A response or error for an id the other side never sent a request with.")
TWICE = rule("ID005", "answered-twice", "protocol", "error",
             "A request answered more than once.")
UNANSWERED = rule("ID006", "unanswered", "protocol", "warning",
                  "A request never answered nor cancelled, though a later request got its "
                  "answer (the session's end did not cut it off).")

# long-lived by design: answered only when the server ends the subscription
_NO_ANSWER_EXPECTED = {"subscriptions/listen"}


class IdsChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset({BAD_ID, IN_FLIGHT, REUSED, UNKNOWN, TWICE,
                                                 UNANSWERED})

    def message(self, item: Item) -> None:
        st, ctx = self.state, self.ctx
        obj = item.obj if isinstance(item.obj, dict) else {}
        if item.kind == wire.REQUEST:
            rid = obj.get("id")
            if not _usable(rid):
                ctx.report(BAD_ID, item, f"request id {wire.id_text(rid)} is not a string or "
                           "an integer", item.path("id"))
            key = (item.direction, item.id_key or "")
            earlier = st.open.get(key)
            if earlier is not None:
                ctx.report(IN_FLIGHT, item, f"id {item.id_key} is already in flight (the "
                           f"{earlier.method} request at seq {earlier.seq})", item.path("id"))
            elif key in st.sent and not st.stateless:  # no sessions: each request alone
                ctx.report(REUSED, item, f"id {item.id_key} was used before in this session "
                           f"by the {item.side}", item.path("id"))
        elif item.kind in (wire.RESPONSE, wire.ERROR):
            rid = obj.get("id")
            if rid is None:
                if item.kind == wire.RESPONSE:
                    ctx.report(BAD_ID, item, "a result with a null id", item.path("id"))
                return  # an error with id null answers a message that could not be read
            if not _usable(rid):
                ctx.report(BAD_ID, item, f"response id {item.id_key} is not a string or an "
                           "integer", item.path("id"))
            req = item.request
            if req is None:
                ctx.report(UNKNOWN, item, f"no request with id {item.id_key} was sent by the "
                           f"{'client' if item.side == 'server' else 'server'}",
                           item.path("id"))
            elif item.answered_before:
                ctx.report(TWICE, item, f"request id {item.id_key} ({req.method}, seq "
                           f"{req.seq}) was already answered at seq {req.answer_seq}",
                           item.path("id"))

    def finish(self) -> None:
        st = self.state
        for req in sorted(st.open.values(), key=lambda r: r.seq):
            if req.cancel_seq is not None or req.method in _NO_ANSWER_EXPECTED:
                continue
            if st.latest_answered.get(req.direction, -1) > req.seq:
                item = Item(req.seq, req.direction, wire.REQUEST, req.method, req.id_key, None)
                self.ctx.report(UNANSWERED, item, f"request id {req.id_key} ({req.method}) "
                                f"was never answered, though the {_side(OTHER[req.direction])} "
                                "answered later requests", "$.id")


def _usable(rid: Any) -> bool:
    return isinstance(rid, (str, int)) and not isinstance(rid, bool)


def _side(direction: str) -> str:
    return "server" if direction == wire.SERVER_TO_CLIENT else "client"
