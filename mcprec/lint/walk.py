"""The walk over one session: its messages in recorded order, each checked by every enabled
checker, with the state the checks share (the negotiated version, the capabilities, the
requests in flight, their progress tokens).

A checker is a class with ``codes`` (the rules it reports), ``message(item)`` called for each
message in order, and ``finish()`` called once at the end. It reports through ``Context``.
The shared state is updated around the checkers: a response is matched to its request before
they see it, and the request is closed after.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import wire
from ..cassette import Cassette, Message, Session
from ..jsonpath import format_path
from .model import Finding, RULES
from .schemas import CLIENT, SERVER, Spec, closest_known, is_stateless, spec

C2S, S2C = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
SIDE: dict[str, str] = {C2S: CLIENT, S2C: SERVER}
OTHER: dict[str, str] = {C2S: S2C, S2C: C2S}
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"


class Request:
    """A request seen in the session, from when it was sent until (and after) its answer."""

    __slots__ = ("seq", "direction", "id_key", "method", "params", "token_key", "answer_seq",
                 "cancel_seq", "last_progress")

    def __init__(self, seq: int, direction: str, id_key: str, method: str, params: Any,
                 token_key: str | None) -> None:
        self.seq = seq
        self.direction = direction
        self.id_key = id_key
        self.method = method
        self.params = params
        self.token_key = token_key
        self.answer_seq: int | None = None
        self.cancel_seq: int | None = None
        self.last_progress: float | None = None


class Item:
    """One JSON-RPC message as the checkers see it (each element of a batch is an item)."""

    __slots__ = ("seq", "direction", "kind", "method", "id_key", "obj", "root", "raw", "version",
                 "spec", "request", "answered_before")

    def __init__(self, seq: int, direction: str, kind: str, method: str | None,
                 id_key: str | None, obj: Any, root: str = "$", raw: bytes | None = None) -> None:
        self.raw = raw
        """The message's bytes (None for an element of a batch)."""
        self.seq = seq
        self.direction = direction
        self.kind = kind
        self.method = method
        self.id_key = id_key
        self.obj = obj
        self.root = root
        self.version: str = ""
        """The revision the message is checked against (a published one)."""
        self.spec: Spec = None  # type: ignore[assignment]
        self.request: Request | None = None
        """For a response or error: the request it answers, when one was seen."""
        self.answered_before: bool = False
        """For a response or error: that request had been answered already."""

    @property
    def params(self) -> Any:
        return self.obj.get("params") if isinstance(self.obj, dict) else None

    @property
    def result(self) -> Any:
        return self.obj.get("result") if isinstance(self.obj, dict) else None

    @property
    def side(self) -> str:
        return SIDE[self.direction]

    def path(self, *steps: str | int) -> str:
        return format_path(steps, root=self.root)


@dataclass
class State:
    """What the checks share about the session so far."""

    session: Session
    version: str | None = None
    """The negotiated revision as recorded (maybe one mcprec does not know)."""
    offered: str | None = None
    """The revision the client offered in ``initialize``."""
    stateless: bool = False
    client_caps: dict[str, Any] | None = None
    server_caps: dict[str, Any] | None = None
    initialize_seq: int | None = None
    initialize_answer_seq: int | None = None
    initialized_seq: int | None = None
    first_client_seq: int | None = None
    open: dict[tuple[str, str], Request] = field(default_factory=dict)
    """Requests in flight by (direction, id)."""
    closed: dict[tuple[str, str], Request] = field(default_factory=dict)
    """Answered requests by (direction, id): the last one of each id."""
    sent: set[tuple[str, str]] = field(default_factory=set)
    """Every (direction, id) a request was sent with."""
    tokens: dict[tuple[str, str], Request] = field(default_factory=dict)
    """Progress tokens by (direction of the request, token as JSON)."""
    latest_answered: dict[str, int] = field(default_factory=dict)
    """Direction -> the seq of the latest request sent that way that got its answer."""


