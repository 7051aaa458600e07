"""The probe session: mcprec, as the client, plays the lifecycle and then every capability the
server declared, with valid input and with bad input, and judges each answer by the spec.

Every request waits at most ``timeout`` seconds, every bad input is a few bytes, and lists are
walked for at most ``max_pages`` pages: a probe never floods or hangs a server.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .. import wire
from ..script.client import ScriptedClient, StepFailed
from ..script.examples import object_example, table
from ..script.scenario import ClientSettings
from .model import FAIL, PASS, SKIP, Result

LATEST = "2025-11-25"
KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
METHOD_NOT_FOUND, INVALID_PARAMS, RESOURCE_NOT_FOUND = -32601, -32602, -32002
LISTS = (("tools", "tools/list", "tools"), ("resources", "resources/list", "resources"),
         ("resources", "resources/templates/list", "resourceTemplates"),
         ("prompts", "prompts/list", "prompts"))
"""(capability, list method, result field)."""

Verdict = tuple[str, str]


@dataclass
class ProbeOptions:
    timeout: float = 10.0
    """Seconds each request may take."""
    call: tuple[str, dict[str, Any] | None] | None = None
    """The tool ``tools.call`` calls, and its arguments (None: made from its inputSchema);
    default: the first tool annotated ``readOnlyHint``."""
    slow: tuple[str, dict[str, Any] | None] | None = None
    """A tool call that takes a while, for the progress and cancellation checks."""
    max_pages: int = 50
    protocol: str = LATEST


class Probe(ScriptedClient):
    """The scripted client, keeping every message the server sends, with its time."""

    def __init__(self, timeout: float) -> None:
        super().__init__(ClientSettings(name="mcprec-check"))
        self.timeout = timeout
        self.log: list[tuple[float, dict[str, Any]]] = []
        self.init_id: str | None = None

    async def received(self, raw: bytes) -> None:
        c = wire.classify(raw)
        if isinstance(c.obj, dict):
            self.log.append((time.monotonic(), c.obj))
            if c.rpc_id is not None and c.rpc_id == self.init_id and \
                    isinstance(c.obj.get("result"), dict):
                self.server_result = c.obj["result"]  # before the HTTP link reads its version
        await super().received(raw)

    async def send_request(self, method: str, params: dict[str, Any] | None = None, *,
                           progress: bool = False) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        rid, fut = await super().send_request(method, params, progress=progress)
        # an answer given up on (a timeout) may still fail later, when the server goes away
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        return rid, fut

    async def ask(self, method: str, params: dict[str, Any] | None = None, *,
                  progress: bool = False) -> dict[str, Any]:
        """The server's answer (a result or an error); ``StepFailed`` when none came."""
        rid, fut = await self.send_request(method, params, progress=progress)
        if method == "initialize":
            self.init_id = wire.id_text(rid)
        return await self._wait(fut, self.timeout, method)

    @property
    def gone(self) -> str | None:
        return self._gone


def error_of(answer: dict[str, Any]) -> tuple[Any, str] | None:
    """A JSON-RPC error's code and message."""
    e = answer.get("error")
    if not isinstance(e, dict):
        return None
    message = " ".join(str(e.get("message")).split())
    return e.get("code"), message if len(message) <= 120 else message[:117] + "..."


def tool_error(answer: dict[str, Any]) -> bool:
    result = answer.get("result")
    return isinstance(result, dict) and result.get("isError") is True


