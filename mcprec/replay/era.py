"""Replay as a server of the revision each recorded session speaks.

A stateless (2026-07-28) server checks every request it is sent in that revision: the ``_meta``
envelope, the HTTP headers against the body, the protocol version, and whether the method still
exists. Replay checks the same, in the same order, and refuses with the HTTP status and the
JSON-RPC error a real server gives (measured against the Python SDK 2.3 ``MCPServer`` over
stateless HTTP and stdio):

========================================================  ======  ========
what                                                      HTTP    JSON-RPC
========================================================  ======  ========
no envelope (``params._meta`` with the version and the    400     -32602
client's capabilities)
``MCP-Protocol-Version`` header is not the envelope's     400     -32020
a version the recording never spoke                       400     -32022
``Mcp-Method`` is not the body's method                   400     -32020
``Mcp-Name`` is not the body's name or uri                400     -32020
a method the revision removed (``ping``, ...)             404     -32601
========================================================  ======  ========

Over HTTP a request is of the stateless revision when its ``MCP-Protocol-Version`` header names
a revision with no ``initialize`` (the SDK server answers any other as of the handshake era);
over stdio when it carries the envelope, or an earlier request of the connection did.

A client of another era than the recording's (a 2026-07-28 client replaying a recording of an
``initialize``-era server) gets -32022 naming the recorded revisions, one line on stderr, and an
entry in ``--report``; its ``server/discover`` probe still gets what the recorded server
answered, so a client that falls back to ``initialize`` does.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

from .. import wire

HANDSHAKE_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions that open with ``initialize``; any other is stateless."""
REMOVED: dict[str, frozenset[str]] = {
    "2026-07-28": frozenset({"ping", "logging/setLevel", "resources/subscribe",
                             "resources/unsubscribe", "tasks/result", "tasks/list"}),
}
"""Per stateless revision: the methods it removed (a real server of it: 404, -32601)."""
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose ``Mcp-Name`` header carries a param, and that param."""

HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022
NO_ENVELOPE = ("params._meta must be an object carrying the required "
               "'io.modelcontextprotocol/protocolVersion' and "
               "'io.modelcontextprotocol/clientCapabilities' envelope keys")


class Refusal:
    """A request refused as a server of the recorded revision refuses it."""

    __slots__ = ("status", "code", "message", "data", "reason", "other_era")

    def __init__(self, status: int, code: int, message: str, data: Any = None,
                 reason: str = "", other_era: bool = False) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.data = data
        self.reason = reason or message
        self.other_era = other_era
        """The client speaks another era than the recording's."""

    def answer(self, rid: Any) -> bytes:
        return wire.error_message(rid, self.code, self.message, self.data)


def stateless(revision: Any) -> bool:
    return isinstance(revision, str) and revision not in HANDSHAKE_REVISIONS


def envelope_version(obj: Mapping[str, Any]) -> Any:
    """The protocol version in a request's ``_meta`` envelope, or None."""
    params = obj.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(VERSION_KEY) if isinstance(meta, dict) else None


def _has_envelope(obj: Mapping[str, Any]) -> bool:
    params = obj.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_KEY in meta and CAPABILITIES_KEY in meta


def decode_header(value: str) -> str:
    """An ``Mcp-Name`` value, its ``=?base64?...?=`` form decoded."""
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        import base64
        import binascii

        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


class Era:
    """The revisions the recorded sessions speak, and the checks a server of them makes."""

    def __init__(self, revisions: Iterable[str | None]) -> None:
        self.recorded = sorted({r for r in revisions if isinstance(r, str) and r})
        self.stateless = [r for r in self.recorded if stateless(r)]
        self.pinned = False
        """stdio: a request of the stateless revision came; every later one is of it too."""

    def __bool__(self) -> bool:
        return bool(self.recorded)

    def check(self, obj: Mapping[str, Any], headers: Mapping[str, str] | None = None
              ) -> Refusal | None:
        """How a server of the recorded revision refuses the request ``obj`` (with the HTTP
        ``headers``, lower-case names; None over stdio), or None: it answers it."""
        if headers is not None:
            header_version = headers.get("mcp-protocol-version")
            if not stateless(header_version):
                return None
        elif envelope_version(obj) is not None:
            self.pinned = bool(self.stateless)  # an initialize-era server pins nothing
            header_version = None
        elif not self.pinned:
            return None
        else:
            header_version = None
        method = obj.get("method")
        if not self.stateless:  # a client of another era
            if method == "server/discover":
                return None  # the probe gets what the recorded server answered
            requested = envelope_version(obj) or header_version
            recorded = ", ".join(self.recorded)
            return Refusal(400, UNSUPPORTED_VERSION,
                           f"Unsupported protocol version (the recording speaks {recorded})",
                           {"supported": self.recorded, "requested": requested},
                           f"the client speaks {requested}; the recording speaks {recorded}",
                           other_era=True)
        if not _has_envelope(obj):
            return Refusal(400, -32602, NO_ENVELOPE, reason="no _meta envelope")
        version = envelope_version(obj)
        if headers is not None and header_version != version:
            return Refusal(400, HEADER_MISMATCH, "mcp-protocol-version header does not match "
                           "the request envelope's protocol version")
        if version not in self.stateless:
            return Refusal(400, UNSUPPORTED_VERSION, "Unsupported protocol version",
                           {"supported": self.stateless, "requested": version},
                           f"protocol version {version} (the recording speaks "
                           f"{', '.join(self.stateless)})")
        if headers is not None:
            if headers.get("mcp-method") != method:
                return Refusal(400, HEADER_MISMATCH,
                               "mcp-method header does not match the request body's method")
            field = NAMED.get(str(method))
            if field is not None:
                params = obj.get("params")
                body = params.get(field) if isinstance(params, dict) else None
                named = headers.get("mcp-name")
                if named is None or decode_header(named) != body:
                    return Refusal(400, HEADER_MISMATCH, f"mcp-name header does not match the "
                                   f"request body's '{field}' parameter")
        if method in REMOVED.get(str(version), ()):
            return Refusal(404, -32601, "Method not found", method,
                           f"{method} was removed in {version}")
        return None