class Context:
    """Where checkers report, and what they read: the state, and which rules are on."""

    def __init__(self, cassette: str, session: Session, enabled: dict[str, str],
                 options: Any = None) -> None:
        self.cassette = cassette
        self.session = session
        self.enabled = enabled
        self.options = options
        self.state = State(session)
        self.findings: list[Finding] = []

    def on(self, code: str) -> bool:
        return code in self.enabled

    def report(self, code: str, item: Item | None, message: str, path: str | None = None,
               rule_name: str | None = None) -> None:
        severity = self.enabled.get(code)
        if severity is None:
            return
        name = rule_name or (RULES[code].name if code in RULES else code)
        self.findings.append(Finding(
            cassette=self.cassette, session=self.session.name,
            seq=item.seq if item else -1, direction=item.direction if item else None,
            method=item.method if item else None, id=item.id_key if item else None,
            code=code, rule=name, severity=severity, message=message,
            path=path if path is not None else (item.root if item else "$")))


class Checker:
    """Base of the checkers: override ``message`` and ``finish``."""

    codes: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.state = ctx.state

    def message(self, item: Item) -> None:  # pragma: no cover - overridden
        pass

    def finish(self) -> None:
        pass


_CALLS = (wire.REQUEST, wire.NOTIFICATION)


def items(m: Message) -> Iterator[Item]:
    """The JSON-RPC messages in ``m``: itself, or each element of a batch."""
    obj = m.json
    if m.kind == wire.BATCH and isinstance(obj, list):
        for i, element in enumerate(obj):
            c = wire.classify_obj(element)
            yield Item(m.seq, m.direction, c.kind, c.method, c.rpc_id, element, f"$[{i}]")
        return
    yield Item(m.seq, m.direction, m.kind, m.method if m.kind in (wire.REQUEST,
               wire.NOTIFICATION) else None, m.rpc_id, obj, raw=m.raw)


