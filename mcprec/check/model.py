"""What a check run reports: one ``Result`` per check (an id, pass / fail / skip, why), and the
``CheckReport`` of the whole run (the server, the cassette it was recorded into, the verdict)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
STATUSES = (PASS, FAIL, SKIP)

CHECKS: dict[str, str] = {
    "lifecycle.initialize": "initialize is answered with a protocol version, capabilities and "
                            "serverInfo",
    "lifecycle.version": "the negotiated protocol version is a known revision",
    "lifecycle.ping": "ping is answered with an empty result",
    "errors.unknown-method": "an unknown method gets -32601 (Method not found)",
    "errors.invalid-params": "a request without its required params gets -32602 (Invalid params)",
    "tools.list": "tools/list lists tools, each with a name and an object inputSchema",
    "tools.call": "a read-only tool called with arguments from its inputSchema gives a result",
    "tools.unknown": "a call of a tool that does not exist is an error",
    "tools.invalid-arguments": "a call with an argument of the wrong type is an error",
    "resources.list": "resources/list lists resources, each with a uri and a name",
    "resources.read": "the first listed resource can be read",
    "resources.unknown": "reading a resource that does not exist is an error",
    "resources.templates": "resources/templates/list lists templates",
    "prompts.list": "prompts/list lists prompts, each with a name",
    "prompts.get": "the first listed prompt can be got with its required arguments",
    "prompts.unknown": "getting a prompt that does not exist is an error",
    "logging.set-level": "logging/setLevel with a valid level is answered",
    "logging.invalid-level": "logging/setLevel with an unknown level is an error",
    "pagination.walk": "every list the server declares ends, its cursors never repeat",
    "pagination.bad-cursor": "a list request with an invalid cursor gets -32602",
    "progress.notify": "progress sent for a request carries its token and increases",
    "cancellation.unknown-request": "cancelling a request that does not exist is ignored",
    "cancellation.in-flight": "a cancelled request is not answered",
    "http.origin": "a request with a foreign Origin is refused with 403 (DNS rebinding)",
    "http.host": "a request with a foreign Host is refused (DNS rebinding)",
    "http.session-missing": "a request without the session id is refused with 400",
    "http.session-stale": "a request in a session the client ended (DELETE) gets 404",
    "http.protocol-version": "a request with an unsupported MCP-Protocol-Version gets 400",
    "http.resumption": "a GET with Last-Event-ID resumes the event stream",
    "lifecycle.alive": "the server still answers ping after every other check",
    "lifecycle.exit": "a stdio server exits with 0 once its input is closed",
    "lint": "the server's messages pass mcprec lint (protocol rules)",
}
"""Every check, in the order a run makes them, with what it checks (for docs and --list)."""


@dataclass
class Result:
    """One check's verdict."""

    id: str
    status: str
    why: str
    seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "why": self.why,
                **({"seconds": round(self.seconds, 3)} if self.seconds is not None else {})}


@dataclass
class CheckReport:
    """A whole run: the results in order, and where its recording went."""

    target: str
    """The server: its command line, or its URL."""
    transport: str
    results: list[Result] = field(default_factory=list)
    cassette: str | None = None
    """Where the probe session is kept; None when the cassette was a temporary one."""
    sessions: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    """The server's ``serverInfo``."""
    protocol: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.status == FAIL for r in self.results)

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results) for s in STATUSES}

    def summary(self) -> str:
        c = self.counts()
        return (f"{c[PASS]} passed, {c[FAIL]} failed, {c[SKIP]} skipped"
                f" ({len(self.results)} checks)")

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "transport": self.transport, "server": self.server,
                "protocol": self.protocol, "cassette": self.cassette, "sessions": self.sessions,
                "passed": not self.failed, "counts": self.counts(),
                "seconds": round(self.seconds, 3),
                "checks": [r.to_dict() for r in self.results]}
