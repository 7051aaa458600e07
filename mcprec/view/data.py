"""The JSON of the view: what each API call answers, for the live page and the HTML file alike.

``ViewData`` wraps one cassette opened read-only. Every answer is bounded: a page of the
timeline is at most ``PAGE_MAX`` entries, a message's text at most ``TEXT_MAX`` bytes, a search
call scans at most ``SEARCH_BUDGET`` rows. Whatever ``mcprec scan`` would flag (a token, a
secret-named key) is marked with ``secrets``: the page shows it only after a warning, and the
HTML file leaves it out (``withhold``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from .. import __version__
from ..cassette import Cassette, Session
from ..cassette import views as q
from ..diff.engine import failure as answer_failure
from ..errors import SessionNotFoundError, UsageError
from ..redact import Redactor

PAGE_MAX = 500
"""Entries in one page of the timeline."""
DURING_MAX = 500
"""Messages listed inside one request (the rest are counted)."""
SMALL = 64 * 1024
"""A message this small is read whole for its label; a larger one only shows its size."""
TEXT_MAX = 2 * 1024 * 1024
"""The detail pane shows this much of a message (the rest through ``/raw``)."""
SCAN_MAX = 1024 * 1024
"""A message up to this size is checked for secrets whole; a larger one in what is shown."""
SEARCH_LIMIT = 50
SEARCH_BUDGET = 200_000

DIRS = {"client_to_server": "c2s", "server_to_client": "s2c"}


def _text(raw: bytes) -> tuple[str, bool]:
    """The message as text, and whether it was valid UTF-8."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), False


def _json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _short(value: Any, width: int = 60) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # an integer past 64 bits
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def label(method: str | None, obj: Any) -> str:
    """What a row says after the method: the tool, prompt or resource, progress, a log line."""
    params = obj.get("params") if isinstance(obj, dict) else None
    if not isinstance(params, dict):
        return ""
    if method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
        args = params.get("arguments")
        return params["name"] + (f" {_short(args)}" if args else "")
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe",
                  "notifications/resources/updated") and isinstance(params.get("uri"), str):
        return params["uri"]
    if method == "notifications/progress":
        done, total = params.get("progress"), params.get("total")
        text = f"{done}" + (f"/{total}" if total is not None else "")
        return text + (f" {params['message']}" if isinstance(params.get("message"), str) else "")
    if method == "notifications/message":
        return f"{params.get('level', '')}: {_short(params.get('data'))}"
    if method == "notifications/cancelled":
        return f"request {params.get('requestId')}" + (
            f": {params['reason']}" if isinstance(params.get("reason"), str) else "")
    return ""


def failure(kind: str, obj: Any) -> str | None:
    """What went wrong in an answer (as the diff says it): a JSON-RPC error, or a tool result
    with ``isError``; "error" for an error that is not JSON."""
    if not isinstance(obj, dict):
        return "error" if kind == "error" else None
    return answer_failure(obj)


def status(kind: str, answer_kind: str | None, answer: Any, *, cancelled: bool = False,
           recording: bool = False) -> tuple[str, int | None]:
    """A request's status, as the timeline's status column says it: ``ok``, ``error`` (with
    the JSON-RPC error's code), ``isError`` (a tool result that failed), ``cancelled`` or ``no
    answer`` (``pending`` while the session is still being recorded); "" for other messages."""
    if kind == "error":
        return "error", _code(answer)
    if kind != "request":
        return "", None
    if answer_kind is None:
        return ("cancelled" if cancelled else "pending" if recording else "no answer"), None
    if answer_kind == "error":
        return "error", _code(answer)
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict) and result.get("isError") is True:
        return "isError", None
    return "ok", None