class Walk:
    """Lint one session: ``Walk(ctx, checker_classes).run(cassette)``."""

    def __init__(self, ctx: Context, checkers: list[type[Checker]]) -> None:
        self.ctx = ctx
        self.state = ctx.state
        self.checkers = [cls(ctx) for cls in checkers if cls.codes & ctx.enabled.keys()]
        s = ctx.session
        self.state.version = s.protocol_version
        self.state.stateless = is_stateless(s.protocol_version)
        self._known: dict[tuple[str | None, bool], tuple[str, Spec]] = {}

    def run(self, cassette: Cassette) -> list[Finding]:
        for m in cassette.messages(self.ctx.session):
            if m.http is not None and (m.http.get("synthetic") or m.http.get("truncated")):
                continue  # a marker of a transport failure, or cut short by the recorder
            if m.kind == wire.BATCH:
                for item in items(m):
                    self.step(item)
            else:  # the usual case, without the generator
                self.step(Item(m.seq, m.direction, m.kind, m.method if m.kind in _CALLS else None,
                               m.rpc_id, m.json, raw=m.raw))
        for checker in self.checkers:
            checker.finish()
        return self.ctx.findings

    def step(self, item: Item) -> None:
        self._before(item)
        for checker in self.checkers:
            checker.message(item)
        self._after(item)

    # --- the shared state -------------------------------------------------------------------

    def _version_of(self, item: Item) -> str | None:
        st = self.state
        if item.kind == wire.REQUEST:
            meta = _meta(item.params)
            v = meta.get(VERSION_KEY) if meta else None
            if isinstance(v, str):
                return v
            if item.method == "initialize" and st.version is None:
                offered = item.params.get("protocolVersion") if isinstance(
                    item.params, dict) else None
                return offered if isinstance(offered, str) else None
        return st.version

    def _before(self, item: Item) -> None:
        st = self.state
        if item.kind in (wire.RESPONSE, wire.ERROR) and item.id_key is not None:
            key = (OTHER[item.direction], item.id_key)
            req = st.open.get(key)
            if req is None:
                req = st.closed.get(key)
                item.answered_before = req is not None
            item.request = req
            if req is not None:
                item.method = req.method
        version = self._version_of(item)
        if item.request is not None:
            meta = _meta(item.request.params)
            v = meta.get(VERSION_KEY) if meta else None
            version = v if isinstance(v, str) else version
        handshake = st.initialize_seq is not None or not st.stateless
        known = self._known.get((version, handshake))
        if known is None:
            v = closest_known(version, not is_stateless(version) and handshake)
            compiled = spec(v)
            assert compiled is not None  # closest_known names a published revision
            known = self._known[(version, handshake)] = (v, compiled)
        item.version, item.spec = known
        if item.direction == C2S and st.first_client_seq is None:
            st.first_client_seq = item.seq

    def _after(self, item: Item) -> None:
        st = self.state
        obj = item.obj if isinstance(item.obj, dict) else {}
        if item.kind == wire.REQUEST and item.id_key is not None:
            params = item.params
            meta = _meta(params)
            token = meta.get("progressToken") if meta else None
            token_key = wire.id_text(token) if isinstance(token, (str, int)) and \
                not isinstance(token, bool) else None
            req = Request(item.seq, item.direction, item.id_key, item.method or "", params,
                          token_key)
            st.open[(item.direction, item.id_key)] = req
            st.sent.add((item.direction, item.id_key))
            if token_key is not None:
                st.tokens[(item.direction, token_key)] = req
            if item.method == "initialize" and item.direction == C2S:
                st.stateless = False  # a probe may have come first: the handshake won
                if st.initialize_seq is None:
                    st.initialize_seq = item.seq
                    if isinstance(params, dict):
                        offered = params.get("protocolVersion")
                        st.offered = offered if isinstance(offered, str) else None
                        caps = params.get("capabilities")
                        st.client_caps = caps if isinstance(caps, dict) else {}
            elif meta and isinstance(meta.get(CLIENT_CAPS_KEY), dict):
                st.client_caps = meta[CLIENT_CAPS_KEY]
                if is_stateless(meta.get(VERSION_KEY)):
                    st.stateless = True
        elif item.kind in (wire.RESPONSE, wire.ERROR) and item.request is not None:
            req = item.request
            key = (req.direction, req.id_key)
            if not item.answered_before:
                req.answer_seq = item.seq
                st.open.pop(key, None)
                st.closed[key] = req
                st.latest_answered[req.direction] = max(
                    st.latest_answered.get(req.direction, -1), req.seq)
            result = obj.get("result")
            if item.kind == wire.RESPONSE and isinstance(result, dict):
                if req.method == "initialize" and st.initialize_answer_seq is None:
                    st.initialize_answer_seq = item.seq
                    v = result.get("protocolVersion")
                    if isinstance(v, str):
                        st.version = v
                    caps = result.get("capabilities")
                    st.server_caps = caps if isinstance(caps, dict) else {}
                elif req.method == "server/discover" and isinstance(
                        result.get("capabilities"), dict):
                    st.server_caps = result["capabilities"]
        elif item.kind == wire.NOTIFICATION:
            if item.direction == C2S and item.method == "notifications/initialized" \
                    and st.initialized_seq is None:
                st.initialized_seq = item.seq
            elif item.method == "notifications/cancelled":
                named = cancelled_request(st, item)
                if named is not None and named.cancel_seq is None:
                    named.cancel_seq = item.seq


def cancelled_request(st: State, item: Item) -> Request | None:
    """The request a notifications/cancelled names (one the same side sent), if any."""
    params = item.params
    if not isinstance(params, dict) or "requestId" not in params:
        return None
    key = (item.direction, wire.id_text(params["requestId"]))
    return st.open.get(key) or st.closed.get(key)


def _meta(params: Any) -> dict[str, Any] | None:
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta
    return None
