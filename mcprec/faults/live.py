"""Fault rules applied to a live server's messages (``mcprec record --fault``).

The transport hands each whole client message to ``client()`` (the rules pick a fault per
request, as in replay) and each whole server message to ``server()``, which says what the client
gets instead: nothing changed (None), or the messages to send in its place, each with the mark
the cassette keeps of the fault (``injected_faults``). The cassette records what the client
received. Only a transport given rules imports this.
"""

from __future__ import annotations

from typing import Any

from .. import wire
from ..errors import UsageError
from .adversary import list_changed, rewrite
from .rules import LIVE, Fault, Faults

Mark = dict[str, Any]
Out = list[tuple[bytes, "Mark | None"]]


class LiveFaults:
    """The rules of one recording (shared by its sessions: ``nth`` counts across them)."""

    def __init__(self, faults: Faults) -> None:
        for rule in faults.rules:
            if rule.effect not in LIVE:
                raise UsageError(f"fault {rule.text!r}: {rule.effect} is for replay; record "
                                 f"applies {', '.join(sorted(LIVE))}")
        faults.live = True
        self.faults = faults
        self._pending: dict[str, tuple[Fault, Any, Any]] = {}
        """Request id text -> the fault its answer gets, the request's method and params."""
        self._notices: dict[str, Fault] = {}
        """Request id text -> the rug pull announced before its answer."""

    def client(self, raw: bytes) -> None:
        """A whole message from the client (a request picks its fault here)."""
        c = wire.classify(raw)
        if c.kind == wire.BATCH:
            for item in c.obj:
                if isinstance(item, dict):
                    self._request(item)
        elif c.kind == wire.REQUEST:
            self._request(c.obj)

    def _request(self, obj: dict[str, Any]) -> None:
        if "id" not in obj or not isinstance(obj.get("method"), str):
            return
        key = wire.id_text(obj["id"])
        fault = self.faults.pick(obj)
        if self.faults.announce is not None:
            self._notices[key] = self.faults.announce
        if fault is not None:
            self._pending[key] = (fault, obj.get("method"), obj.get("params"))

    def wants(self, key: str) -> bool:
        """Whether the answer to the request ``key`` (its id text) is to be faulted."""
        return key in self._pending or key in self._notices

    def waiting(self) -> bool:
        """Whether some answer is still to be faulted (else ``server`` has nothing to do)."""
        return bool(self._pending or self._notices)

    def server(self, raw: bytes) -> Out | None:
        """What the client gets for the server's whole message ``raw``: None, as it is."""
        if not self._pending and not self._notices:
            return None
        c = wire.classify(raw)
        if c.kind not in (wire.RESPONSE, wire.ERROR) or c.rpc_id is None:
            return None
        key = c.rpc_id
        notice = self._notices.pop(key, None)
        pending = self._pending.pop(key, None)
        if notice is None and pending is None:
            return None
        out: Out = []
        if notice is not None:
            out.append((list_changed(), _mark(notice, key, "notification")))
        if pending is None:
            out.append((raw, None))
            return out
        fault, method, params = pending
        data = self._faulted(fault, method, params, c.obj, raw)
        if data is not None:
            out.append((data, _mark(fault, key, "answer", len(raw))))
        return out

    def _faulted(self, fault: Fault, method: Any, params: Any, obj: dict[str, Any],
                 raw: bytes) -> bytes | None:
        """The answer as ``fault`` makes it; None: no answer at all (drop)."""
        effect = fault.effect
        rid = obj.get("id")
        if effect == "drop":
            return None
        if effect == "error":
            code, message = fault.arg
            return wire.error_message(rid, code, message, {"mcprec": "fault", "rule": fault.text})
        if effect == "tool-error":
            return wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": fault.arg}], "isError": True}})
        if effect == "malformed":
            if fault.arg == "truncate":
                return raw[: max(1, len(raw) // 2)]
            if fault.arg == "not-json":
                return b"mcprec: a malformed answer, on purpose (--fault)"
            return wire.dumps({**obj, "id": f"mcprec-wrong-id-{wire.id_text(rid)}"})
        changed = rewrite(fault, self.faults.seed, method, params, obj)
        return raw if changed is None else wire.dumps(changed)


def _mark(fault: Fault, key: str, what: str, original: int | None = None) -> Mark:
    mark: Mark = {"rule": fault.text, "effect": fault.effect, "request_id": key, "what": what}
    if original is not None:
        mark["original_size"] = original
    return mark
