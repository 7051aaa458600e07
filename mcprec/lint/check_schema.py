"""Schema rules: every message against the JSON Schema of the revision it was sent under."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any, ClassVar

from .. import wire
from .model import rule
from .schemas import VERSIONS, spec
from .walk import Checker, Item

REQUEST = rule("SCH001", "request-schema", "protocol", "error",
               "A request does not match its method's schema in the negotiated revision.")
RESULT = rule("SCH002", "result-schema", "protocol", "error",
              "A result does not match the schema of the request it answers.")
NOTIFICATION = rule("SCH003", "notification-schema", "protocol", "error",
                    "A notification does not match its method's schema.")
ERROR = rule("SCH004", "error-schema", "protocol", "error",
             "An error response is not a JSON-RPC error object (integer code, string message).")
UNKNOWN_METHOD = rule("SCH005", "unknown-method", "protocol", "warning",
                      "A method the negotiated revision does not define, or not for the side "
                      "that sent it.")
NOT_JSONRPC = rule("SCH006", "not-json-rpc", "protocol", "error",
                   "A message that is not JSON, or not a JSON-RPC 2.0 message.")
BATCH = rule("SCH007", "batch", "protocol", "error",
             "A JSON-RPC batch in a revision without batches (all but 2025-03-26).")
BASE64 = rule("SCH008", "base64-data", "protocol", "error",
              "Image or audio content whose data, or a resource's blob, is not base64.")


class SchemaChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset(
        {REQUEST, RESULT, NOTIFICATION, ERROR, UNKNOWN_METHOD, NOT_JSONRPC, BATCH, BASE64})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._batch_seen: set[int] = set()

    def message(self, item: Item) -> None:
        ctx, s = self.ctx, item.spec
        if item.root != "$" and item.seq not in self._batch_seen:
            self._batch_seen.add(item.seq)
            if not s.batches:
                ctx.report(BATCH, item, f"a JSON-RPC batch; {item.version} has no batches "
                           "(only 2025-03-26 allows them)", "$")
        if item.kind == wire.INVALID:
            what = "not JSON" if item.obj is None else "JSON but not a JSON-RPC 2.0 request, " \
                "notification or response"
            ctx.report(NOT_JSONRPC, item, f"the message is {what}")
            return
        if item.raw is None or b'"data"' in item.raw or b'"blob"' in item.raw:
            for steps, what in _not_base64(item.obj, ()):
                ctx.report(BASE64, item, f"{what} is not base64", item.path(*steps))
        if item.kind in (wire.REQUEST, wire.NOTIFICATION):
            self._call(item)
        elif item.kind == wire.RESPONSE:
            req = item.request
            name = s.response_def(req.method if req else None, req.params if req else None,
                                  item.result)
            self._validate(item, RESULT, name, f"result of {item.method}" if req else "response")
        elif item.kind == wire.ERROR:
            self._validate(item, ERROR, s.error_envelope, "error response")

    def _call(self, item: Item) -> None:
        s, method = item.spec, item.method or ""
        request = item.kind == wire.REQUEST
        name = s.request_def(method) if request else s.notification_def(method)
        code = REQUEST if request else NOTIFICATION
        what = "request" if request else "notification"
        if name is None or item.side not in s.senders.get(method, ()):
            self.ctx.report(UNKNOWN_METHOD, item, _unknown(method, what, item), item.path("method"))
            envelope = "JSONRPCRequest" if request else "JSONRPCNotification"
            self._validate(item, code, envelope, what)
            return
        self._validate(item, code, name, f"{method} {what}")

    def _validate(self, item: Item, code: str, name: str, what: str) -> None:
        s = item.spec
        if s.is_valid(name, item.obj):
            return
        newer = _newer(item, code)
        era = (f"a {newer} feature in a {item.version} session (valid from {newer} on): "
               if newer else "")
        for p in s.problems(name, item.obj):
            if p.steps[:1] == ("id",) and len(p.steps) == 1:
                continue  # the ids rules say what is wrong with an id
            self.ctx.report(code, item, f"{what} ({item.version}): {era}{p.message}",
                            item.path(*p.steps))


def _not_base64(node: Any, steps: tuple[str | int, ...]
                ) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Where ``node`` holds image or audio content whose ``data``, or resource contents whose
    ``blob``, is not base64 (standard alphabet, padded)."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            yield from _not_base64(x, (*steps, i))
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("image", "audio") and isinstance(node.get("data"), str) \
            and not _is_base64(node["data"]):
        yield (*steps, "data"), f"{kind} content's data"
    if isinstance(node.get("blob"), str) and "uri" in node and not _is_base64(node["blob"]):
        yield (*steps, "blob"), "the resource's blob"
    for k, v in node.items():
        if isinstance(v, (dict, list)):
            yield from _not_base64(v, (*steps, k))


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _newer(item: Item, code: str) -> str | None:
    """The first revision after the session's whose schema the message is valid in: the
    message uses a feature newer than the revision the session speaks."""
    req = item.request
    for version in VERSIONS:
        if version <= item.version:
            continue
        s = spec(version)
        assert s is not None
        if code == REQUEST:
            name = s.request_def(item.method or "")
        elif code == NOTIFICATION:
            name = s.notification_def(item.method or "")
        elif code == RESULT and req is not None:
            name = s.response_def(req.method, req.params, item.result)
        else:
            return None
        if name is not None and s.is_valid(name, item.obj):
            return version
    return None


def _unknown(method: str, what: str, item: Item) -> str:
    s = item.spec
    if item.side not in s.senders.get(method, {item.side}):
        return (f"{method} is a {what} the {' and '.join(sorted(s.senders[method]))} sends in "
                f"{item.version}, not the {item.side}")
    elsewhere = [v for v in VERSIONS if v != item.version and _defines(v, method, what)]
    if elsewhere:
        return (f"{method} is not a {what} of {item.version} (it is one of "
                f"{', '.join(elsewhere)})")
    return f"{method} is not a {what} of any MCP revision (a custom method?)"


def _defines(version: str, method: str, what: str) -> bool:
    s = spec(version)
    assert s is not None
    return method in (s.requests if what == "request" else s.notifications)
