"""Lifecycle rules: initialize first, nothing but ping before the handshake is done, and a
negotiated revision that exists."""

from __future__ import annotations

from typing import ClassVar

from .. import wire
from .model import rule
from .schemas import HANDSHAKE_VERSIONS, VERSIONS
from .walk import C2S, Checker, Item

INIT_FIRST = rule("LIF001", "initialize-first", "protocol", "error",
                  "The client's first message is not initialize (a server/discover probe "
                  "may come before it).")
TOO_EARLY = rule("LIF002", "before-initialized", "protocol", "warning",
                 "A request (other than ping) or a notification sent before the handshake "
                 "was done: the client before its initialized, the server before receiving it.")
VERSION = rule("LIF003", "negotiated-version", "protocol", "error",
               "initialize agreed on a revision that is neither the one the client offered "
               "nor a published handshake revision.")
REPEATED = rule("LIF004", "initialize-repeated", "protocol", "error",
                "initialize sent again in a session that already has one.")
INITIALIZED_ORDER = rule("LIF005", "initialized-order", "protocol", "warning",
                         "notifications/initialized sent before the initialize result, or "
                         "more than once.")

_SERVER_EARLY_OK = {"ping", "notifications/message", "notifications/progress",
                    "notifications/cancelled"}
_CLIENT_EARLY_OK = {"initialize", "ping", "server/discover", "notifications/cancelled",
                    "notifications/initialized", "notifications/progress"}


class LifecycleChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset(
        {INIT_FIRST, TOO_EARLY, VERSION, REPEATED, INITIALIZED_ORDER})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._first_done = False
        self._initialized_count = 0

    def _handshake(self) -> bool:
        return not self.state.stateless

    def message(self, item: Item) -> None:
        st, ctx = self.state, self.ctx
        if item.kind == wire.INVALID:
            return
        if item.kind in (wire.RESPONSE, wire.ERROR):
            self._answer(item)
            return
        method = item.method or ""
        if item.direction == C2S:
            if not self._first_done and method != "server/discover":
                self._first_done = True
                if method != "initialize" and self._handshake():
                    ctx.report(INIT_FIRST, item, f"the client's first message is {method}, "
                               "not initialize", item.path("method"))
            if method == "initialize" and item.kind == wire.REQUEST \
                    and st.initialize_seq is not None and st.initialize_seq != item.seq:
                ctx.report(REPEATED, item, f"a second initialize (the first at seq "
                           f"{st.initialize_seq})", item.path("method"))
            if method == "notifications/initialized":
                self._initialized_count += 1
                if st.initialize_answer_seq is None and st.initialize_seq is not None:
                    ctx.report(INITIALIZED_ORDER, item, "notifications/initialized before the "
                               "initialize result arrived", item.path("method"))
                elif self._initialized_count > 1:
                    ctx.report(INITIALIZED_ORDER, item, "notifications/initialized sent again",
                               item.path("method"))
            if st.initialize_seq is not None and st.initialized_seq is None \
                    and method not in _CLIENT_EARLY_OK and self._handshake():
                when = "before the initialize result" if st.initialize_answer_seq is None \
                    else "before notifications/initialized"
                ctx.report(TOO_EARLY, item, f"the client sent {method} {when}; only ping may "
                           "come first", item.path("method"))
        elif st.initialize_seq is not None and st.initialized_seq is None \
                and method not in _SERVER_EARLY_OK and self._handshake():
            ctx.report(TOO_EARLY, item, f"the server sent {method} before it received "
                       "notifications/initialized; only ping and log messages may come first",
                       item.path("method"))

    def _answer(self, item: Item) -> None:
        req = item.request
        if req is None or req.method != "initialize" or item.kind != wire.RESPONSE \
                or item.answered_before:
            return
        result = item.result
        agreed = result.get("protocolVersion") if isinstance(result, dict) else None
        if not isinstance(agreed, str):
            return  # the schema rule reports a missing or mistyped protocolVersion
        offered = self.state.offered
        if agreed in VERSIONS and agreed not in HANDSHAKE_VERSIONS:
            self.ctx.report(VERSION, item, f"initialize agreed on {agreed}, a stateless revision "
                            "that has no initialize", item.path("result", "protocolVersion"))
        elif agreed != offered and agreed not in HANDSHAKE_VERSIONS:
            self.ctx.report(VERSION, item, f"initialize agreed on {agreed}: the client offered "
                            f"{offered}, and {agreed} is not a published revision "
                            f"({', '.join(HANDSHAKE_VERSIONS)})",
                            item.path("result", "protocolVersion"))
