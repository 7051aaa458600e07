"""Capability rules: each side sends only what it advertised, and asks the other side only
for what that side advertised."""

from __future__ import annotations

from typing import Any, ClassVar

from .. import wire
from .model import rule
from .walk import C2S, Checker, Item

NOTIFY = rule("CAP001", "notification-capability", "protocol", "error",
              "A notification the sender never advertised the capability for (list_changed, "
              "resource updates, log messages, roots changes).")
UNSUBSCRIBED = rule("CAP002", "unsubscribed-update", "protocol", "warning",
                    "notifications/resources/updated for a resource the client did not "
                    "subscribe to.")
SERVER_ASKS = rule("CAP003", "client-capability", "protocol", "error",
                   "A server request (sampling, elicitation, roots) the client did not "
                   "advertise.")
CLIENT_ASKS = rule("CAP004", "server-capability", "protocol", "warning",
                   "A client request for a feature the server did not advertise (tools, "
                   "prompts, resources, subscriptions, logging, completions).")
SAMPLING_TOOLS = rule("CAP005", "sampling-tools", "protocol", "error",
                      "sampling/createMessage carrying tools to a client that did not "
                      "advertise sampling.tools (2025-11-25).")
TASKS = rule("CAP006", "task-capability", "protocol", "error",
             "A task result (CreateTaskResult) from a side that did not advertise the tasks "
             "capability (2025-11-25).")

# notification -> (capability path in the sender's capabilities)
_NOTIFICATIONS: dict[str, tuple[str, ...]] = {
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/resources/updated": ("resources", "subscribe"),
    "notifications/message": ("logging",),
    "notifications/roots/list_changed": ("roots", "listChanged"),
}
_SERVER_REQUESTS: dict[str, tuple[str, ...]] = {
    "sampling/createMessage": ("sampling",),
    "elicitation/create": ("elicitation",),
    "roots/list": ("roots",),
}
_CLIENT_REQUESTS: dict[str, tuple[str, ...]] = {
    "tools/list": ("tools",), "tools/call": ("tools",),
    "prompts/list": ("prompts",), "prompts/get": ("prompts",),
    "resources/list": ("resources",), "resources/read": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "logging/setLevel": ("logging",),
    "completion/complete": ("completions",),
}


def has(caps: Any, path: tuple[str, ...]) -> bool:
    """Whether ``caps`` advertises ``path`` (an object present, or a flag set true)."""
    node = caps
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return node is not False and node is not None


class CapabilitiesChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset({NOTIFY, UNSUBSCRIBED, SERVER_ASKS, CLIENT_ASKS,
                                                 SAMPLING_TOOLS, TASKS})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self._subscribed: set[str] = set()

    def message(self, item: Item) -> None:
        st = self.state
        method = item.method or ""
        mine = st.client_caps if item.direction == C2S else st.server_caps
        theirs = st.server_caps if item.direction == C2S else st.client_caps
        if item.kind == wire.RESPONSE:
            self._task_result(item)
        elif item.kind == wire.NOTIFICATION:
            need = _NOTIFICATIONS.get(method)
            if need is not None and mine is not None and not st.stateless and not has(mine, need):
                self.ctx.report(NOTIFY, item, f"the {item.side} sent {method} without "
                                f"advertising the {'.'.join(need)} capability",
                                item.path("method"))
            if method == "notifications/resources/updated" and not st.stateless \
                    and item.direction != C2S:
                uri = (item.params or {}).get("uri") if isinstance(item.params, dict) else None
                if isinstance(uri, str) and uri not in self._subscribed:
                    self.ctx.report(UNSUBSCRIBED, item, f"an update of {uri}, which the "
                                    "client did not subscribe to", item.path("params", "uri"))
        elif item.kind == wire.REQUEST:
            table = _CLIENT_REQUESTS if item.direction == C2S else _SERVER_REQUESTS
            need = table.get(method)
            if need is not None and theirs is not None and not has(theirs, need) \
                    and not (method == "completion/complete" and item.version < "2025-03-26"):
                code = CLIENT_ASKS if item.direction == C2S else SERVER_ASKS
                other = "server" if item.direction == C2S else "client"
                self.ctx.report(code, item, f"{method} sent to a {other} that did not "
                                f"advertise the {'.'.join(need)} capability",
                                item.path("method"))
            elif method == "elicitation/create" and theirs is not None:
                self._elicitation_mode(item, theirs)
            params = item.params if isinstance(item.params, dict) else {}
            if method == "sampling/createMessage" and "tools" in params and theirs is not None \
                    and has(theirs, ("sampling",)) and not has(theirs, ("sampling", "tools")):
                self.ctx.report(SAMPLING_TOOLS, item, "sampling/createMessage carries tools; "
                                "the client advertised sampling but not sampling.tools",
                                item.path("params", "tools"))
            if method == "resources/subscribe" and isinstance(params.get("uri"), str):
                self._subscribed.add(params["uri"])
            elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
                self._subscribed.discard(params["uri"])

    def _task_result(self, item: Item) -> None:
        """A result holding a task handle answers a task-augmented request: its sender must
        have advertised ``tasks`` (handshake sessions; 2026-07-28 made tasks an extension)."""
        st = self.state
        req = item.request
        result = item.result
        if st.stateless or req is None or not isinstance(result, dict) \
                or not isinstance(result.get("task"), dict):
            return
        if not isinstance(req.params, dict) or "task" not in req.params:
            return
        caps = st.client_caps if item.direction == C2S else st.server_caps
        if caps is not None and not has(caps, ("tasks",)):
            self.ctx.report(TASKS, item, f"a task result for {req.method} from a {item.side} "
                            "that did not advertise the tasks capability",
                            item.path("result", "task"))

    def _elicitation_mode(self, item: Item, caps: dict[str, Any]) -> None:
        mode = (item.params or {}).get("mode", "form") if isinstance(item.params, dict) else None
        modes = caps.get("elicitation")
        if isinstance(modes, dict) and modes and isinstance(mode, str) and mode not in modes:
            self.ctx.report(SERVER_ASKS, item, f"elicitation/create in {mode} mode; the "
                            f"client advertised only {', '.join(sorted(modes))}",
                            item.path("params", "mode"))
