"""Recorded references to request ids, made live.

A recorded message may name a request by its recorded id: a 2026-07-28 subscription event
names its ``subscriptions/listen`` request (``_meta["io.modelcontextprotocol/subscriptionId"]``),
a progress notification its request's progress token, a server's ``notifications/cancelled`` the
server-to-client request it gives up. Replayed, each names the live id of that same request (the
client's id, its progress token; the fresh id replay gave a server request), never the id of
whatever request's script happens to be playing. Where the message goes over HTTP follows the
request it names (``related``: that request's stream).

On replay's start-up path: imports nothing beyond ``wire``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..cassette import Message

from .. import wire
from .model import CANCELLED

SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
"""2026-07-28: events of ``subscriptions/listen`` carry the listen request's id here."""
_SUBSCRIPTION_BYTES = SUBSCRIPTION_KEY.encode()


class References:
    """Recorded ids (as id text) and the live values they stand for now."""

    __slots__ = ("requests", "tokens", "asked")

    def __init__(self) -> None:
        self.requests: dict[str, tuple[Any, str]] = {}
        """A recorded client request id -> (its live id, the live id's text)."""
        self.tokens: dict[str, tuple[Any, str]] = {}
        """A recorded progress token -> (the live token, or None when the client asked for no
        progress this time; the live request id's text)."""
        self.asked: dict[str, Any] = {}
        """A recorded server-to-client request id -> the fresh id replay sent it with."""

    def request(self, recorded: Message, rid: Any, key: str, token: Any) -> None:
        """The client's request ``rid`` is played as the recorded ``recorded``."""
        if recorded.rpc_id is not None:
            self.requests[recorded.rpc_id] = (rid, key)
        raw = recorded.raw
        if b"progressToken" in raw:
            was = wire.progress_token_value(recorded.json.get("params"))
            if was is not None:
                self.tokens[wire.id_text(was)] = (token, key)

    def progress(self, obj: dict[str, Any], token: Any, related: str | None
                 ) -> tuple[bytes | None, str | None]:
        """A recorded progress notification with the live token of the request it belongs to
        (``token``, ``related``: those of the script playing it, when the recording does not
        say); None when that request asked for no progress now."""
        params = obj.get("params")
        if not isinstance(params, dict):
            return (wire.dumps(obj) if token is not None else None), related
        found = self.tokens.get(wire.id_text(params.get("progressToken")))
        if found is not None:
            token, related = found
        if token is None:
            return None, related
        return wire.dumps({**obj, "params": {**params, "progressToken": token}}), related

    def rewrite(self, raw: bytes, obj: Any, related: str | None
                ) -> tuple[bytes, str | None] | None:
        """``raw`` (parsed: ``obj``) with the recorded ids it names made live, and where it
        goes; None when it names none (it goes as recorded)."""
        if not isinstance(obj, dict):
            return None
        changed = False
        params = obj.get("params")
        if _SUBSCRIPTION_BYTES in raw:
            for field in ("params", "result"):
                body = obj.get(field)
                meta = body.get("_meta") if isinstance(body, dict) else None
                if not isinstance(meta, dict) or SUBSCRIPTION_KEY not in meta:
                    continue
                found = self.requests.get(wire.id_text(meta[SUBSCRIPTION_KEY]))
                if found is None:
                    continue
                assert isinstance(body, dict)
                obj = {**obj, field: {**body, "_meta": {**meta, SUBSCRIPTION_KEY: found[0]}}}
                if field == "params":
                    params = obj["params"]
                    related = found[1]
                changed = True
        if obj.get("method") == CANCELLED and isinstance(params, dict) and "requestId" in params:
            fresh = self.asked.get(wire.id_text(params["requestId"]))
            if fresh is not None:
                obj = {**obj, "params": {**params, "requestId": fresh}}
                changed = True
        return (wire.dumps(obj), related) if changed else None
