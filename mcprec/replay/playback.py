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

    from ..faults.rules import Fault, Faults  # faults are imported only by a replay given some

from .. import _log, wire
from ..cassette import Cassette, Message, Session
from ..cassette.models import StoredText
from ..errors import NoMatchError, ReplayError, UsageError
from ..matching import METHOD_ONLY, Match, MatchOptions
from .choose import SessionChoice
from .ending import Ending
from .era import Era, Refusal
from .refs import References
from .model import (
    CANCELLED, EMPTY_RESULT_METHODS, INTERNAL_ERROR, NO_MATCH_CODE, PROTOCOL_VERSION_POLICIES,
    UNANSWERED_CODE, Outgoing, Play, ReplayStats, Run, Unmatched, error_response, param_of,
    same_bytes, with_id,
)

__all__ = ["CANCELLED", "EMPTY_RESULT_METHODS", "INTERNAL_ERROR", "NO_MATCH_CODE",
           "UNANSWERED_CODE", "Outgoing", "Playback", "ReplayStats", "Unmatched", "candidates",
           "check_replayable", "error_response"]


TASK_ANSWER_LAG = 0.005
"""Seconds a ``tasks/result`` answer waits after the task's terminal status is due."""

class Playback(Ending):
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
        self.era = Era(s.protocol_version for s in sessions)
        """The revisions the recording speaks: requests of a stateless one are checked as a
        server of it checks them (``era.py``)."""
        self.refused: list[dict[str, Any]] = []
        """Requests refused as a server of the recorded revision refuses them."""
        self.other_era: dict[str, Any] | None = None
        """The client speaks another era than the recording: its revision and the recorded."""
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
        self._breaks: list[tuple[int, bool]] = []  # where _out splits into writes (drain?)
        self._out_t: int | None = None  # the recorded time of the last message in _out
        self._after_note = False  # the last message in _out is not an answer
        self._runs: set[Run] = set()  # runs not finished
        self._timed: set[Run] = set()  # runs with a deadline
        self._plays: dict[str, Play] = {}
        self._asked: dict[str, Callable[[dict[str, Any]], None]] = {}  # fresh id -> on answer
        self._next_id = 0
        self._refs = References()
        self._tasks: Any = None  # tasks.Tasks: the recording polls a task
        self._task_check = 2  # matched requests until the recording is looked at for tasks
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
    def _redactor(self) -> Any:
        if self._redact is None:
            from ..redact import default_redactor

            self._redact = default_redactor()
        return self._redact
    # --- the driver's side ------------------------------------------------------------------

    def start(self) -> None:
        """Play what the server sent before the client said anything (banners, early notices)."""
        self._spawn(self._followers(-1), None)

    def take(self) -> list[Outgoing]:
        """What to send to the client now, in order."""
        out, self._out = self._out, []
        if self._breaks:  # the writes are not asked for (take_writes): one
            self._breaks = []
        self._after_note = False
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
            if self.era and self.transport != "http":  # HTTP checks with the headers
                refusal = self.refuse(c.obj)
                if refusal is not None:
                    self.send(refusal.answer(c.obj["id"]), wire.id_text(c.obj["id"]))
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
        if self.era.stateless:  # a request of the stateless revision: the connection is
            self.era.pinned = True
        self._matched(found, rid, wire.id_text(rid), None, started, raw=raw)
        return True
    def refuse(self, obj: dict[str, Any], headers: dict[str, str] | None = None
               ) -> Refusal | None:
        """How a server of the recorded revision refuses the request ``obj`` (``era.py``),
        noted for the report; None when it answers it."""
        refusal = self.era.check(obj, headers)
        if refusal is not None:
            self.note_refusal(obj, refusal)
        return refusal

    def note_refusal(self, obj: dict[str, Any], refusal: Refusal) -> None:
        """Count a refused request for the report; say once why a client of another era is."""
        self.stats.requests += 1
        self.refused.append({"method": obj.get("method"), "id": obj.get("id"),
                             "code": refusal.code, "status": refusal.status,
                             "reason": refusal.reason})
        if not refusal.other_era:
            return
        data = refusal.data if isinstance(refusal.data, dict) else {}
        self.other_era = {"client": data.get("requested"), "recorded": self.era.recorded}
        text = (f"the client speaks protocol revision {data.get('requested')}, the recording "
                f"{', '.join(self.era.recorded)}: its requests get -32022 naming the recorded "
                "revision (record the client against a server of its revision)")
        if text not in self._notices:
            self._notices.add(text)
            _log.warning("replay", text)

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
        fault = None
        if self.faults is not None:
            fault = self.faults.pick(obj)
            if self.faults.announce is not None:
                from .inject import announce

                announce(self, key)
        if fault is not None and fault.replaces:
            with contextlib.suppress(Exception):  # the playback position moves on as it would
                self.choice.match(match_obj, has_meta=has_meta)
            from .inject import inject  # faults are imported only when given

            inject(self, fault, obj, key)
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
        if self._task_check:  # past the handshake: does the recording poll a task?
            self._task_check -= 1
            if not self._task_check and self.cassette.requests(self.session, "tasks/get"):
                from .tasks import Tasks

                self._tasks = Tasks(self.cassette, self.session)
        if self._tasks is not None and fault is None and self._task_state(
                found, rid, key, obj, raw, started):
            return
        self._play_request(found, rid, key, obj, started, fault, raw)

    def _task_state(self, found: Match, rid: Any, key: str, obj: dict[str, Any] | None,
                    raw: bytes, started: float) -> bool:
        """A request that created a task starts its timeline (its status notifications play
        at their recorded offsets, on the stream of that request while it is open); a
        ``tasks/get`` is answered from the timeline; a ``tasks/result`` (which blocks until the
        task ends) is answered once the timeline reaches its terminal status (True: handled)."""
        tasks = self._tasks
        pace = self.timing if self.timing is not None else 1.0
        if found.seq in tasks.creations:
            for line, notes in tasks.created(found.seq, started):
                if notes:
                    run = Run(notes, (started, line.created.t_ns), None, None, key, None, None)
                    run.pace = pace
                    self._runs.add(run)
                    self._pump(run)
            return False
        if found.seq in tasks.results:
            params = obj if obj is not None else wire.loads(raw)
            due = tasks.ends_at(param_of(params, "taskId"), pace)
            if due is None or due <= self._now():
                return False
            # just after the terminal status notification, which the live server sends first:
            # at the same deadline, which of the two went first would be chance
            self._play_request(found, rid, key, obj, started, raw=raw, hold=due + TASK_ANSWER_LAG)
            return True
        if found.seq not in tasks.gets:
            return False
        task = tasks.status(param_of(obj if obj is not None else wire.loads(raw), "taskId"),
                            self._now(), pace)
        if task is None:
            return False
        self.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": task}), key)
        return True

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
                      started: float, fault: Fault | None = None, raw: bytes = b"",
                      hold: float | None = None) -> None:
        """Play the recorded handling of ``found`` for the client's request ``obj`` (None:
        not parsed yet, ``raw`` is its text); ``hold``: not before that ``clock()`` time."""
        plain = self.choice.matcher.plain(found.seq)
        if plain is not None and fault is None and self.timing is None and not self.ended \
                and hold is None:
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
        if len(script) == 1 and fault is None and self.timing is None and not self.ended \
                and hold is None:
            m = script[0]
            if (m.reply_to == req.seq and m.waits_for is None and not m.http
                    and (m.kind == wire.RESPONSE or m.kind == wire.ERROR)
                    and req.method != "initialize"):
                # the usual script, one answer with nothing to wait for: what the run below
                # does with it, without building one (a Play, a Run, a closure; 121 -> 102
                # calls and 34.7 -> 24.9 µs of CPU per request: 5,000 tools/call answered
                # in-process from a 10,000-message cassette, medians of 9 runs)
                self._answered_at_once(found, key, with_id(m, rid), m.t_ns, started)
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
        play = Play(key, req)
        for m in script:
            if m.waits_for is not None:
                cause = self._message(m.waits_for)
                if cause is not None and cause.method == CANCELLED:
                    play.expects_cancel = True
        if not answered and self._recorded_cancel(req) is not None:
            play.expects_cancel = True
        self._plays[key] = play

        def done(run: Run) -> None:
            if not answered:
                self._unanswered(play, obj if obj is not None else wire.loads(raw), key)
            elif self._plays.get(key) is play:
                del self._plays[key]
            # what the server then sent on its own (e.g. list_changed) comes after the answer
            if not found.repeated:
                self._spawn(self._followers(req.seq), (started, req.t_ns))

        if obj is None and (wire.holds_meta(raw) or b"\\u" in raw or (
                req.method == "initialize" and not same_bytes(raw, req))):
            obj = wire.loads(raw)  # matched by its bytes, but what follows needs it parsed
        # else: no progress token (no _meta, even escaped), the very version recorded
        token = wire.progress_token_value(obj.get("params")) if obj is not None else None
        self._refs.request(req, rid, key, token)
        run = Run(script, (started, req.t_ns), rid, token, key, play, done)
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
        if hold is not None:
            self._sleep(run, hold)
            return
        self._pump(run)

    def _answered_at_once(self, found: Match, key: str, answer: bytes | StoredText,
                          t_ns: int, started: float) -> None:
        """Send the one answer of a script with nothing to wait for (recorded at ``t_ns``), as
        a play registered and finished at once; then what the server sent on its own."""
        self._plays.pop(key, None)
        self._flush_stderr(t_ns)
        if self._out:
            self._boundary(t_ns, True)
        self.send(answer, key)
        if not found.repeated:
            followers = self._followers(found.seq)
            if followers:
                self._spawn(followers, (started, found.request.t_ns))

    def _check_version(self, obj: dict[str, Any], req: Message, script: list[Message]
                       ) -> str | None:
        """Compare the protocol version the client offers with the recorded client's: say so
        once when they differ; the version to answer with under ``rewrite``, else None."""
        offered = param_of(obj, "protocolVersion")
        recorded = param_of(req.json, "protocolVersion")
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
            **({"refused": self.refused} if self.refused else {}),
            **({"other_era": self.other_era} if self.other_era is not None else {}),
            **({"tasks_unfinished": self._tasks.unfinished}
               if self._tasks is not None and self._tasks.unfinished else {}),
        }


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
