"""Progress and cancellation rules: progress only for a token a request in flight carried,
always increasing; cancellation only of one's own requests, never of initialize."""

from __future__ import annotations

from typing import ClassVar

from .. import wire
from .model import rule
from .walk import OTHER, Checker, Item, cancelled_request

UNKNOWN_TOKEN = rule("PRG001", "progress-unknown-token", "protocol", "error",
                     "Progress for a token no request of the other side carried.")
AFTER_ANSWER = rule("PRG002", "progress-after-answer", "protocol", "error",
                    "Progress for a request that was already answered.")
NOT_INCREASING = rule("PRG003", "progress-not-increasing", "protocol", "error",
                      "A progress value not greater than the previous one for that token.")
CANCEL_UNKNOWN = rule("PRG004", "cancel-unknown-request", "protocol", "warning",
                      "notifications/cancelled for a request id the canceller never sent.")
CANCEL_INIT = rule("PRG005", "cancel-initialize", "protocol", "error",
                   "The client cancelled its initialize request.")
AFTER_CANCEL = rule("PRG006", "progress-after-cancel", "protocol", "warning",
                    "Progress went on for a request its sender had cancelled (two or more "
                    "notifications after the cancellation).")


class ProgressChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset({UNKNOWN_TOKEN, AFTER_ANSWER, NOT_INCREASING,
                                                 CANCEL_UNKNOWN, CANCEL_INIT, AFTER_CANCEL})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._after_cancel: dict[int, int] = {}

    def message(self, item: Item) -> None:
        if item.kind != wire.NOTIFICATION or not isinstance(item.params, dict):
            return
        if item.method == "notifications/progress":
            self._progress(item)
        elif item.method == "notifications/cancelled":
            self._cancelled(item)

    def _progress(self, item: Item) -> None:
        params = item.params
        token = params.get("progressToken")
        if not isinstance(token, (str, int)) or isinstance(token, bool):
            return  # the schema rule reports it
        req = self.state.tokens.get((OTHER[item.direction], wire.id_text(token)))
        at = item.path("params", "progressToken")
        if req is None:
            self.ctx.report(UNKNOWN_TOKEN, item, f"progress token {wire.id_text(token)} was "
                            f"not carried by any request of the {'client' if item.side == 'server' else 'server'}", at)
            return
        if req.answer_seq is not None:
            self.ctx.report(AFTER_ANSWER, item, f"progress for {req.method} (id {req.id_key}), "
                            f"answered at seq {req.answer_seq}", at)
        elif req.cancel_seq is not None:
            # one notification may cross the cancellation on the wire; a second one means the
            # work went on
            late = self._after_cancel[id(req)] = self._after_cancel.get(id(req), 0) + 1
            if late == 2:
                self.ctx.report(AFTER_CANCEL, item, f"progress for {req.method} (id "
                                f"{req.id_key}) went on after its cancellation at seq "
                                f"{req.cancel_seq}", at)
        value = params.get("progress")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if req.last_progress is not None and value <= req.last_progress:
                self.ctx.report(NOT_INCREASING, item, f"progress {value} after "
                                f"{req.last_progress} for token {wire.id_text(token)}",
                                item.path("params", "progress"))
            req.last_progress = value if req.last_progress is None else max(req.last_progress,
                                                                             value)

    def _cancelled(self, item: Item) -> None:
        params = item.params
        if "requestId" not in params:
            return  # the schema rule reports it
        req = cancelled_request(self.state, item)
        at = item.path("params", "requestId")
        if req is None:
            self.ctx.report(CANCEL_UNKNOWN, item, f"the {item.side} cancelled request id "
                            f"{wire.id_text(params['requestId'])}, which it never sent", at)
        elif req.method == "initialize":
            self.ctx.report(CANCEL_INIT, item, "initialize must not be cancelled", at)