def _code(obj: Any) -> int | None:
    error = obj.get("error") if isinstance(obj, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


FILTER_FIELDS = ("method", "tool", "status", "kind", "dir")
_FILTER_TERM = re.compile(r'(?:(\w+):)?(?:"((?:[^"\\]|\\.)*)"(?=\s|$)|(\S+))')


def parse_filter(text: str) -> tuple[dict[str, str], list[str]]:
    """The timeline filter's fields (``method:``, ``tool:``, ``status:``, ``kind:``, ``dir:``)
    and its words, lower-cased (the grammar of search, with other fields)."""
    fields: dict[str, str] = {}
    words: list[str] = []
    for m in _FILTER_TERM.finditer(text):
        name, quoted, bare = m.group(1), m.group(2), m.group(3)
        value = quoted.replace('\\"', '"') if quoted is not None else bare
        if name is not None and name.lower() in FILTER_FIELDS:
            fields[name.lower()] = value.lower()
        elif value:
            words.append((m.group(0) if name is not None and quoted is None else value).lower())
    return fields, words


def matches_filter(fields: dict[str, str], words: list[str], entry: dict[str, Any],
                   texts: list[str]) -> bool:
    """Whether a timeline entry passes the filter: every field and every word (any case) in its
    method, label, status or ``texts`` (the message's text, its answer's, a stderr line)."""
    stderr = entry.get("type") == "stderr"
    method = "" if stderr else (entry.get("method") or "").lower()
    st = "" if stderr else (entry.get("status") or "").lower()
    code = entry.get("code")
    for name, want in fields.items():
        if name == "method":
            if stderr or not (method.startswith(want[:-1]) if want.endswith("*") else want in method):
                return False
        elif name == "tool":
            if stderr or (entry.get("tool") or "").lower() != want:
                return False
        elif name == "status":
            ok = (st == want or (want == "error" and st == "iserror")
                  or (want in ("noanswer", "no-answer") and st == "no answer")
                  or (code is not None and want == str(code)))
            if not ok:
                return False
        elif name == "kind":
            if ("stderr" if stderr else entry.get("kind")) != want:
                return False
        elif name == "dir":
            d = {"client": "c2s", "server": "s2c"}.get(want, want)
            if stderr or entry.get("dir") != d:
                return False
    if not words:
        return True
    hay = "\n".join([method, (entry.get("label") or "").lower(), st,
                      "" if code is None else str(code), *(t.lower() for t in texts)])
    return all(w in hay for w in words)


def _texts(p: q.Page, e: int) -> list[str]:
    """What the filter's words are looked for in: a stderr line; a message's text and its
    answer's (when small enough to have been read)."""
    if e < 0:
        return [p.stderr[-1 - e][1]]
    b = p.messages[e]
    a = p.answers.get(b.seq)
    return [r.decode("utf-8", "replace") for r in (b.raw, a.raw if a else None) if r is not None]


def _guarded(said: str | None, secrets: list[str]) -> str | None:
    """``error -32000: "token ghp_..."`` without its words when they look like a secret."""
    return said.split(":")[0] if said and secrets else said


class ViewData:
    """The view's answers over one read-only cassette. ``withhold``: leave out what looks like
    a secret instead of marking it (for a file that will be shared)."""

    def __init__(self, cassette: Cassette, redactor: Redactor, *, withhold: bool = False,
                 reopen: Callable[[], Cassette] | None = None) -> None:
        self.cassette = cassette
        self.redactor = redactor
        self.withhold = withhold
        self.reopen = reopen
        """Another read-only connection to the cassette: with it, a session's outline is built
        in a thread of its own while the first page is served from the session's head."""
        self._outlines: dict[int, q.Outline] = {}
        self._building: dict[int, Future[None]] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="mcprec-view") if reopen else None
        self._diffs: dict[tuple[int, int, tuple[str, ...]], dict[str, Any]] = {}
        self._cancels: dict[int, tuple[tuple[int, int, int], dict[int, int], dict[int, int]]] = {}
        self._filters: dict[tuple[int, str], tuple[tuple[int, int, int], list[int]]] = {}
        self._lock = threading.Lock()

    # --- secrets --------------------------------------------------------------------------

    def secrets(self, raw: bytes) -> list[str]:
        return self.redactor.scan(raw)

    # --- the cassette and its sessions ----------------------------------------------------

    def cassette_info(self) -> dict[str, Any]:
        return {"path": str(self.cassette.path), "name": self.cassette.path.name,
                "format_version": q.format_version(self.cassette), "read_only": True,
                "mcprec_version": __version__}

    def sessions(self) -> dict[str, Any]:
        return {"sessions": [self._session(s, count, last) for s, count, last
                             in q.sessions(self.cassette)]}

    def session_of(self, sid: int) -> Session:
        return self.cassette.session_by_id(sid)

    def session(self, sid: int) -> dict[str, Any]:
        s = self.session_of(sid)
        out = self._session(s, *q.session_extent(self.cassette, s))
        o = self._ready(s)
        out.update(entries=len(o.entries) if o is not None else None,
                   stderr_lines=q.stderr_count(self.cassette, s))
        return out

    def _session(self, s: Session, count: int | None = None, last_ns: int | None = None
                 ) -> dict[str, Any]:
        server = s.server_info if isinstance(s.server_info, dict) else {}
        client = s.client_info if isinstance(s.client_info, dict) else {}
        out: dict[str, Any] = {
            "id": s.id, "name": s.name, "transport": s.transport, "target": s.target_label,
            "started_at": s.started_at, "ended_at": s.ended_at, "status": s.status,
            "exit_code": s.exit_code, "protocol_version": s.protocol_version,
            "server": {"name": server.get("name"), "version": server.get("version")},
            "client": {"name": client.get("name"), "version": client.get("version")},
            "server_info": s.server_info, "client_info": s.client_info,
            "server_capabilities": s.server_capabilities,
            "client_capabilities": s.client_capabilities, "instructions": s.instructions,
            "tags": s.tags, "mcprec_version": s.mcprec_version,
            "messages": s.message_count if count is None else count,
            "duration_ns": s.duration_ns if last_ns is None else last_ns,
            "lost": self.cassette.losses([s]).get(s.id),
        }
        found = self.secrets(orjson.dumps({k: out[k] for k in (
            "target", "tags", "client_info", "server_info", "instructions")}))
        out["secrets"] = found
        if found and self.withhold:
            for k in ("target", "tags", "client_info", "server_info", "instructions"):
                out[k] = None
            out["withheld"] = True
        return out

    # --- the timeline ---------------------------------------------------------------------

    def _ready(self, s: Session) -> q.Outline | None:
        """The session's whole outline when it is built (and still current); else None, and
        it is being built in the background (or, without ``reopen``, built now)."""
        with self._lock:
            o = self._outlines.get(s.id)
            if o is not None and (s.status != "recording"
                                  or q.outline_stamp(self.cassette, s) == o.stamp):
                return o
            if self._pool is None:
                o = self._outlines[s.id] = q.outline(self.cassette, s)
                return o
            job = self._building.get(s.id)
            if job is None or job.done():
                self._building[s.id] = self._pool.submit(self._build, s)
            return None

    def _build(self, s: Session) -> None:
        assert self.reopen is not None
        c = self.reopen()
        try:
            o = q.outline(c, s)
        finally:
            c.close()
        with self._lock:
            self._outlines[s.id] = o

    def _outline(self, s: Session, *, head: int | None = None) -> q.Outline:
        """The whole outline; or, while it is being built, with ``head``, the first ``head``
        entries at least (their order never changes: they are the whole outline's first)."""
        o = self._ready(s)
        if o is not None:
            return o
        if head is not None:
            return q.outline(self.cassette, s, limit=head)
        o = q.outline(self.cassette, s)
        with self._lock:
            self._outlines[s.id] = o
        return o

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def timeline(self, sid: int, start: int, count: int, *, cap: int = PAGE_MAX
                 ) -> dict[str, Any]:
        """Entries ``start`` to ``start + count`` (at most ``cap``) of the session's timeline."""
        if start < 0 or count < 0:
            raise UsageError("start and count must not be negative")
        s = self.session_of(sid)
        count = min(count, cap)
        o = self._outline(s, head=start + count)
        chosen = o.entries[start:start + count]
        p = q.page(self.cassette, s, chosen, small=SMALL)
        links = self.links(s)
        entries = [self._entry(p, e, links, s) for e in chosen]
        # total None: the outline is still being built; `known` entries are there so far
        return {"session": sid, "total": len(o.entries) if o.complete else None,
                "known": len(o.entries), "start": start, "duration_ns": o.duration_ns,
                "entries": entries}

    def links(self, s: Session) -> tuple[dict[int, int], dict[int, int]]:
        """Cancels and what they cancel: {request seq: cancel seq}, {cancel seq: request seq}."""
        stamp = q.outline_stamp(self.cassette, s)
        with self._lock:
            known = self._cancels.get(s.id)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        pairs = q.cancellations(self.cassette, s)
        cancel_of = {req: cancel for cancel, req in pairs}
        cancels = {cancel: req for cancel, req in pairs}
        with self._lock:
            self._cancels[s.id] = (stamp, cancel_of, cancels)
        return cancel_of, cancels

    def filter(self, sid: int, text: str) -> dict[str, Any]:
        """The timeline entries (their indices in the whole timeline) that pass the filter
        ``text`` (``method:``, ``tool:``, ``status:``, ``kind:``, ``dir:``, words)."""
        s = self.session_of(sid)
        fields, words = parse_filter(text)
        o = self._outline(s)
        key = (sid, text)
        with self._lock:
            known = self._filters.get(key)
        if known is not None and known[0] == o.stamp:
            indices = known[1]
        else:
            indices = []
            links = self.links(s)
            for start in range(0, len(o.entries), PAGE_MAX):
                chosen = o.entries[start:start + PAGE_MAX]
                p = q.page(self.cassette, s, chosen, small=SMALL)
                for i, e in enumerate(chosen):
                    entry = self._entry(p, e, links, s)
                    if matches_filter(fields, words, entry, _texts(p, e) if words else []):
                        indices.append(start + i)
            with self._lock:
                self._filters[key] = (o.stamp, indices)
        return {"session": sid, "filter": text, "indices": indices, "total": len(o.entries)}

    def _entry(self, p: q.Page, e: int, links: tuple[dict[int, int], dict[int, int]] | None
               = None, s: Session | None = None) -> dict[str, Any]:
        if e < 0:
            t_ns, line = p.stderr[-1 - e]
            found = self.secrets(line.encode())
            out: dict[str, Any] = {"type": "stderr", "id": -1 - e, "t": t_ns, "line": line,
                                   "secrets": found}
            if found and self.withhold:
                out["line"], out["withheld"] = None, True
            return out
        b = p.messages[e]
        return self._brief(b, p.answers.get(b.seq), p.children.get(b.seq, 0), links,
                           recording=s is not None and s.status == "recording")

    def _brief(self, b: q.Brief, answer: q.Brief | None, children: int,
               links: tuple[dict[int, int], dict[int, int]] | None = None, *,
               recording: bool = False) -> dict[str, Any]:
        """A row: what it says of the message comes from its text, so a text that looks like
        a secret gives no label and a failure without its words."""
        obj = _json(b.raw)
        found = self.secrets(b.raw) if b.raw is not None else []
        out: dict[str, Any] = {
            "type": "message", "seq": b.seq, "t": b.t_ns, "dir": DIRS.get(b.direction, "?"),
            "kind": b.kind, "method": b.method, "id": b.rpc_id, "size": b.size,
            "label": "" if found else label(b.method, obj), "children": children,
            "secrets": found,
        }
        if b.kind in ("response", "error"):
            out["failure"] = _guarded(failure(b.kind, obj), found)
            out["reply_to"] = b.reply_to
        if b.http:
            if b.http.get("synthetic"):
                out["transport_failure"] = str(b.http.get("error") or "transport failure")
            if b.http.get("truncated"):
                out["truncated"] = b.http.get("size")
            if "status" in b.http:
                out["http_status"] = b.http["status"]
        cancel_of, cancels = links if links is not None else ({}, {})
        said, code = status(b.kind, answer.kind if answer is not None else None,
                            _json(answer.raw) if answer is not None else obj,
                            cancelled=b.seq in cancel_of, recording=recording)
        out["status"] = said
        if code is not None:
            out["code"] = code
        if b.seq in cancel_of:
            out["cancel"] = cancel_of[b.seq]
        if b.seq in cancels:
            out["cancels"] = cancels[b.seq]
        if b.method in ("tools/call", "prompts/get") and b.kind == "request" and not found:
            params = obj.get("params") if isinstance(obj, dict) else None
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str):
                out["tool"] = name
        if answer is not None:
            hidden = self.secrets(answer.raw) if answer.raw is not None else []
            out["answer"] = {"seq": answer.seq, "t": answer.t_ns, "kind": answer.kind,
                             "size": answer.size,
                             "failure": _guarded(failure(answer.kind, _json(answer.raw)), hidden),
                             "latency_ns": answer.t_ns - b.t_ns, "secrets": hidden}
            if answer.http and answer.http.get("synthetic"):  # the proxy answered: no upstream
                out["answer"]["transport_failure"] = str(answer.http.get("error") or "failed")
        return out

    def during(self, sid: int, seq: int) -> dict[str, Any]:
        """What the server sent while handling request ``seq``, answers to its requests inside."""
        s = self.session_of(sid)
        found, answers, total = q.during(self.cassette, s, seq, small=SMALL, limit=DURING_MAX)
        links = self.links(s)
        return {"session": sid, "request": seq, "total": total,
                "entries": [self._brief(b, answers.get(b.seq), 0, links,
                                        recording=s.status == "recording") for b in found]}

    def locate(self, sid: int, seq: int) -> dict[str, Any]:
        """Where message ``seq`` is in the timeline: its own entry, or the entry of the request
        it belongs to (``parent``), up to two levels (an answer to a server's request)."""
        s = self.session_of(sid)
        o = self._outline(s)
        chain = [seq]
        for _ in range(3):
            try:
                return {"session": sid, "seq": seq, "index": o.entries.index(chain[-1]),
                        "chain": chain}
            except ValueError:
                full = q.message(self.cassette, s, chain[-1], limit=0)
                if full is None:
                    break
                up = full.brief.reply_to if full.brief.kind in ("response", "error") \
                    else full.brief.context_seq
                if up is None:
                    break
                chain.append(up)
        raise SessionNotFoundError(f"session #{sid} has no message {seq} in its timeline")

    # --- one message ----------------------------------------------------------------------

    def message(self, sid: int, seq: int, *, text_max: int = TEXT_MAX) -> dict[str, Any]:
        s = self.session_of(sid)
        full = q.message(self.cassette, s, seq, limit=text_max)
        if full is None:
            raise SessionNotFoundError(f"session {s.name!r} has no message {seq}")
        b = full.brief
        text, utf8 = _text(full.text)
        complete = len(full.text) >= b.size
        out = self._brief(b, None, 0, self.links(s))
        obj = _json(full.text) if complete else None
        scanned = full.text if b.size <= SCAN_MAX or not complete else full.text[:SCAN_MAX]
        found = self.secrets(scanned)
        if b.http:
            found += [k for k in self.secrets(orjson.dumps(b.http)) if k not in found]
        out.update(label="" if found else label(b.method, obj), reply_to=b.reply_to,
                   context_seq=b.context_seq, follows=full.follows, waits_for=full.waits_for,
                   http=b.http, text=text, complete=complete, utf8=utf8, secrets=found)
        if b.kind in ("response", "error"):
            out["failure"] = _guarded(failure(b.kind, obj), found)
        if b.kind == "request":
            out["answer_seq"] = q.answer_seq(self.cassette, s, seq)
            if out["answer_seq"] is not None:  # the status of the answer, not of no answer
                answer = q.message(self.cassette, s, out["answer_seq"], limit=SMALL)
                if answer is not None:
                    said, code = status("request", answer.brief.kind, _json(answer.text))
                    out["status"] = said
                    out.pop("code", None)
                    if code is not None:
                        out["code"] = code
        if found and self.withhold:
            out.update(text=None, http=None, withheld=True)
        return out

    def raw(self, sid: int, seq: int) -> bytes:
        s = self.session_of(sid)
        data = q.raw(self.cassette, s, seq)
        if data is None:
            raise SessionNotFoundError(f"session {s.name!r} has no message {seq}")
        return data

    # --- search ---------------------------------------------------------------------------

    def search(self, text: str, cursor: str | None = None, limit: int = SEARCH_LIMIT
               ) -> dict[str, Any]:
        query = q.parse_query(text)
        if query.empty:
            return {"query": text, "hits": [], "next": None, "scanned": 0}
        start = (0, -1)
        if cursor:
            try:
                sid, _, seq = cursor.partition(":")
                start = (int(sid), int(seq))
            except ValueError:
                raise UsageError(f"bad search cursor {cursor!r}; use the `next` of an answer") \
                    from None
        found = q.search(self.cassette, query, start=start, limit=max(1, min(limit, 200)),
                         budget=SEARCH_BUDGET)
        names = {s.id: s.name for s in self.cassette.sessions_latest_first(stats=False)}
        hits = []
        for h in found.hits:
            kinds = self.secrets(h.raw if h.raw is not None else h.snippet.encode())
            hits.append({
                "session": h.session_id, "session_name": names.get(h.session_id),
                "seq": h.seq, "t": h.t_ns, "dir": DIRS.get(h.direction, "?"), "kind": h.kind,
                "method": h.method, "id": h.rpc_id, "size": h.size,
                # a snippet of a message that holds a secret is never sent: open the message
                "snippet": None if kinds else h.snippet, "snippet_start": h.snippet_start,
                "secrets": kinds,
            })
        if not cursor and query.text and set(query.fields) <= {"session"}:
            hits += self._stderr_hits(query, names)
        nxt = f"{found.next[0]}:{found.next[1]}" if found.next else None
        return {"query": text, "terms": query.text, "fields": query.fields, "hits": hits,
                "next": nxt, "scanned": found.scanned}

    def _stderr_hits(self, query: q.Query, names: dict[int, str]) -> list[dict[str, Any]]:
        """stderr lines that hold the words (with the first page of a search by words)."""
        sids = sorted(sid for sid, name in names.items()
                      if "session" not in query.fields or name == query.fields["session"])
        out = []
        for sid, line_id, t_ns, line in q.search_stderr(self.cassette, query.text, sids):
            kinds = self.secrets(line.encode())
            at = line.lower().find(query.text[0].lower())
            start = max(0, at - 60)
            out.append({"type": "stderr", "session": sid, "session_name": names.get(sid),
                        "stderr_id": line_id, "seq": None, "t": t_ns, "dir": None,
                        "kind": "stderr", "method": None, "id": None, "size": len(line),
                        "snippet": None if kinds else line[start:start + 160],
                        "snippet_start": start, "secrets": kinds})
        return out

    # --- diff -----------------------------------------------------------------------------

    def diff(self, a: int, b: int, ignore: tuple[str, ...] = (),
             reopen: Callable[[], Cassette] | None = None) -> dict[str, Any]:
        """The MCP-aware diff of two sessions of this cassette (``mcprec diff``'s JSON, with
        the sessions' ids); ``reopen`` gives a connection of its own (for another thread)."""
        key = (a, b, ignore)
        cached = self._diffs.get(key)
        if cached is not None:
            return cached
        from ..diff import diff_sessions

        c = reopen() if reopen is not None else self.cassette
        try:
            sa, sb = c.session_by_id(a), c.session_by_id(b)
            result = diff_sessions(c, sa, c, sb, ignore=ignore).to_dict()
        finally:
            if reopen is not None:
                c.close()
        result["session_ids"] = {"a": a, "b": b}
        self.guard_diff(result)
        self._diffs[key] = result
        return result

    def guard_diff(self, result: dict[str, Any]) -> None:
        """Mark (or, withholding, empty) the values of a difference that look like secrets;
        an exchange's label and error quote its messages: those are cut."""
        for e in result["exchanges"]:
            if self.secrets(f"{e['label']}\n{e.get('error_detail') or ''}".encode()):
                e["label"] = f"{e['method']} (arguments hidden: they look like a secret)"
                e["error_detail"] = _guarded(e.get("error_detail"), ["secret"])
        items = [d for e in result["exchanges"] for d in e["differences"]]
        items += result["summary"]["changes"]
        for d in items:
            try:
                text = orjson.dumps([d.get("before"), d.get("after")])
            except TypeError:  # an integer past 64 bits: not a secret
                continue
            found = self.secrets(text)
            if found:
                d["secrets"] = found
                if self.withhold:
                    d["before"] = d["after"] = None
                    d["withheld"] = True