def result_of(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer.get("result")
    return result if isinstance(result, dict) else {}


def _refused(answer: dict[str, Any], what: str, code: int | None = None) -> Verdict:
    """An error (a JSON-RPC error or a tool error) is what bad input deserves; ``code`` is the
    one the spec suggests."""
    e = error_of(answer)
    if e is not None:
        note = f"; the spec says {code}" if code is not None and e[0] != code else ""
        return PASS, f"{what}: error {e[0]} ({e[1]}){note}"
    if tool_error(answer):
        return PASS, f"{what}: a tool error (isError)"
    return FAIL, f"{what}: answered with a result"


def _wants_code(answer: dict[str, Any], code: int, what: str) -> Verdict:
    e = error_of(answer)
    if e is None:
        return FAIL, f"{what}: answered with a result, not error {code}"
    if e[0] != code:
        return FAIL, f"{what}: error {e[0]} ({e[1]}), not {code}"
    return PASS, f"{what}: error {code}"


def _wrong_value(schema: Any) -> tuple[str, Any, str] | None:
    """A property of an inputSchema and a value of the wrong type for it."""
    props = table(schema, "properties")
    required = schema.get("required") if isinstance(schema, dict) else None
    names = [n for n in (required if isinstance(required, list) else []) if n in props]
    names += [n for n in props if n not in names]
    for name in names:
        typ = props[name].get("type") if isinstance(props[name], dict) else None
        if isinstance(typ, str) and typ != "null":
            wrong: Any = "mcprec: not an object" if typ == "object" else {"mcprec": f"not a {typ}"}
            return name, wrong, typ
    return None


class ProbeSession:
    """The checks of one probe session, in order; ``results`` grows as they run."""

    def __init__(self, probe: Probe, options: ProbeOptions,
                 on_result: Callable[[Result], None] | None = None) -> None:
        self.p = probe
        self.o = options
        self.on_result = on_result
        self.results: list[Result] = []
        self.caps: dict[str, Any] = {}
        self.lists: dict[str, tuple[list[Any], int, str | None]] = {}
        """list method -> (items, pages, a problem)."""
        self.slow_seconds: float | None = None
        self._stop: str | None = None

    def add(self, check: str, status: str, why: str, seconds: float | None = None) -> None:
        r = Result(check, status, why, seconds)
        self.results.append(r)
        if self.on_result is not None:
            self.on_result(r)

    async def one(self, check: str, fn: Callable[[], Awaitable[Verdict]]) -> None:
        if check == "lifecycle.alive" and self.p.gone is not None:
            self.add(check, FAIL, f"the server went away during the checks ({self.p.gone})")
            return
        if self._stop is not None:
            self.add(check, SKIP, self._stop)
            return
        if self.p.gone is not None:
            self._stop = f"the server went away ({self.p.gone})"
            self.add(check, SKIP, self._stop)
            return
        t0 = time.monotonic()
        try:
            status, why = await fn()
        except StepFailed as e:
            status, why = FAIL, e.reason
        self.add(check, status, why, time.monotonic() - t0)

    # --- the run ---------------------------------------------------------------------------------

    async def run(self, extra: Callable[[ProbeSession], Awaitable[None]] | None = None) -> None:
        await self.one("lifecycle.initialize", self.initialize)
        if self.results[-1].status != PASS:
            self._stop = "initialize failed"
        await self.one("lifecycle.version", self.version)
        await self.one("lifecycle.ping", self.ping)
        await self.one("errors.unknown-method", self.unknown_method)
        await self.one("errors.invalid-params", self.invalid_params)
        for check, fn in (("tools.list", self.tools_list), ("tools.call", self.tools_call),
                          ("tools.unknown", self.tools_unknown),
                          ("tools.invalid-arguments", self.tools_invalid)):
            await self.one(check, self._needs("tools", fn))
        for check, fn in (("resources.list", self.resources_list),
                          ("resources.read", self.resources_read),
                          ("resources.unknown", self.resources_unknown),
                          ("resources.templates", self.resources_templates)):
            await self.one(check, self._needs("resources", fn))
        for check, fn in (("prompts.list", self.prompts_list), ("prompts.get", self.prompts_get),
                          ("prompts.unknown", self.prompts_unknown)):
            await self.one(check, self._needs("prompts", fn))
        await self.one("logging.set-level", self._needs("logging", self.log_level))
        await self.one("logging.invalid-level", self._needs("logging", self.log_bad_level))
        await self.one("pagination.walk", self.pagination_walk)
        await self.one("pagination.bad-cursor", self.bad_cursor)
        await self.one("progress.notify", self.progress)
        await self.one("cancellation.unknown-request", self.cancel_unknown)
        await self.one("cancellation.in-flight", self.cancel_in_flight)
        if extra is not None and self._stop is None:
            await extra(self)
        await self.one("lifecycle.alive", self.alive)

    def _needs(self, capability: str, fn: Callable[[], Awaitable[Verdict]]
               ) -> Callable[[], Awaitable[Verdict]]:
        async def checked() -> Verdict:
            if not isinstance(self.caps.get(capability), dict):
                return SKIP, f"the server does not declare the {capability} capability"
            return await fn()
        return checked

    # --- lifecycle -------------------------------------------------------------------------------

    async def initialize(self) -> Verdict:
        answer = await self.p.ask("initialize", {
            "protocolVersion": self.o.protocol, "capabilities": {},
            "clientInfo": {"name": "mcprec-check", "version": _version()}})
        e = error_of(answer)
        if e is not None:
            return FAIL, f"initialize: error {e[0]} ({e[1]})"
        result = result_of(answer)
        self.p.server_result = result
        await self.p.notify("notifications/initialized")
        caps = result.get("capabilities")
        self.caps = caps if isinstance(caps, dict) else {}
        info = result.get("serverInfo")
        missing = [k for k, ok in (("protocolVersion", isinstance(result.get("protocolVersion"),
                                                                 str)),
                                   ("capabilities", isinstance(caps, dict)),
                                   ("serverInfo.name", isinstance(info, dict) and
                                    isinstance(info.get("name"), str))) if not ok]
        if missing:
            return FAIL, f"the initialize result lacks {', '.join(missing)}"
        declared = ", ".join(sorted(k for k, v in self.caps.items() if isinstance(v, dict)))
        named = table(result, "serverInfo")
        return PASS, f"{named['name']} {named.get('version', '')}".rstrip() + \
            f"; capabilities: {declared or 'none'}"

    async def version(self) -> Verdict:
        v = self.p.server_result.get("protocolVersion")
        if v not in KNOWN_VERSIONS:
            return FAIL, f"answered protocol version {v!r}, offered {self.o.protocol}"
        if v != self.o.protocol:
            return PASS, f"{v} (offered {self.o.protocol}: the server chose one it supports)"
        return PASS, str(v)

    async def ping(self) -> Verdict:
        answer = await self.p.ask("ping")
        e = error_of(answer)
        if e is not None:
            return FAIL, f"ping: error {e[0]} ({e[1]})"
        if not isinstance(answer.get("result"), dict):
            return FAIL, "ping: the result is not an object"
        return PASS, "answered"

    async def alive(self) -> Verdict:
        answer = await self.p.ask("ping")
        if "result" not in answer:
            return FAIL, "the last ping got no result"
        return PASS, "the server still answers ping"

    # --- errors ----------------------------------------------------------------------------------

    async def unknown_method(self) -> Verdict:
        method = "mcprec/check-unknown-method"
        return _wants_code(await self.p.ask(method, {}), METHOD_NOT_FOUND, method)

    async def invalid_params(self) -> Verdict:
        probes: tuple[tuple[str, str, dict[str, Any]], ...] = (
            ("tools", "tools/call", {"arguments": {}}), ("resources", "resources/read", {}),
            ("prompts", "prompts/get", {}))
        for capability, method, params in probes:
            if isinstance(self.caps.get(capability), dict):
                return _wants_code(await self.p.ask(method, params), INVALID_PARAMS,
                                   f"{method} without its required params")
        return SKIP, "no tools, resources or prompts declared: no method with required params"

    # --- lists and pagination --------------------------------------------------------------------

    async def walk(self, method: str, field: str) -> tuple[list[Any], int, str | None]:
        """Every item of a list, following nextCursor (at most ``max_pages`` pages)."""
        if method in self.lists:
            return self.lists[method]
        items: list[Any] = []
        cursors: set[str] = set()
        cursor: str | None = None
        pages, problem = 0, None
        while True:
            answer = await self.p.ask(method, {"cursor": cursor} if cursor else None)
            pages += 1
            e = error_of(answer)
            if e is not None:
                problem = f"{method} page {pages}: error {e[0]} ({e[1]})"
                break
            result = result_of(answer)
            page = result.get(field)
            if not isinstance(page, list):
                problem = f"{method} page {pages}: no {field} array"
                break
            items.extend(page)
            nxt = result.get("nextCursor")
            if nxt is None:
                break
            if not isinstance(nxt, str):
                problem = f"{method} page {pages}: nextCursor is not a string"
            elif nxt in cursors:
                problem = f"{method} page {pages}: nextCursor {nxt!r} came before (a loop)"
            elif pages >= self.o.max_pages:
                problem = f"{method}: still more after {pages} pages (stopped there)"
            if problem:
                break
            cursors.add(nxt)
            cursor = nxt
        self.lists[method] = (items, pages, problem)
        return self.lists[method]

    async def _list(self, method: str, field: str, key: str) -> Verdict:
        items, pages, problem = await self.walk(method, field)
        if problem is not None:
            return FAIL, problem
        bad = [i for i, item in enumerate(items)
               if not isinstance(item, dict) or not isinstance(item.get(key), str)]
        if bad:
            return FAIL, f"{field}[{bad[0]}] has no {key}"
        return PASS, f"{len(items)} {field} in {pages} page{'s' if pages != 1 else ''}"

    async def pagination_walk(self) -> Verdict:
        walked = []
        for capability, method, field in LISTS:
            if not isinstance(self.caps.get(capability), dict):
                continue
            items, pages, problem = await self.walk(method, field)
            if problem is not None and f"error {METHOD_NOT_FOUND}" not in problem:
                return FAIL, problem
            keys = [_item_key(i) for i in items]
            dup = next((k for k in keys if k is not None and keys.count(k) > 1), None)
            if dup is not None:
                return FAIL, f"{method}: {dup!r} is listed twice"
            walked.append(f"{method} {pages}")
        if not walked:
            return SKIP, "the server declares no list"
        return PASS, "pages: " + ", ".join(walked)

    async def bad_cursor(self) -> Verdict:
        for capability, method, field in LISTS:
            if not isinstance(self.caps.get(capability), dict):
                continue
            answer = await self.p.ask(method, {"cursor": f"mcprec-invalid-{secrets.token_hex(4)}"})
            e = error_of(answer)
            if e is not None:
                if e[0] == INVALID_PARAMS:
                    return PASS, f"{method}: error {INVALID_PARAMS}"
                return PASS, f"{method}: error {e[0]} ({e[1]}); the spec suggests -32602"
            _, pages, _ = await self.walk(method, field)
            if pages > 1:
                return FAIL, f"{method} paginates, yet answered an invalid cursor with a result"
            return SKIP, f"{method} lists everything in one page and ignores cursors"
        return SKIP, "the server declares no list"

    # --- tools -----------------------------------------------------------------------------------

    async def tools_list(self) -> Verdict:
        verdict = await self._list("tools/list", "tools", "name")
        if verdict[0] != PASS:
            return verdict
        tools, _, _ = self.lists["tools/list"]
        for t in tools:
            schema = t.get("inputSchema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                return FAIL, f"tool {t['name']!r}: inputSchema is not an object schema"
        return verdict

    def _tool(self, chosen: tuple[str, dict[str, Any] | None] | None
              ) -> tuple[dict[str, Any], dict[str, Any]] | str:
        """The tool to call and its arguments, or why there is none."""
        tools = [t for t in self.lists.get("tools/list", ([], 0, None))[0] if isinstance(t, dict)]
        if chosen is not None:
            name, args = chosen
            tool = next((t for t in tools if t.get("name") == name), None)
            if tool is None:
                return f"the server lists no tool named {name!r}"
            return tool, args if args is not None else object_example(tool.get("inputSchema"))
        tool = next((t for t in tools if table(t, "annotations").get("readOnlyHint") is True),
                    None)
        if tool is None:
            return "no tool is annotated readOnlyHint; name one with --call TOOL"
        return tool, object_example(tool.get("inputSchema"))

    async def tools_call(self) -> Verdict:
        chosen = self._tool(self.o.call)
        if isinstance(chosen, str):
            return SKIP, chosen
        tool, args = chosen
        answer = await self.p.ask("tools/call", {"name": tool["name"], "arguments": args})
        e = error_of(answer)
        if e is not None:
            return FAIL, f"{tool['name']}: error {e[0]} ({e[1]})"
        if tool_error(answer):
            return FAIL, f"{tool['name']}: a tool error (isError) with arguments {_short(args)}"
        content = result_of(answer).get("content")
        if not isinstance(content, list):
            return FAIL, f"{tool['name']}: the result has no content array"
        return PASS, f"{tool['name']} {_short(args)}: {len(content)} content item(s)"

    async def tools_unknown(self) -> Verdict:
        name = f"mcprec-no-such-tool-{secrets.token_hex(3)}"
        return _refused(await self.p.ask("tools/call", {"name": name, "arguments": {}}),
                        f"tool {name}")

    async def tools_invalid(self) -> Verdict:
        chosen = self._tool(self.o.call)
        if isinstance(chosen, str):
            return SKIP, chosen
        tool, args = chosen
        wrong = _wrong_value(tool.get("inputSchema"))
        if wrong is None:
            return SKIP, f"{tool['name']} takes no typed argument"
        prop, value, typ = wrong
        answer = await self.p.ask("tools/call", {"name": tool["name"],
                                                 "arguments": {**args, prop: value}})
        verdict = _refused(answer, f"{tool['name']} with {prop} not a {typ}")
        return verdict

    # --- resources -------------------------------------------------------------------------------

    async def resources_list(self) -> Verdict:
        return await self._list("resources/list", "resources", "uri")

    async def resources_read(self) -> Verdict:
        items, _, _ = await self.walk("resources/list", "resources")
        first = next((r for r in items if isinstance(r, dict) and isinstance(r.get("uri"), str)),
                     None)
        if first is None:
            return SKIP, "the server lists no resource"
        answer = await self.p.ask("resources/read", {"uri": first["uri"]})
        e = error_of(answer)
        if e is not None:
            return FAIL, f"{first['uri']}: error {e[0]} ({e[1]})"
        contents = result_of(answer).get("contents")
        if not isinstance(contents, list):
            return FAIL, f"{first['uri']}: no contents array"
        return PASS, f"{first['uri']}: {len(contents)} content item(s)"

    async def resources_unknown(self) -> Verdict:
        uri = f"mcprec-check://no-such-resource/{secrets.token_hex(3)}"
        return _refused(await self.p.ask("resources/read", {"uri": uri}), uri, RESOURCE_NOT_FOUND)

    async def resources_templates(self) -> Verdict:
        items, pages, problem = await self.walk("resources/templates/list", "resourceTemplates")
        if problem is not None and f"error {METHOD_NOT_FOUND}" in problem:
            return SKIP, "the server has no resources/templates/list (-32601)"
        return await self._list("resources/templates/list", "resourceTemplates", "uriTemplate")

    # --- prompts ---------------------------------------------------------------------------------

    async def prompts_list(self) -> Verdict:
        return await self._list("prompts/list", "prompts", "name")

    async def prompts_get(self) -> Verdict:
        items, _, _ = await self.walk("prompts/list", "prompts")
        first = next((p for p in items if isinstance(p, dict) and isinstance(p.get("name"), str)),
                     None)
        if first is None:
            return SKIP, "the server lists no prompt"
        args = {a["name"]: "mcprec" for a in first.get("arguments") or []
                if isinstance(a, dict) and a.get("required") and isinstance(a.get("name"), str)}
        answer = await self.p.ask("prompts/get", {"name": first["name"], "arguments": args})
        e = error_of(answer)
        if e is not None:
            return FAIL, f"{first['name']}: error {e[0]} ({e[1]})"
        if not isinstance(result_of(answer).get("messages"), list):
            return FAIL, f"{first['name']}: no messages array"
        return PASS, f"{first['name']} {_short(args)}"

    async def prompts_unknown(self) -> Verdict:
        name = f"mcprec-no-such-prompt-{secrets.token_hex(3)}"
        return _refused(await self.p.ask("prompts/get", {"name": name}), f"prompt {name}",
                        INVALID_PARAMS)

    # --- logging ---------------------------------------------------------------------------------

    async def log_level(self) -> Verdict:
        answer = await self.p.ask("logging/setLevel", {"level": "warning"})
        e = error_of(answer)
        return (FAIL, f"level warning: error {e[0]} ({e[1]})") if e else (PASS, "level warning")

    async def log_bad_level(self) -> Verdict:
        return _refused(await self.p.ask("logging/setLevel", {"level": "mcprec-no-such-level"}),
                        "level mcprec-no-such-level", INVALID_PARAMS)

    # --- progress and cancellation ---------------------------------------------------------------

    async def progress(self) -> Verdict:
        if self.o.slow is None:
            return SKIP, "no slow tool call to watch (name one with --slow TOOL)"
        chosen = self._tool(self.o.slow)
        if isinstance(chosen, str):
            return SKIP, chosen
        tool, args = chosen
        t0 = time.monotonic()
        start = len(self.p.log)
        rid, fut = await self.p.send_request("tools/call", {"name": tool["name"],
                                                            "arguments": args}, progress=True)
        answer = await self.p._wait(fut, self.o.timeout, "tools/call")
        self.slow_seconds = time.monotonic() - t0
        e = error_of(answer)
        if e is not None or tool_error(answer):
            return FAIL, f"{tool['name']} {_short(args)} failed: " + \
                (f"error {e[0]} ({e[1]})" if e else "a tool error")
        values: list[Any] = []
        for _, msg in self.p.log[start:]:
            if msg.get("method") != "notifications/progress":
                continue
            params = table(msg, "params")
            if params.get("progressToken") != rid:
                return FAIL, f"progress with token {params.get('progressToken')!r}, " \
                             f"not the request's {rid}"
            values.append(params.get("progress"))
        if not values:
            return PASS, f"{tool['name']}: no progress sent (servers may send none), " \
                         f"answered in {self.slow_seconds:.2f} s"
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in values) or \
                any(b <= a for a, b in zip(values, values[1:])):
            return FAIL, f"progress values do not increase: {values[:10]}"
        return PASS, f"{tool['name']}: {len(values)} progress notification(s), increasing"

    async def cancel_unknown(self) -> Verdict:
        start = len(self.p.log)
        await self.p.notify("notifications/cancelled", {"requestId": 987654321,
                                                        "reason": "mcprec check"})
        await self.p.ask("ping")
        for _, msg in self.p.log[start:]:
            if "method" not in msg and msg.get("id") in (None, 987654321):
                return FAIL, "answered a notification: " + wire.dumps(msg).decode()[:150]
        return PASS, "ignored; ping answered after it"

    async def cancel_in_flight(self) -> Verdict:
        if self.o.slow is None:
            return SKIP, "no slow tool call to cancel (name one with --slow TOOL)"
        if self.slow_seconds is None:
            return SKIP, "the slow call did not run"
        if self.slow_seconds < 0.3:
            return SKIP, f"the slow call took {self.slow_seconds:.2f} s: too quick to cancel"
        chosen = self._tool(self.o.slow)
        assert not isinstance(chosen, str)
        tool, args = chosen
        rid, fut = await self.p.send_request("tools/call", {"name": tool["name"],
                                                            "arguments": args}, progress=True)
        with_wait = min(self.slow_seconds / 4, 0.5)
        try:
            await asyncio.wait_for(asyncio.shield(fut), with_wait)
            return SKIP, f"answered within {with_wait:.2f} s, before it could be cancelled"
        except asyncio.TimeoutError:
            pass
        self.p.forget(rid)
        sent = time.monotonic()
        start = len(self.p.log)
        await self.p.notify("notifications/cancelled", {"requestId": rid,
                                                        "reason": "mcprec check"})
        await asyncio.sleep(min(self.slow_seconds * 1.5 + 0.5, self.o.timeout))
        stopped = ""
        for at, msg in self.p.log[start:]:
            if "method" not in msg and msg.get("id") == rid:
                e = error_of(msg)
                if e is not None:  # work stopped, and said so (the spec: better not answer)
                    stopped = f"; answered with error {e[0]} ({e[1]}), which it should not send"
                    break
                return FAIL, (f"answered request {rid} with a result {at - sent:.2f} s after it "
                              f"was cancelled (the call takes {self.slow_seconds:.2f} s)")
        late = sum(1 for _, m in self.p.log[start:] if m.get("method") == "notifications/progress"
                   and table(m, "params").get("progressToken") == rid)
        return PASS, ("stopped" if stopped else "no answer after the cancellation") + stopped + \
            (f" ({late} progress notification(s) still came)" if late else "")


def _item_key(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in ("name", "uri", "uriTemplate"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return None


def _short(value: Any) -> str:
    text = wire.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _version() -> str:
    from .. import __version__

    return __version__
