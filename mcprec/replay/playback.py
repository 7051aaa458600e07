"""The replay engine: one recorded session played as a server to one client, free of any I/O.

A driver hands every client message to ``receive()``, sends what ``take()`` returns, and calls
``tick()`` when ``next_deadline()`` comes. ``engine.py`` drives it from asyncio (HTTP, the live
fallback, in-process replay); ``lean.py`` drives it from a blocking loop over stdin and stdout,
with nothing imported that the first answer does not need.

For each request the engine finds the recorded one (see ``matching``; with several recorded
sessions, ``choose`` narrows them to the one this client's traffic matches), then plays what
the server did while handling it, in recorded order: notifications (progress tokens rewritten
to the client's), server-to-client requests (fresh ids), and the response (with the client's
id). A message the recording shows waiting for a client message (``waits_for``: a
cancellation, the answer to a server-to-client request) waits for the same message now, and
nothing else waits. Messages the server sent on its own are played after the client message
they followed in the recording.

A request the recording never answered ends as the recording did: a server that exited while
handling it exits now (``ended``, with its exit code), a request the client cancelled stays
unanswered once cancelled, and anything else gets a JSON-RPC error at once that says why.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .. import _log, wire
from .._plain import Plain
from ..cassette import Cassette, Message, Session
from ..cassette.models import StoredMessage, StoredText
from ..errors import NoMatchError, ReplayError, UsageError
from ..matching import METHOD_ONLY, Match, MatchOptions
from .choose import SessionChoice

if TYPE_CHECKING:  # faults are imported only by a replay given some
    from .faults import Fault, Faults

NO_MATCH_CODE = -32000
UNANSWERED_CODE = -32001
INTERNAL_ERROR = -32603
CANCELLED = "notifications/cancelled"
# 2026-07-28: events of subscriptions/listen carry the listen request's id here
_SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
# Answered with an empty result when nothing was recorded for them: their result carries nothing.
EMPTY_RESULT_METHODS = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# How long a message waits for a client notification it waited for in the recording (a
# cancellation) before it is played anyway: twice the recorded wait, within these bounds.
CAUSE_WAIT_MIN_S = 1.0
CAUSE_WAIT_MAX_S = 30.0
# --protocol-version: answer initialize with the recorded version, or with the client's
PROTOCOL_VERSION_POLICIES = ("recorded", "rewrite")

Outgoing = tuple["bytes | StoredText", "str | None"]
"""``(message, related)``: one message for the client. ``related`` is the id text of the client
request it belongs to (HTTP routes it onto that request's stream), or None. An empty message
means: end that request's stream abruptly, as the recorded upstream did. A large recorded
answer comes as a ``StoredText``: the driver sends its ``pieces()`` as it reads them from the
cassette (or ``bytes()`` of it, whole)."""

Unmatched = Callable[[dict[str, "Any"], NoMatchError], bool]
"""``unmatched(request, error) -> handled``: a driver's own answer to an unmatched request
(the live fallback); False lets the engine answer it."""


class ReplayStats(Plain):
    """What a replay answered. A plain class, not a dataclass: building the dataclass was
    0.6-0.7 ms of CPU at every replay's start-up (with its repr and equality kept)."""

    __slots__ = ("requests", "matched", "repeated", "unmatched", "unanswered", "forwarded")
    _FIELDS = __slots__

    def __init__(self, requests: int = 0, matched: int = 0, repeated: int = 0,
                 unmatched: list[dict[str, Any]] | None = None,
                 unanswered: list[dict[str, Any]] | None = None, forwarded: int = 0) -> None:
        self.requests = requests
        self.matched = matched
        self.repeated = repeated
        self.unmatched: list[dict[str, Any]] = [] if unmatched is None else unmatched
        self.unanswered: list[dict[str, Any]] = [] if unanswered is None else unanswered
        """Matched requests the recording has no usable answer for (the server exited, the
        session was cut off, the answer was recorded truncated), with the reason."""
        self.forwarded = forwarded


error_response = wire.error_message


class _Cause:
    """A client message a run may wait for; ``arrived`` once it has come."""

    __slots__ = ("arrived", "waiters")

    def __init__(self) -> None:
        self.arrived = False
        self.waiters: list[_Run] = []


class _Play:
    """One replayed request in progress: what its script may still wait for."""

    __slots__ = ("key", "request", "answers", "cancelled", "notified", "expects_cancel", "run")

    def __init__(self, key: str, request: Message) -> None:
        self.key = key
        self.request = request
        self.answers: dict[int, _Cause] = {}  # recorded client answer seq -> arrived
        self.cancelled = _Cause()
        self.notified: dict[str, _Cause] = {}  # client notification method -> arrived
        self.expects_cancel = False
        self.run: _Run | None = None

    def answer(self, seq: int) -> _Cause:
        c = self.answers.get(seq)
        if c is None:
            c = self.answers[seq] = _Cause()
        return c

    def notification(self, method: str) -> _Cause:
        if method == CANCELLED:
            return self.cancelled
        c = self.notified.get(method)
        if c is None:
            c = self.notified[method] = _Cause()
        return c


class _Run:
    """A script being played: messages, where it is, and what holds it up."""

    __slots__ = ("messages", "i", "clock", "rid", "token", "related", "play", "done",
                 "deadline", "cause", "stopped", "gave_up", "released", "fault", "version")

    def __init__(self, messages: list[Message], clock: tuple[float, int] | None, rid: Any,
                 token: Any, related: str | None, play: _Play | None,
                 done: Callable[[_Run], None] | None) -> None:
        self.messages = messages
        self.i = 0
        self.clock = clock
        self.rid = rid
        self.token = token
        self.related = related
        self.play = play
        self.done = done
        self.deadline: float | None = None  # resume at (timing, or a bounded cause wait)
        self.cause: _Cause | None = None  # waiting for it
        self.stopped = False
        self.gave_up: Callable[[], None] | None = None  # what a cause wait's deadline does
        self.released = -1  # the message whose cause was waited for in vain: it plays now
        self.fault: Fault | None = None  # injected into the answer (malformed, disconnect)
        self.version: str | None = None  # initialize: answer with this protocolVersion


class Playback:
    """Plays one recorded session (or the one of several its client's traffic matches)."""

    def __init__(
        self,
        cassette: Cassette,
        session: Session | Sequence[Session],
        *,
        options: MatchOptions | None = None,
        timing: float | None = None,
        redact: Any = None,
        server_stderr: Callable[[str], None] | None = None,
        label: str = "",
        unmatched: Unmatched | None = None,
        clock: Callable[[], float] = time.monotonic,
        faults: Faults | None = None,
        transport: str = "stdio",
        protocol_version: str = "recorded",
        max_gap: float | None = None,
        notices: set[str] | None = None,
    ) -> None:
        self.cassette = cassette
        if protocol_version not in PROTOCOL_VERSION_POLICIES:
            raise UsageError(f"unknown protocol version policy {protocol_version!r}; choose "
                             f"one of {', '.join(PROTOCOL_VERSION_POLICIES)}")
        self.protocol_version = protocol_version
        self.max_gap = max_gap
        """With ``timing``: the longest pause (seconds, as replayed) between two messages."""
        self.versions: dict[str, Any] | None = None
        """The client offered another protocol version than the recorded client: offered,
        recorded, answered (for the report)."""
        self._notices = notices if notices is not None else set()  # said once (HTTP: shared)
        sessions = [session] if isinstance(session, Session) else list(session)
        self.choice = SessionChoice(cassette, sessions, options)
        self.timing = timing
        self.stats = ReplayStats()
        # the recording was redacted: redact incoming requests alike, so that they still match
        # (the default redactor is built at the first request that needs it: ~30 ms of regular
        # expressions and config that an initialize answer never needs)
        self._redact: Any = redact
        if getattr(cassette, "redaction_beyond_defaults", None) is not None and \
                cassette.redaction_beyond_defaults(sessions):  # the recording's own rules
            from ..redact.manifest import session_redactor

            self._redact = session_redactor(redact, cassette, sessions)
        self._server_stderr = server_stderr
        self._label = label
        self._on_unmatched = unmatched
        self._now = clock
        self.faults = faults if faults else None
        self.transport = transport
        if self.faults is not None and transport != "http":
            for rule in self.faults.rules:
                if rule.effect == "http":
                    raise UsageError(f"fault {rule.text!r}: http= needs --http")
        self.status_only: dict[str, int] = {}
        """Per client request id text: answer with this HTTP status and an empty body."""
        self.gone = False
        """HTTP: the server went away on purpose (a disconnect fault); the session ends."""
        self.malformed: set[str] = set()
        """Client request id texts whose answer goes out malformed on purpose (HTTP: it is
        still the last message of its response)."""
        self._announced: Session | None = None
        self._out: list[Outgoing] = []
        self._runs: set[_Run] = set()  # runs not finished
        self._timed: set[_Run] = set()  # runs with a deadline
        self._plays: dict[str, _Play] = {}
        self._asked: dict[str, Callable[[dict[str, Any]], None]] = {}  # fresh id -> on answer
        self._next_id = 0
        self._notes: dict[tuple[int, str], list[Message]] = {}
        self._notes_next: dict[str, int] = {}
        self.modes: dict[str, str] = {}
        """Per client request id text: how the recorded answer came over HTTP (json or sse)."""
        self.statuses: dict[str, int] = {}
        """Per client request id text: an HTTP status the recorded answer came with (a failure
        the recording proxy answered for an unreachable upstream)."""
        self._followers_cache: dict[tuple[int, int], list[Message]] = {}
        self._any_followers: dict[int, bool] = {}
        self._messages: dict[tuple[int, int], Message | None] = {}
        self._stderr_lines: dict[int, list[Any]] = {}
        self._stderr_next: dict[int, int] = {}
        self._unplayed: list[Message] | None = None
        self.ended = False
        """True when the recording ends here: the server exited while handling a request.
        The driver then closes the connection (stdio: exits with ``exit_code``)."""
        self.exit_code: int | None = None

    @property
    def session(self) -> Session:
        """The recorded session being played (with several candidates: the current choice)."""
        return self.choice.session

    @property
    def _redactor(self) -> Any:
        if self._redact is None:
            from ..redact import default_redactor

            self._redact = default_redactor()
        return self._redact

    @property
    def matcher(self) -> Any:
        return self.choice.matcher

    # --- the driver's side ------------------------------------------------------------------

    def start(self) -> None:
        """Play what the server sent before the client said anything (banners, early notices)."""
        self._spawn(self._followers(-1), None)

    def take(self) -> list[Outgoing]:
        """What to send to the client now, in order."""
        out, self._out = self._out, []
        return out

    @property
    def busy(self) -> bool:
        """Whether any answer is still in progress (waiting for the client, or for a time)."""
        return bool(self._runs)

    def next_deadline(self) -> float | None:
        """When ``tick`` must next be called (a ``clock()`` time), or None."""
        return min((r.deadline for r in self._timed if r.deadline is not None), default=None)

    def tick(self) -> None:
        """Go on with every run whose time has come."""
        now = self._now()
        for run in [r for r in self._timed if r.deadline is not None and r.deadline <= now]:
            self._timed.discard(run)
            run.deadline = None
            if run.cause is not None:  # a bounded wait for a cause ran out
                cause, run.cause = run.cause, None
                if run in cause.waiters:
                    cause.waiters.remove(run)
                if run.gave_up is not None:
                    run.gave_up()
                    run.gave_up = None
                run.released = run.i
            self._pump(run)

    def receive(self, raw: bytes) -> None:
        """Handle one message from the client."""
        if self.ended:
            return  # the recorded server has exited: nobody is listening
        if self.faults is None and self._sent_as_recorded(raw):
            return
        method = wire.bare_notification(raw)
        if method is not None:  # e.g. notifications/initialized: no parser needed
            self._notification({"jsonrpc": "2.0", "method": method})
            return
        c = wire.classify(raw)
        if c.kind == wire.REQUEST:
            if not wire.valid_request_id(c.obj["id"]):
                self.send(error_response(None, -32600, wire.INVALID_ID), None)
                return
            if c.method in METHOD_ONLY:  # matched on the method alone: nothing to redact
                self._request(c.obj, c.obj)
                return
            has_meta = wire.holds_meta(raw)
            if self.choice.recorded(c.obj, has_meta=has_meta):
                # recorded just as it came, so it holds nothing that redaction would change
                # (what was recorded is redacted already, and redaction leaves that as it is):
                # not redacted again. Replaying small pipelined requests: 12% of the CPU
                self._request(c.obj, c.obj, has_meta)
                return
            redacted = self._redactor.redact(raw)
            match_obj = c.obj if redacted == raw else wire.classify(redacted).obj
            self._request(c.obj, match_obj, wire.holds_meta(redacted))
        elif c.kind == wire.NOTIFICATION:
            self._notification(c.obj)
        elif c.kind in (wire.RESPONSE, wire.ERROR):
            self.client_answer(c.rpc_id or "", c.obj)
        elif c.kind == wire.BATCH:
            for item in c.obj:
                self.receive(wire.dumps(item))
        elif not raw.strip():
            return
        elif c.obj is None:
            self.send(error_response(None, -32700, "Parse error: not JSON"), None)
        else:
            self.send(error_response(None, -32600, "Invalid Request"), None)

    def _sent_as_recorded(self, raw: bytes) -> bool:
        """Answer a request whose bytes, but for its id, are those of a recorded request (the
        usual case: the client under test sends what it sent when recording), as ``_request``
        would, without parsing it to match it (``Matcher.match_bytes``). False for any other
        message: it goes the usual way."""
        started = self._now()
        hit = self.choice.match_bytes(raw)
        if hit is None:
            return False
        found, rid = hit
        self.stats.requests += 1
        self._matched(found, rid, wire.id_text(rid), None, started, raw=raw)
        return True

    def send(self, data: bytes | StoredText, related: str | None) -> None:
        """Queue a message for the client (drivers and the live fallback use this too)."""
        self._out.append((data, related))

    def ask(self, obj: dict[str, Any], related: str | None,
            on_answer: Callable[[dict[str, Any]], None]) -> None:
        """Send a server-to-client request with a fresh id; ``on_answer`` gets the client's."""
        self._next_id += 1
        self._asked[wire.id_text(self._next_id)] = on_answer
        self.send(wire.dumps({**obj, "id": self._next_id}), related)

    def client_answer(self, id_text: str, obj: dict[str, Any]) -> bool:
        """The client answered a request of ours; False if no one asked it that."""
        on_answer = self._asked.pop(id_text, None)
        if on_answer is None:
            return False
        on_answer(obj)
        return True

    def cancel_request(self, key: str) -> None:
        """Stop answering the client's request ``key`` (as for notifications/cancelled)."""
        play = self._plays.pop(key, None)
        if play is not None and play.run is not None:
            self._stop(play.run)

    # --- requests ---------------------------------------------------------------------------

    def _request(self, obj: dict[str, Any], match_obj: dict[str, Any],
                 has_meta: bool = True) -> None:
        started = self._now()
        self.stats.requests += 1
        rid = obj.get("id")
        key = wire.id_text(rid)
        fault = self.faults.pick(obj) if self.faults is not None else None
        if fault is not None and fault.replaces:
            with contextlib.suppress(Exception):  # the playback position moves on as it would
                self.choice.match(match_obj, has_meta=has_meta)
            self._inject(fault, obj, key)
            return
        try:
            found = self.choice.match(match_obj, has_meta=has_meta)
        except NoMatchError as e:
            self._unmatched(obj, e)
            return
        except Exception as e:  # noqa: BLE001 - e.g. a custom matcher raised: answer, not hang
            self.stats.unmatched.append({"method": obj.get("method"), "id": rid})
            _log.warning("replay", f"matching request id={key} {obj.get('method')} failed: "
                         f"{e!r}")
            self.send(error_response(rid, INTERNAL_ERROR,
                                     f"mcprec replay: matching failed: {e!r}"), key)
            return
        self._matched(found, rid, key, obj, started, fault)

    def _matched(self, found: Match, rid: Any, key: str, obj: dict[str, Any] | None,
                 started: float, fault: Fault | None = None, raw: bytes = b"") -> None:
        """Count a request matched (announcing the session it chose) and play its answer."""
        self._announce()
        self.stats.matched += 1
        if found.repeated:
            self.stats.repeated += 1
        self._play_request(found, rid, key, obj, started, fault, raw)

    def _inject(self, fault: Fault, obj: dict[str, Any], key: str) -> None:
        """Answer a request with a fault instead of its recorded answer."""
        rid = obj.get("id")
        effect = fault.effect
        if effect == "error":
            code, message = fault.arg
            self.send(error_response(rid, code, message, {"mcprec": "fault", "rule": fault.text}),
                      key)
        elif effect == "tool-error":
            self.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": fault.arg}], "isError": True}}), key)
        elif effect == "http":
            self.status_only[key] = fault.arg
            self.send(b"", key)
        elif effect == "disconnect":
            self._disconnect(key)
        # drop: nothing, ever; the client's own timeout must fire

    def _disconnect(self, key: str, cut: bool = True) -> None:
        """The server goes away: stdio closes stdout and exits non-zero; HTTP cuts the
        request's response (``cut``: before its answer) and ends the client's session."""
        if self.transport == "http":
            self.gone = True
            if cut:
                self.send(b"", key)
        else:
            from .faults import DISCONNECT_EXIT

            self._end(DISCONNECT_EXIT)

    def _announce(self) -> None:
        """Say which recorded session this client got, when there was a choice to make."""
        choice = self.choice
        if choice.total < 2:
            return
        s = choice.session
        if self._announced is s:
            return
        who = f" to client {self._label}" if self._label else ""
        if self._announced is None:
            _log.info("replay", f"replaying session {s.name!r}{who} (chosen among "
                      f"{self.choice.total} recorded sessions by the client's traffic; "
                      f"{self.choice.remaining} match so far)")
        else:
            _log.info("replay", f"the client's requests match session {s.name!r} now, not "
                      f"{self._announced.name!r}; replaying it{who}")
        self._announced = s

    def _play_request(self, found: Match, rid: Any, key: str, obj: dict[str, Any] | None,
                      started: float, fault: Fault | None = None, raw: bytes = b"") -> None:
        """Play the recorded handling of ``found`` for the client's request ``obj`` (None:
        not parsed yet, ``raw`` is its text)."""
        plain = self.choice.matcher.plain(found.seq)
        if plain is not None and fault is None and self.timing is None and not self.ended:
            # one answer with nothing to wait for, from the replay plan (cassette/plan.py): as
            # below, without reading the recorded request and answer (two whole rows and a
            # search for the id in each). 5,000 small requests sent as recorded, in-process:
            # 148,800 -> 85,400 instructions a request (callgrind); 30.8 -> 10.1-11.5 µs
            text = plain[0]
            self._answered_at_once(found, key, text[:plain[1]] + wire.id_json(rid)
                                   + text[plain[2]:], plain[3], started)
            return
        req = found.request
        script = self.choice.matcher.handling(req.seq)
        if len(script) == 1 and fault is None and self.timing is None and not self.ended:
            m = script[0]
            if (m.reply_to == req.seq and m.waits_for is None and not m.http
                    and (m.kind == wire.RESPONSE or m.kind == wire.ERROR)
                    and req.method != "initialize"):
                # the usual script, one answer with nothing to wait for: what the run below
                # does with it, without building one (a _Play, a _Run, a closure; 121 -> 102
                # calls and 34.7 -> 24.9 µs of CPU per request: 5,000 tools/call answered
                # in-process from a 10,000-message cassette, medians of 9 runs)
                self._answered_at_once(found, key, _with_id(m, rid), m.t_ns, started)
                return
        answered = bool(script) and script[-1].reply_to == req.seq
        if script:
            last = script[-1]
            if last.http:
                self.modes[key] = last.http.get("content_type") or ""
                status = last.http.get("status")
                if last.http.get("synthetic") and isinstance(status, int):
                    self.statuses[key] = status
            elif len(script) > 1:
                self.modes[key] = "sse"
        play = _Play(key, req)
        for m in script:
            if m.waits_for is not None:
                cause = self._message(m.waits_for)
                if cause is not None and cause.method == CANCELLED:
                    play.expects_cancel = True
        if not answered and self._recorded_cancel(req) is not None:
            play.expects_cancel = True
        self._plays[key] = play

        def done(run: _Run) -> None:
            if not answered:
                self._unanswered(play, obj if obj is not None else wire.loads(raw), key)
            elif self._plays.get(key) is play:
                del self._plays[key]
            # what the server then sent on its own (e.g. list_changed) comes after the answer
            if not found.repeated:
                self._spawn(self._followers(req.seq), (started, req.t_ns))

        if obj is None and (wire.holds_meta(raw) or b"\\u" in raw or (
                req.method == "initialize" and not _same_bytes(raw, req))):
            obj = wire.loads(raw)  # matched by its bytes, but what follows needs it parsed
        # else: no progress token (no _meta, even escaped), the very version recorded
        token = wire.progress_token_value(obj.get("params")) if obj is not None else None
        run = _Run(script, (started, req.t_ns), rid, token, key, play, done)
        play.run = run
        if req.method == "initialize" and obj is not None:
            run.version = self._check_version(obj, req, script)
        self._runs.add(run)
        if fault is not None:
            run.fault = fault
            if fault.effect == "delay":
                assert self.faults is not None
                self._sleep(run, self._now() + fault.delay_s(self.faults.rng))
                return
            if fault.effect == "malformed":
                self.malformed.add(key)
        self._pump(run)

    def _answered_at_once(self, found: Match, key: str, answer: bytes | StoredText,
                          t_ns: int, started: float) -> None:
        """Send the one answer of a script with nothing to wait for (recorded at ``t_ns``), as
        a play registered and finished at once; then what the server sent on its own."""
        self._plays.pop(key, None)
        self._flush_stderr(t_ns)
        self.send(answer, key)
        if not found.repeated:
            followers = self._followers(found.seq)
            if followers:
                self._spawn(followers, (started, found.request.t_ns))

    def _check_version(self, obj: dict[str, Any], req: Message, script: list[Message]
                       ) -> str | None:
        """Compare the protocol version the client offers with the recorded client's: say so
        once when they differ; the version to answer with under ``rewrite``, else None."""
        offered = _param(obj, "protocolVersion")
        recorded = _param(req.json, "protocolVersion")
        if not isinstance(offered, str) or offered == recorded:
            return None
        answer = script[-1].json if script and script[-1].reply_to == req.seq else None
        result = answer.get("result") if isinstance(answer, dict) else None
        answered = result.get("protocolVersion") if isinstance(result, dict) else None
        rewrite = self.protocol_version == "rewrite" and isinstance(result, dict)
        self.versions = {"offered": offered, "recorded": recorded, "recorded_answer": answered,
                         "answered": offered if rewrite else answered,
                         "policy": self.protocol_version}
        text = (f"the client offers protocol version {offered}; the recording's client offered "
                f"{recorded} and the server answered {answered}: "
                + (f"answering {offered} (--protocol-version rewrite)" if rewrite else
                   f"answering {answered} as recorded (--protocol-version rewrite answers the "
                   "client's)"))
        if text not in self._notices:
            self._notices.add(text)
            _log.warning("replay", text)
        return offered if rewrite else None

    # --- requests the recording did not answer ---------------------------------------------

    def _unanswered(self, play: _Play, obj: dict[str, Any], key: str) -> None:
        """End a request as the recording ended it (see the module's docstring)."""
        rid = obj.get("id")
        req = play.request
        if obj.get("method") == "ping":  # the documented answer; nothing else was recorded
            self._forget(play)
            self.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), key)
            return
        cancel = self._recorded_cancel(req)
        if cancel is not None:
            def after(run: _Run) -> None:
                self._forget(play)
                if not play.cancelled.arrived:
                    self._answer_unanswered(obj, key, "the client cancelled it in the "
                                                      "recording, and has not now")

            run = _Run([], None, rid, None, key, play, after)
            self._runs.add(run)
            play.run = run
            self._wait(run, play, cancel)
            return
        self._forget(play)
        s = self.session
        exit_code = s.exit_code if s.transport == "stdio" else None
        if exit_code is not None and exit_code != 0:
            self._unanswered_note(obj, f"the server exited with {exit_code}")
            self._end(exit_code)
            return
        if self._dropped_stream(req):
            self._unanswered_note(obj, "the upstream dropped the stream")
            self.send(b"", key)
            return
        if exit_code == 0:
            reason = "the server exited (code 0) without answering it"
        elif s.status != "complete":
            reason = "the session was cut off (recording incomplete)"
        else:
            reason = "the session ended before the server answered it"
        self._answer_unanswered(obj, key, reason)

    def _forget(self, play: _Play) -> None:
        if self._plays.get(play.key) is play:
            del self._plays[play.key]

    def _answer_unanswered(self, obj: dict[str, Any], key: str, reason: str) -> None:
        self._unanswered_note(obj, reason)
        self.send(error_response(
            obj.get("id"), UNANSWERED_CODE,
            f"mcprec replay: no response was recorded for this request: {reason}",
            {"mcprec": "unanswered", "reason": reason, "session": self.session.name}), key)

    def _unanswered_note(self, obj: dict[str, Any], reason: str) -> None:
        self.stats.matched -= 1
        self.stats.unanswered.append({"method": obj.get("method"), "id": obj.get("id"),
                                      "reason": reason})
        _log.warning("replay", f"request id={wire.id_text(obj.get('id'))} {obj.get('method')} "
                     "has no "
                  f"recorded response in session {self.session.name!r}: {reason}")

    def _end(self, exit_code: int | None) -> None:
        if self.ended:
            return
        self._flush_stderr(None)
        self.exit_code = exit_code
        self.ended = True
        for run in list(self._runs):
            self._stop(run)

    def _recorded_cancel(self, req: Message) -> Message | None:
        """The client's recorded cancellation of ``req``, if it cancelled it."""
        for note in self._client_notes(CANCELLED):
            if note.seq > req.seq and isinstance(note.json, dict):
                params = note.json.get("params")
                if isinstance(params, dict) and wire.id_text(params.get("requestId")) == (
                        req.rpc_id):
                    return note
        return None

    def _dropped_stream(self, req: Message) -> bool:
        """Whether the recording proxy saw the upstream drop this request's stream."""
        if self.session.transport == "stdio":
            return False
        after = req.seq
        for m in self.cassette.messages(self.session, after_seq=req.seq):
            if m.direction == wire.CLIENT_TO_SERVER:
                after = m.seq
            elif (m.follows is not None and m.follows >= after and m.http is not None
                  and m.http.get("synthetic") and "dropped" in str(m.http.get("error", ""))):
                return True
        return False

    # --- unmatched --------------------------------------------------------------------------

    def _unmatched(self, obj: dict[str, Any], e: NoMatchError) -> None:
        method = obj.get("method")
        rid = obj.get("id")
        key = wire.id_text(rid)
        if self._on_unmatched is not None and self._on_unmatched(obj, e):
            self.stats.forwarded += 1
            return
        if method in EMPTY_RESULT_METHODS:
            self.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), key)
            return
        synthesized = self._synthesize(obj)
        if synthesized is not None:
            self.send(synthesized, key)
            return
        self.stats.unmatched.append({"method": method, "id": rid, "report": e.report})
        _log.warning("replay", e.report)
        self.send(error_response(rid, NO_MATCH_CODE, f"mcprec replay: {e}",
                                 {"mcprec": "no_match", "report": e.report}), key)

    def _synthesize(self, obj: dict[str, Any]) -> bytes | None:
        """Bridge the protocol eras when the recording is of the other one.

        A stateless (2026-07-28) client probing with ``server/discover`` a recording of an
        ``initialize``-era server gets -32601 at once, as that server answered, so it falls back
        to ``initialize``. An ``initialize``-era client replaying a stateless recording gets an
        ``initialize`` result built from the recorded ``server/discover`` result.
        """
        method = obj.get("method")
        rid = obj.get("id")
        if method == "server/discover":
            return error_response(rid, -32601, "Method not found", "server/discover")
        if method != "initialize":
            return None
        recorded = self.cassette.requests(self.session, "server/discover")
        answer = self.cassette.answer(self.session, recorded[0].seq) if recorded else None
        recorded_answer = answer.json if answer is not None else None
        result = recorded_answer.get("result") if isinstance(recorded_answer, dict) else None
        if not isinstance(result, dict):
            return None
        out = {k: v for k, v in result.items()
               if k not in ("supportedVersions", "resultType", "ttlMs", "cacheScope", "_meta")}
        meta: dict[str, Any] = result["_meta"] if isinstance(result.get("_meta"), dict) else {}
        info = meta.get("io.modelcontextprotocol/serverInfo") or result.get("serverInfo")
        if info is not None:
            out["serverInfo"] = info
        out.setdefault("capabilities", {})
        # the client speaks a session-based revision: answer in the one it offered
        params: dict[str, Any] = obj["params"] if isinstance(obj.get("params"), dict) else {}
        versions = result.get("supportedVersions") or []
        out["protocolVersion"] = params.get("protocolVersion") or (
            versions[0] if versions else "2025-11-25")
        return wire.dumps({"jsonrpc": "2.0", "id": rid, "result": out})

    # --- notifications from the client ------------------------------------------------------

    def _notification(self, obj: dict[str, Any]) -> None:
        method = obj.get("method")
        if method == CANCELLED:
            params = obj.get("params") or {}
            key = wire.id_text(params.get("requestId")) if isinstance(params, dict) else ""
            play = self._plays.get(key)
            if play is not None and play.expects_cancel:
                self._arrive(play.cancelled)  # the recording goes on after the cancellation
            elif play is not None:
                self.cancel_request(key)
        elif isinstance(method, str):
            for play in list(self._plays.values()):
                self._arrive(play.notification(method))
        recorded = self._next_recorded_notification(str(method))
        if recorded is not None:
            self._spawn(self._followers(recorded.seq), (self._now(), recorded.t_ns))

    # --- playing ----------------------------------------------------------------------------

    def _spawn(self, messages: list[Message], clock: tuple[float, int] | None,
               related: str | None = None) -> None:
        """Play messages the server sent on its own."""
        if not messages:
            return
        run = _Run(messages, clock, None, None, related, None, None)
        self._runs.add(run)
        self._pump(run)

    def _pump(self, run: _Run) -> None:
        """Play ``run`` on until it ends or something holds it up."""
        while not run.stopped and run.i < len(run.messages):
            if self.ended:
                self._stop(run)
                return
            m = run.messages[run.i]
            if run.play is not None and m.waits_for is not None and run.released != run.i:
                if self._hold_for_cause(run, m):
                    return
            if self.timing is not None and run.clock is not None:
                due = run.clock[0] + max(0, m.t_ns - run.clock[1]) / 1e9 * self.timing
                if self.max_gap is not None:  # each pause capped: the clock moves per message
                    due = min(due, run.clock[0] + self.max_gap)
                if due > self._now():
                    self._sleep(run, due)
                    return
                if self.max_gap is not None:
                    run.clock = (due, max(m.t_ns, run.clock[1]))
            run.i += 1
            self._play_one(run, m)
        if run.stopped or run.i < len(run.messages):
            return
        if run.cause is not None or run.deadline is not None:
            return  # an empty script waiting (for a cancellation)
        self._finish(run)

    def _finish(self, run: _Run) -> None:
        if run in self._runs:
            self._runs.discard(run)
            self._timed.discard(run)
            if run.done is not None:
                run.done(run)

    def _stop(self, run: _Run) -> None:
        run.stopped = True
        self._runs.discard(run)
        self._timed.discard(run)
        if run.cause is not None and run in run.cause.waiters:
            run.cause.waiters.remove(run)

    def _sleep(self, run: _Run, until: float) -> None:
        run.deadline = until
        self._timed.add(run)

    def _hold_for_cause(self, run: _Run, m: Message) -> bool:
        """Hold ``m`` until the client message it waited for in the recording has come; True
        when the run must wait."""
        assert run.play is not None and m.waits_for is not None
        cause = self._message(m.waits_for)
        if cause is None or cause.direction != wire.CLIENT_TO_SERVER:
            return False
        if cause.kind in (wire.RESPONSE, wire.ERROR):
            c = run.play.answer(cause.seq)  # the server waited for it, unbounded
            if c.arrived:
                return False
            run.cause = c
            c.waiters.append(run)
            return True
        if cause.kind == wire.NOTIFICATION:
            return self._wait(run, run.play, cause)
        return False

    def _wait(self, run: _Run, play: _Play, cause: Message) -> bool:
        """Wait for the client to send what it sent then (a cancellation, a list change), but
        not forever: a client that does not send it is waiting for the answer."""
        c = play.notification(cause.method or "")
        if c.arrived:
            if not run.messages:
                self._finish(run)
            return False
        recorded_wait = max(0, cause.t_ns - play.request.t_ns) / 1e9
        limit = min(CAUSE_WAIT_MAX_S, max(CAUSE_WAIT_MIN_S, 2 * recorded_wait))
        run.cause = c
        c.waiters.append(run)

        def gave_up() -> None:
            _log.warning("replay", f"request id={play.key} {play.request.method}: the recording "
                      f"shows the client sending {cause.method} here; it has not within "
                      f"{limit:.1f} s, so replay goes on")

        run.gave_up = gave_up
        self._sleep(run, self._now() + limit)
        return True

    def _arrive(self, cause: _Cause) -> None:
        cause.arrived = True
        waiters, cause.waiters = cause.waiters, []
        for run in waiters:
            run.cause = None
            run.gave_up = None
            run.deadline = None
            self._timed.discard(run)
            self._pump(run)

    def _play_one(self, run: _Run, m: Message) -> None:
        rid, related = run.rid, run.related
        self._flush_stderr(m.t_ns)
        if m.http is not None and m.http.get("synthetic"):
            # a failure the recording proxy answered itself (e.g. 502): as it answered
            if rid is not None and m.kind in (wire.RESPONSE, wire.ERROR):
                self.send(_with_id(m, rid), related)
            return
        size = m.truncated
        if size is not None:
            self._play_truncated(m, size, rid, related)
            return
        kind = m.kind
        if kind == wire.RESPONSE or kind == wire.ERROR:
            if run.fault is not None and run.play is not None and (
                    m.reply_to == run.play.request.seq):
                self._faulty_answer(run.fault, m, rid, related)
                return
            if run.version is not None and run.play is not None and (
                    m.reply_to == run.play.request.seq):
                self.send(_with_version(m, rid, run.version), related)
                return
            self.send(_with_id(m, rid), related)
        elif kind == wire.NOTIFICATION:
            obj = m.json
            if obj.get("method") == "notifications/progress":
                if run.token is None:
                    return  # the client did not ask for progress this time
                params = obj.get("params")
                if isinstance(params, dict):
                    obj = {**obj, "params": {**params, "progressToken": run.token}}
                self.send(wire.dumps(obj), related)
            elif rid is not None and _SUBSCRIPTION_KEY in (obj.get("params") or {}).get(
                    "_meta", {}):
                params = obj["params"]
                meta = {**params["_meta"], _SUBSCRIPTION_KEY: rid}
                self.send(wire.dumps({**obj, "params": {**params, "_meta": meta}}), related)
            else:
                self.send(m.raw, related)  # as recorded, byte for byte
        elif kind == wire.REQUEST:
            play = run.play
            self.ask(m.json, related, lambda answer: self._client_answered(m, answer, play,
                                                                         related))
        else:
            self.send(m.raw, related)  # invalid / batch: as recorded

    def _faulty_answer(self, fault: Fault, m: Message, rid: Any, related: str | None) -> None:
        data = _with_id(m, rid)
        if fault.effect == "malformed":
            data = bytes(data)
            if fault.arg == "truncate":
                data = data[: max(1, len(data) // 2)]
            elif fault.arg == "not-json":
                data = b"mcprec: a malformed answer, on purpose (--fault)"
            else:  # wrong-id: an id this client never used
                data = _with_id(m, f"mcprec-wrong-id-{wire.id_text(rid)}")
        self.send(data, related)
        if fault.effect == "disconnect":  # =after: the answer went out first
            self._disconnect(related or "", cut=False)

    def _client_answered(self, m: Message, answer: dict[str, Any], play: _Play | None,
                         related: str | None) -> None:
        """The client's answer to a replayed server request: release what waited for it, then
        play what the server sent on its own after it."""
        recorded = self.cassette.answer(self.session, m.seq)
        if recorded is None:
            return
        if play is not None:
            self._arrive(play.answer(recorded.seq))
        self._spawn(self._followers(recorded.seq), None, related)

    def _play_truncated(self, m: Message, size: int, rid: Any, related: str | None) -> None:
        """A message recorded cut short (``--max-message-size``) is never sent as broken JSON:
        an answer becomes an error that says so; anything else is left out, noted."""
        what = (f"the recorded {'answer' if rid is not None else 'message'} was truncated at "
                f"{len(m.raw):,} of {size:,} bytes (--max-message-size); re-record with a "
                "larger limit to replay it")
        if m.direction == wire.SERVER_TO_CLIENT and m.reply_to is not None and rid is not None:
            self.stats.matched -= 1
            self.stats.unanswered.append({"method": m.method, "id": rid, "reason": what})
            _log.warning("replay", f"request id={wire.id_text(rid)} {m.method}: {what}")
            self.send(error_response(rid, INTERNAL_ERROR, f"mcprec replay: {what}",
                                     {"mcprec": "truncated", "size": size}), related)
        else:
            _log.warning("replay", f"seq {m.seq} {m.method or m.kind} left out: {what}")

    def _flush_stderr(self, upto_ns: int | None) -> None:
        """Replay the server's recorded stderr up to a point in the recording (None: all)."""
        if self._server_stderr is None:
            return
        sid = self.choice.session.id  # not the property: once a request
        lines = self._stderr_lines.get(sid)
        if lines is None:
            lines = self._stderr_lines[sid] = list(self.cassette.stderr(self.session))
        i = self._stderr_next.get(sid, 0)
        while i < len(lines) and (upto_ns is None or lines[i].t_ns <= upto_ns):
            self._server_stderr(lines[i].line)
            i += 1
        self._stderr_next[sid] = i

    # --- look-ups (cached per recorded session) ---------------------------------------------

    def _followers(self, seq: int) -> list[Message]:
        sid = self.choice.session.id
        anything = self._any_followers.get(sid)
        if anything is None:
            anything = self._any_followers[sid] = self.cassette.has_followers(self.session)
        if not anything:
            return []
        found = self._followers_cache.get((sid, seq))
        if found is None:
            found = self._followers_cache[(sid, seq)] = self.cassette.followers(self.session, seq)
        return found

    def _message(self, seq: int) -> Message | None:
        k = (self.session.id, seq)
        if k not in self._messages:
            self._messages[k] = self.cassette.message(self.session, seq)
        return self._messages[k]

    def _client_notes(self, method: str) -> list[Message]:
        k = (self.session.id, method)
        notes = self._notes.get(k)
        if notes is None:
            notes = self._notes[k] = self.cassette.client_messages(
                self.session, wire.NOTIFICATION, method)
        return notes

    def _next_recorded_notification(self, method: str) -> Message | None:
        notes = self._client_notes(method)
        i = self._notes_next.get(method, 0)
        if i >= len(notes):
            return None
        self._notes_next[method] = i + 1
        return notes[i]

    # --- the report -------------------------------------------------------------------------

    def unplayed(self) -> list[Message]:
        if self._unplayed is not None:
            return self._unplayed
        return self.matcher.unplayed()  # type: ignore[no-any-return]

    def freeze(self) -> None:
        """Take the unplayed list now, so that ``report()`` works after the cassette closes."""
        self._unplayed = self.matcher.unplayed()

    def report(self) -> dict[str, Any]:
        """What was played and what was not (for ``--report`` and the pytest plugin)."""
        return {
            "session": self.session.name,
            "requests": self.stats.requests,
            "matched": self.stats.matched,
            "repeated": self.stats.repeated,
            "forwarded": self.stats.forwarded,
            "unmatched": self.stats.unmatched,
            "unanswered": self.stats.unanswered,
            "unplayed": [{"seq": m.seq, "method": m.method} for m in self.unplayed()],
            **({"faults": self.faults.report()} if self.faults is not None else {}),
            **({"protocol_version": self.versions} if self.versions is not None else {}),
        }


def _same_bytes(raw: bytes, req: Message) -> bool:
    """Whether ``raw`` is the recorded request ``req`` but for its id."""
    cut, recorded = wire.id_cut(raw), wire.id_cut(req.raw)
    return cut is not None and recorded is not None and cut[0] == recorded[0]


def _with_id(m: Message, rid: Any) -> bytes | StoredText:
    """The recorded answer ``m`` with the client's id, every other byte as recorded (spliced
    where the id is found without parsing: a 50 MB answer 188 -> 33 ms, a small one 1.5 ->
    0.9 µs; else parsed and rebuilt, its numbers exactly as recorded). A large answer
    (``StoredMessage``) whose id is found from its first and last bytes is not read here: it
    comes as its ``StoredText`` with the id replaced, read as it is sent."""
    if type(m) is StoredMessage:
        streamed = _stored_with_id(m, rid)
        if streamed is not None:
            return streamed
    spliced = wire.with_id(m.raw, rid)
    return spliced if spliced is not None else wire.dumps({**m.json, "id": rid})


def _stored_with_id(m: StoredMessage, rid: Any) -> StoredText | None:
    """``m``'s text in the cassette with ``rid`` where ``wire.with_id`` would put it, found from
    its head (and tail); None where Python cannot read it in pieces, or the head and tail do not
    say where the id is (``wire.id_span``)."""
    text = m.text()
    if text is None:
        return None
    size = m.size
    span = wire.id_span(text.read(0, wire.ID_HEAD), size, lambda n: text.read(size - n, n))
    if span is None:
        text.close()
        return None
    return text.replace(*span, wire.dumps(rid))


def _with_version(m: Message, rid: Any, version: str) -> bytes:
    """The recorded ``initialize`` answer with the client's id and ``version`` in its result."""
    return wire.dumps({**m.json, "id": rid, "result": {**m.json["result"],
                                                       "protocolVersion": version}})


def _param(obj: Any, name: str) -> Any:
    params = obj.get("params") if isinstance(obj, dict) else None
    return params.get(name) if isinstance(params, dict) else None


def check_replayable(cassette: Cassette, session: Session) -> None:
    """Refuse sessions with nothing to replay, with a message that says so."""
    if cassette.has_requests(session):
        return
    if not cassette.has_messages(session):
        raise ReplayError(
            f"session {session.name!r} in {cassette.path} recorded no messages; nothing to replay "
            "(record it again, or pick another with --session)"
        )
    raise ReplayError(
        f"session {session.name!r} in {cassette.path} holds no client requests to answer"
    )


def candidates(cassette: Cassette, session: str | None) -> list[Session]:
    """The recorded sessions a replay may serve: the one named, or every replayable session
    (verify runs left out), the latest first. Raises the usual errors when there is none."""
    if session is not None:
        s = cassette.session(session, stats=False)
        check_replayable(cassette, s)
        return [s]
    every = cassette.sessions_latest_first(stats=False)
    references = [s for s in every if "verify_of" not in s.tags]
    found = [s for s in (references or every) if cassette.has_requests(s)]
    if not found:
        check_replayable(cassette, cassette.session(None, stats=False))  # the one-line reason
    return found
