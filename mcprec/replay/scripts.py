"""Playing recorded scripts: the messages a run sends, in recorded order, what holds them up
(``--timing``, a client message the recording shows being waited for), and the look-ups they
need, cached per recorded session. ``Playback`` (``playback.py``) builds on this.
"""

from __future__ import annotations

from collections.abc import Callable
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..cassette import Cassette, Session
    from .choose import SessionChoice
    from ..faults.rules import Faults
    from .model import ReplayStats
    from .refs import References

from .. import _log, wire
from ..cassette import Message
from ..cassette.models import StoredText
from .model import (
    CAUSE_WAIT_MAX_S, CAUSE_WAIT_MIN_S, INTERNAL_ERROR, Cause,
    Outgoing, Play, Run, error_response, with_id, with_version,
)


class Scripts:
    """The running of scripts; the state is set up by ``Playback.__init__``."""

    cassette: Cassette
    choice: SessionChoice
    timing: float | None
    max_gap: float | None
    stats: ReplayStats
    faults: Faults | None
    ended: bool
    _now: Callable[[], float]
    _server_stderr: Callable[[str], None] | None
    _out: list[Outgoing]
    _breaks: list[tuple[int, bool]]
    _out_t: int | None
    _after_note: bool
    _runs: set[Run]
    _timed: set[Run]
    _plays: dict[str, Play]
    _asked: dict[str, Callable[[dict[str, Any]], None]]
    _next_id: int
    _refs: References
    _tasks: Any  # tasks.Tasks, once a recording that polls a task is played
    _notes: dict[tuple[int, str], list[Message]]
    _notes_next: dict[str, int]
    _followers_cache: dict[tuple[int, int], list[Message]]
    _any_followers: dict[int, bool]
    _messages: dict[tuple[int, int], Message | None]
    _stderr_lines: dict[int, list[Any]]
    _stderr_next: dict[int, int]

    @property
    def session(self) -> Session:
        """The recorded session being played (with several candidates: the current choice)."""
        return self.choice.session

    @property
    def matcher(self) -> Any:
        return self.choice.matcher
    def send(self, data: bytes | StoredText, related: str | None) -> None:
        """Queue a message for the client (drivers and the live fallback use this too)."""
        self._out.append((data, related))

    def ask(self, obj: dict[str, Any], related: str | None,
            on_answer: Callable[[dict[str, Any]], None]) -> None:
        """Send a server-to-client request with a fresh id; ``on_answer`` gets the client's."""
        self._next_id += 1
        self._asked[wire.id_text(self._next_id)] = on_answer
        if "id" in obj:  # what names it by its recorded id names this one
            self._refs.asked[wire.id_text(obj["id"])] = self._next_id
        self.send(wire.dumps({**obj, "id": self._next_id}), related)

    # --- playing ----------------------------------------------------------------------------

    def _spawn(self, messages: list[Message], clock: tuple[float, int] | None,
               related: str | None = None) -> None:
        """Play messages the server sent on its own."""
        if not messages:
            return
        run = Run(messages, clock, None, None, related, None, None)
        self._runs.add(run)
        self._pump(run)

    def _pump(self, run: Run) -> None:
        """Play ``run`` on until it ends or something holds it up."""
        while not run.stopped and run.i < len(run.messages):
            if self.ended:
                self._stop(run)
                return
            m = run.messages[run.i]
            if run.play is not None and m.waits_for is not None and run.released != run.i:
                if self._hold_for_cause(run, m):
                    return
            timing = self.timing if run.pace is None else run.pace
            if timing is not None and run.clock is not None:
                due = run.clock[0] + max(0, m.t_ns - run.clock[1]) / 1e9 * timing
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

    def _finish(self, run: Run) -> None:
        if run in self._runs:
            self._runs.discard(run)
            self._timed.discard(run)
            if run.done is not None:
                run.done(run)

    def _stop(self, run: Run) -> None:
        run.stopped = True
        self._runs.discard(run)
        self._timed.discard(run)
        if run.cause is not None and run in run.cause.waiters:
            run.cause.waiters.remove(run)

    def _sleep(self, run: Run, until: float) -> None:
        run.deadline = until
        self._timed.add(run)

    def _hold_for_cause(self, run: Run, m: Message) -> bool:
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

    def _wait(self, run: Run, play: Play, cause: Message) -> bool:
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

    def _arrive(self, cause: Cause) -> None:
        cause.arrived = True
        waiters, cause.waiters = cause.waiters, []
        for run in waiters:
            run.cause = None
            run.gave_up = None
            run.deadline = None
            self._timed.discard(run)
            self._pump(run)

    def _boundary(self, t_ns: int, answer: bool) -> None:
        """Where the message about to be queued (recorded at ``t_ns``) starts a write of its
        own: the server wrote it apart from the one before (another time), or it is an answer
        after a notification or a request (the client must have read those first)."""
        if self._out:
            if answer and self._after_note:
                self._breaks.append((len(self._out), True))
            elif t_ns != self._out_t:
                self._breaks.append((len(self._out), False))
        self._out_t = t_ns
        self._after_note = not answer

    def take_writes(self) -> list[tuple[bool, list[Outgoing]]]:
        """What to send to the client now, as the writes the recorded server made:
        ``(drain, messages)``, where ``drain`` asks for the client to have read the writes before
        (an answer after the notifications that came before it)."""
        out, breaks = self._out, self._breaks
        self._out, self._after_note = [], False
        if not breaks:
            return [(False, out)] if out else []
        self._breaks = []
        writes: list[tuple[bool, list[Outgoing]]] = []
        start, drain = 0, False
        for i, then_drain in breaks:
            writes.append((drain, out[start:i]))
            start, drain = i, then_drain
        writes.append((drain, out[start:]))
        return writes

    def _play_one(self, run: Run, m: Message) -> None:
        rid, related = run.rid, run.related
        self._boundary(m.t_ns, m.kind == wire.RESPONSE or m.kind == wire.ERROR)
        self._flush_stderr(m.t_ns)
        if m.http is not None and m.http.get("synthetic"):
            # a failure the recording proxy answered itself (e.g. 502): as it answered
            if rid is not None and m.kind in (wire.RESPONSE, wire.ERROR):
                self.send(with_id(m, rid), related)
            return
        size = m.truncated
        if size is not None:
            self._play_truncated(m, size, rid, related)
            return
        kind = m.kind
        if kind == wire.RESPONSE or kind == wire.ERROR:
            if run.fault is not None and run.play is not None and (
                    m.reply_to == run.play.request.seq):
                from .inject import faulty_answer  # faults are imported only when given
                from .playback import Playback

                assert isinstance(self, Playback)
                faulty_answer(self, run.fault, m, rid, related, run.play.request)
                return
            if run.version is not None and run.play is not None and (
                    m.reply_to == run.play.request.seq):
                self.send(with_version(m, rid, run.version), related)
                return
            if run.play is not None and run.play.request.method == "subscriptions/listen" and (
                    m.reply_to == run.play.request.seq):  # its graceful close names it
                answer = bytes(with_id(m, rid))
                live = self._refs.rewrite(answer, wire.loads(answer), related)
                self.send(*(live or (answer, related)))
                return
            self.send(with_id(m, rid), related)
        elif kind == wire.NOTIFICATION:
            if self._tasks is not None and m.method == "notifications/tasks/status" and (
                    not self._tasks.told(m)):
                return  # the client was told this status, or a later one, already
            obj = m.json
            if obj.get("method") == "notifications/progress":
                data, to = self._refs.progress(obj, run.token, related)
                if data is not None:  # else the client did not ask for progress this time
                    self.send(data, to)
                return
            live = self._refs.rewrite(m.raw, obj, related)
            if live is not None:  # it names a request by its recorded id: the live one now
                self.send(*live)
            else:
                self.send(m.raw, related)  # as recorded, byte for byte
        elif kind == wire.REQUEST:
            play = run.play
            self.ask(m.json, related, lambda answer: self._client_answered(m, answer, play,
                                                                         related))
        else:
            self.send(m.raw, related)  # invalid / batch: as recorded

    def _client_answered(self, m: Message, answer: dict[str, Any], play: Play | None,
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

