"""Faults injected into replayed answers (``--fault``): imported only by a replay given some."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import wire
from ..faults.rules import DISCONNECT_EXIT
from .model import error_response, with_id

if TYPE_CHECKING:
    from ..cassette import Message
    from ..faults.rules import Fault
    from .playback import Playback


def announce(pb: Playback, key: str) -> None:
    """A rug pull announces itself before the answer to ``key``."""
    from ..faults.adversary import list_changed

    pb.send(list_changed(), key)


def inject(pb: Playback, fault: Fault, obj: dict[str, Any], key: str) -> None:
    """Answer a request with a fault instead of its recorded answer."""
    rid = obj.get("id")
    effect = fault.effect
    if effect == "error":
        code, message = fault.arg
        pb.send(error_response(rid, code, message, {"mcprec": "fault", "rule": fault.text}),
                key)
    elif effect == "tool-error":
        pb.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {
            "content": [{"type": "text", "text": fault.arg}], "isError": True}}), key)
    elif effect == "http":
        pb.status_only[key] = fault.arg
        pb.send(b"", key)
    elif effect == "disconnect":
        disconnect(pb, key)
    # drop: nothing, ever; the client's own timeout must fire


def disconnect(pb: Playback, key: str, cut: bool = True) -> None:
    """The server goes away: stdio closes stdout and exits non-zero; HTTP cuts the
    request's response (``cut``: before its answer) and ends the client's session."""
    if pb.transport == "http":
        pb.gone = True
        if cut:
            pb.send(b"", key)
    else:
        pb._end(DISCONNECT_EXIT)


def faulty_answer(pb: Playback, fault: Fault, m: Message, rid: Any,
                  related: str | None, request: Message | None = None) -> None:
    """Send the recorded answer ``m`` (to the recorded ``request``) as the fault makes it
    (rewritten by an adversarial effect; malformed; or whole, then the server goes away)."""
    data = with_id(m, rid)
    if fault.rewrites_answer:
        from ..faults.adversary import rewrite

        assert pb.faults is not None
        req = request.json if request is not None else None
        answer = wire.loads(bytes(data))
        if isinstance(answer, dict):
            changed = rewrite(fault, pb.faults.seed,
                              req.get("method") if isinstance(req, dict) else None,
                              req.get("params") if isinstance(req, dict) else None, answer)
            if changed is not None:
                data = wire.dumps(changed)
    elif fault.effect == "malformed":
        data = bytes(data)
        if fault.arg == "truncate":
            data = data[: max(1, len(data) // 2)]
        elif fault.arg == "not-json":
            data = b"mcprec: a malformed answer, on purpose (--fault)"
        else:  # wrong-id: an id this client never used
            data = with_id(m, f"mcprec-wrong-id-{wire.id_text(rid)}")
    pb.send(data, related)
    if fault.effect == "disconnect":  # =after: the answer went out first
        disconnect(pb, related or "", cut=False)

