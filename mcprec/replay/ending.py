"""Where the recording has no answer: a request it never answered ends as the recording ended
it (the server exited, the client cancelled, the stream was dropped, the session was cut off),
and a request it never saw gets the live fallback, an empty result, an answer bridging the
protocol eras, or a JSON-RPC error that says why.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..errors import NoMatchError
    from .model import Unmatched

from .. import _log, wire
from ..cassette import Message
from .model import (
    CANCELLED, EMPTY_RESULT_METHODS, NO_MATCH_CODE, UNANSWERED_CODE, Play, Run, error_response,
)
from .scripts import Scripts


class Ending(Scripts):
    """Requests the recording did not answer, or never saw."""

    _on_unmatched: Unmatched | None

    def _unanswered(self, play: Play, obj: dict[str, Any], key: str) -> None:
        """End a request as the recording ended it (see the module's docstring)."""
        rid = obj.get("id")
        req = play.request
        if obj.get("method") == "ping":  # the documented answer; nothing else was recorded
            self._forget(play)
            self.send(wire.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), key)
            return
        cancel = self._recorded_cancel(req)
        if cancel is not None:
            def after(run: Run) -> None:
                self._forget(play)
                if not play.cancelled.arrived:
                    self._answer_unanswered(obj, key, "the client cancelled it in the "
                                                      "recording, and has not now")

            run = Run([], None, rid, None, key, play, after)
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

    def _forget(self, play: Play) -> None:
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

