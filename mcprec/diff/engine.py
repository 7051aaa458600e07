"""Comparing two loaded sessions exchange by exchange.

Requests are aligned as replay matches them: method + canonical params (``_meta`` dropped, key
order ignored, ``--ignore`` paths removed), the n-th identical request of A with the n-th of B;
``initialize`` and ``server/discover`` by method alone. Ids never count: answers compare on
their ``result`` or ``error``, notifications on their ``params`` (progress tokens and request ids
in them dropped), server requests on their ``params``.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Any

from .. import wire
from ..cassette import Message
from ..matching import METHOD_ONLY
from ..normalize import NONE, Normalizer
from .load import Side
from .model import CountChange, ExchangeDiff, LatencyRow, Summary
from .paths import (
    ANY, DESCEND, Path, PayloadDifference, differences, parse_path, plain, remove_paths,
)
from .paths import same as same_json
from .paths import short
from .summary import CATALOGS, HANDSHAKES

PROTOCOL_META = "io.modelcontextprotocol/"
ID_FIELDS = {"notifications/progress": "progressToken", "notifications/cancelled": "requestId"}
EXACT_CONTEXT = frozenset({"notifications/progress"})
"""Notifications tied to their request by a token; others are attributed by timing."""
COVERED = {
    **{m: ("$.result.protocolVersion", "$.result.supportedVersions", "$.result.serverInfo",
           "$.result.capabilities", "$.result.instructions") for m in HANDSHAKES},
    **{c[0]: (f"$.result.{c[1]}",) for c in CATALOGS},
}
CATEGORY_OF = {**{m: "server" for m in HANDSHAKES}, **{c[0]: c[3] for c in CATALOGS}}
Key = tuple[str, str]


class Comparer:
    """Normal forms (ignores applied) and comparisons of the messages of two sides."""

    def __init__(self, ignore: Iterable[str] = (), normalizer: Normalizer = NONE) -> None:
        self.ignore = tuple(ignore)
        self.paths: tuple[Path, ...] = tuple(parse_path(p) for p in self.ignore)
        self._request_paths = tuple(p for p in self.paths if _may_touch_requests(p))
        self._answers: dict[tuple[int, int], Any] = {}
        self.normalizer = normalizer
        """Applied to both sides' forms after the ignores (requests, answers, messages)."""

    # -- normal forms

    def request_key(self, m: Message) -> Key:
        method = m.method or ""
        if method in METHOD_ONLY:
            return (method, "")
        if not self._request_paths and not self.normalizer and m.match_key:
            return (method, m.match_key)
        params = m.json.get("params") if isinstance(m.json, dict) else None
        form = {"method": method, "params": wire.strip_meta(params or {})}
        form = self.normalizer.apply(remove_paths(form, self._request_paths))
        return (method, wire.dumps(plain(form), sort_keys=True).decode())

    def answer(self, side: Side, request: Message) -> Any:
        """``{"result": ...}`` or ``{"error": ...}`` of the request's answer; None if none."""
        cache_key = (id(side), request.seq)
        if cache_key not in self._answers:
            message = side.answers.get(request.seq)
            self._answers[cache_key] = None if message is None else self._answer_form(message.json)
        return self._answers[cache_key]

    def _answer_form(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return {"invalid": obj}
        if "error" in obj and "result" not in obj:
            form: dict[str, Any] = {"error": obj["error"]}
        else:
            form = {"result": _without_task_times(_without_protocol_meta(obj.get("result")))}
        form = remove_paths(form, self.paths) if self.paths else form
        return self.normalizer.apply(form)

    def message_form(self, m: Message) -> Any:
        """A notification's or server request's ``params`` (ids dropped, ignores applied)."""
        obj = m.json if isinstance(m.json, dict) else {}
        params = obj.get("params")
        drop = ID_FIELDS.get(m.method or "")
        if drop and isinstance(params, dict):
            params = {k: v for k, v in params.items() if k != drop}
        if m.method == TASK_STATUS:
            params = _task_without_times(params)
        form = {"params": params} if params is not None else {}
        form = remove_paths(form, self.paths) if self.paths else form
        return self.normalizer.apply(form)

    # -- comparisons

    def answer_differences(self, a: Side, ra: Message, b: Side, rb: Message) -> list[PayloadDifference]:
        ma, mb = a.answers.get(ra.seq), b.answers.get(rb.seq)
        if ma is None or mb is None or ma.raw == mb.raw:
            return []
        fa, fb = self.answer(a, ra), self.answer(b, rb)
        return [] if same_json(fa, fb) else differences(fa, fb)

    def nested(self, msgs_a: list[Message], msgs_b: list[Message],
               exchange: ExchangeDiff) -> None:
        """Compare what the server sent meanwhile: counts per method, then paired payloads."""
        if not msgs_a and not msgs_b:
            return
        for kind, target in ((wire.NOTIFICATION, exchange.notifications),
                             (wire.REQUEST, exchange.server_requests)):
            by_a = _by_method(m for m in msgs_a if m.kind == kind)
            by_b = _by_method(m for m in msgs_b if m.kind == kind)
            for method in sorted(by_a.keys() | by_b.keys()):
                la, lb = by_a.get(method, []), by_b.get(method, [])
                if len(la) != len(lb):
                    target.append(CountChange(method, len(la), len(lb)))
                prefix = "" if kind == wire.NOTIFICATION else "request "
                for i, (x, y) in enumerate(zip(la, lb), 1):
                    if x.raw == y.raw:
                        continue
                    fx, fy = self.message_form(x), self.message_form(y)
                    if not same_json(fx, fy):
                        exchange.differences.extend(
                            differences(fx, fy, where=f"{prefix}{method} #{i}"))


def _may_touch_requests(path: Path) -> bool:
    return path[0] in ("params", "method") or path[0] is ANY or path[0] is DESCEND


def _without_protocol_meta(result: Any) -> Any:
    """The result without the protocol's own ``_meta`` keys (serverInfo of 2026-07-28...): the
    summary reports those, once."""
    if not isinstance(result, dict) or not isinstance(result.get("_meta"), dict):
        return result
    meta = {k: v for k, v in result["_meta"].items() if not k.startswith(PROTOCOL_META)}
    out = {k: v for k, v in result.items() if k != "_meta"}
    if meta:
        out["_meta"] = meta
    return out


TASK_STATUS = "notifications/tasks/status"
TASK_TIMES = ("createdAt", "lastUpdatedAt")
"""When a task was created and last updated: times of the run, never compared."""


def _task_without_times(task: Any) -> Any:
    if isinstance(task, dict) and "taskId" in task and any(k in task for k in TASK_TIMES):
        return {k: v for k, v in task.items() if k not in TASK_TIMES}
    return task


def _without_task_times(result: Any) -> Any:
    """A task's result (``tasks/get``, a ``CreateTaskResult``, ``tasks/list``) without the
    tasks' times."""
    if not isinstance(result, dict):
        return result
    if "taskId" in result:
        return _task_without_times(result)
    if isinstance(result.get("task"), dict):
        return {**result, "task": _task_without_times(result["task"])}
    if isinstance(result.get("tasks"), list):
        return {**result, "tasks": [_task_without_times(t) for t in result["tasks"]]}
    return result


def last_polls(requests: list[Message]) -> list[Message]:
    """The requests without the ``tasks/get`` polls of a task that a later poll of the same
    task follows: how many polls saw it working is timing, only the last one is compared."""
    last: dict[str, int] = {}
    for i, m in enumerate(requests):
        if m.method == "tasks/get":
            params = m.json.get("params") if isinstance(m.json, dict) else None
            task = params.get("taskId") if isinstance(params, dict) else None
            if isinstance(task, str):
                last[task] = i
    if not last:
        return requests
    keep = set(last.values())
    return [m for i, m in enumerate(requests) if m.method != "tasks/get" or i in keep
            or not _polls_task(m, last)]


def keep_last_statuses(side: Side) -> None:
    """Drop from ``side`` the ``notifications/tasks/status`` of a task that a later one of the
    same task follows: how many a run sent, and to which request's time each fell, is timing;
    the last status is compared."""
    last: dict[Any, int] = {}
    everything = [*side.unsolicited, *(m for ms in side.handled.values() for m in ms)]
    for m in everything:
        if m.method == TASK_STATUS:
            task = _status_task(m)
            if task is not None and m.seq > last.get(task, -1):
                last[task] = m.seq
    if not last:
        return

    def kept(ms: list[Message]) -> list[Message]:
        return [m for m in ms if m.method != TASK_STATUS or _status_task(m) is None
                or last[_status_task(m)] == m.seq]

    side.unsolicited[:] = kept(side.unsolicited)
    for seq, ms in side.handled.items():
        side.handled[seq] = kept(ms)


def _status_task(m: Message) -> str | None:
    params = m.json.get("params") if isinstance(m.json, dict) else None
    task = params.get("taskId") if isinstance(params, dict) else None
    return task if isinstance(task, str) else None


def _polls_task(m: Message, last: dict[str, int]) -> bool:
    params = m.json.get("params") if isinstance(m.json, dict) else None
    return isinstance(params, dict) and params.get("taskId") in last


def _by_method(messages: Iterable[Message]) -> dict[str, list[Message]]:
    out: dict[str, list[Message]] = defaultdict(list)
    for m in messages:
        out[m.method or ""].append(m)
    return out


# --- alignment ------------------------------------------------------------------------------


Pair = tuple[Message | None, Message | None]


def align(a: list[Message], b: list[Message],
          key: Callable[[Message], Key]) -> list[Pair]:
    """Pair requests by key in order; one-sided ones are placed where they occurred."""
    queues: dict[Key, deque[int]] = defaultdict(deque)
    for j, m in enumerate(b):
        queues[key(m)].append(j)
    partner = [-1] * len(b)
    ordered: list[tuple[float, int, Pair]] = []
    for i, m in enumerate(a):
        q = queues.get(key(m))
        hit = q.popleft() if q else None
        if hit is not None:
            partner[hit] = i
        ordered.append((float(i), 0, (m, b[hit] if hit is not None else None)))
    last = -1.0
    for j, m in enumerate(b):
        if partner[j] >= 0:
            last = float(partner[j])
        else:
            ordered.append((last + 0.5, j, (None, m)))
    ordered.sort(key=lambda t: (t[0], t[1]))
    return [p for _, _, p in ordered]


# --- exchanges ------------------------------------------------------------------------------


def label(m: Message) -> str:
    """``tools/call forecast {"city":"Paris"}``, ``resources/read test://x``, ``ping``."""
    method = m.method or "?"
    params = m.json.get("params") if isinstance(m.json, dict) else None
    if not isinstance(params, dict) or method in METHOD_ONLY:
        return method
    params = wire.strip_meta(params)
    if method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
        args = params.get("arguments")
        return f"{method} {params['name']}" + (f" {short(args, 60)}" if args else "")
    if method == "resources/read" and isinstance(params.get("uri"), str):
        return f"{method} {params['uri']}"
    return f"{method} {short(params, 60)}" if params else method


def failure(form: Any) -> str | None:
    """What went wrong in an answer: a JSON-RPC error, or a tool result with isError."""
    if not isinstance(form, dict):
        return None
    if "error" in form:
        err = form["error"] if isinstance(form["error"], dict) else {}
        return f"error {err.get('code', '?')}: {short(err.get('message', ''), 100)}"
    result = form.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        content = result.get("content") or [{}]
        text = content[0].get("text", "") if isinstance(content[0], dict) else ""
        return f"tool error: {short(text, 100)}"
    return None


def compare_pair(cmp: Comparer, a: Side, b: Side, pair: Pair, summary: Summary) -> ExchangeDiff:
    ra, rb = pair
    if ra is None or rb is None:
        m = ra or rb
        assert m is not None
        side = a if ra is not None else b
        return ExchangeDiff(m.method or "", label(m), "only_a" if ra is not None else "only_b",
                            seq_a=ra.seq if ra else None, seq_b=rb.seq if rb else None,
                            latency_a_ms=latency_ms(a, ra), latency_b_ms=latency_ms(b, rb),
                            error_detail=failure(cmp.answer(side, m)) or "")
    ex = ExchangeDiff(ra.method or "", "", "changed", ra.seq, rb.seq,
                      latency_a_ms=latency_ms(a, ra), latency_b_ms=latency_ms(b, rb))
    has_a, has_b = ra.seq in a.answers, rb.seq in b.answers
    if has_a != has_b:
        ex.unanswered = "b" if has_a else "a"
    ex.differences = cmp.answer_differences(a, ra, b, rb)
    if ex.differences:
        fa, fb = failure(cmp.answer(a, ra)), failure(cmp.answer(b, rb))
        if (fa is None) != (fb is None):
            ex.error = "appeared" if fb else "disappeared"
            ex.error_detail = fb or fa or ""
        _fold_summarized(ex, summary)
    cmp.nested(a.handled.get(ra.seq, []), b.handled.get(rb.seq, []), ex)
    if ex.is_different:  # labels cost a parse: only for what is reported
        ex.label = label(ra)
    return ex


def _fold_summarized(ex: ExchangeDiff, summary: Summary) -> None:
    """Leave out the differences the summary shows (or that are only a reordered list)."""
    prefixes = COVERED.get(ex.method)
    if not prefixes:
        return
    covered = [d for d in ex.differences if d.where == "response" and d.path.startswith(prefixes)]
    if not covered:
        return
    ex.differences = [d for d in ex.differences if d not in covered]
    ex.summarized = any(c.category == CATEGORY_OF[ex.method] for c in summary.changes)


def latency_ms(side: Side, request: Message | None) -> float | None:
    if request is None:
        return None
    answer = side.answers.get(request.seq)
    return None if answer is None else (answer.t_ns - request.t_ns) / 1e6


def unsolicited(cmp: Comparer, a: Side, b: Side) -> ExchangeDiff:
    ex = ExchangeDiff("", "server messages outside any request", "changed")
    cmp.nested(a.unsolicited, b.unsolicited, ex)
    return ex


def reconcile_moved(exchanges: list[ExchangeDiff]) -> tuple[list[ExchangeDiff], list[CountChange]]:
    """Notifications attributed by timing that only moved between exchanges are not changes."""
    net: Counter[str] = Counter()
    moved_n: Counter[str] = Counter()
    for ex in exchanges:
        for c in (*ex.notifications, *ex.server_requests):
            net[c.method] += c.count_b - c.count_a
            moved_n[c.method] += max(0, c.count_b - c.count_a)
    timing_only = {m for m in moved_n if net[m] == 0 and m not in EXACT_CONTEXT}
    if not timing_only:
        return exchanges, []
    for ex in exchanges:
        ex.notifications = [c for c in ex.notifications if c.method not in timing_only]
        ex.server_requests = [c for c in ex.server_requests if c.method not in timing_only]
    moved = [CountChange(m, moved_n[m], moved_n[m]) for m in sorted(timing_only)]
    return [ex for ex in exchanges if ex.is_different], moved


# --- latency --------------------------------------------------------------------------------


def latency_key(m: Message) -> str:
    """Per method; tools/call and prompts/get per tool or prompt name."""
    method = m.method or "?"
    if method in ("tools/call", "prompts/get"):
        params = m.json.get("params") if isinstance(m.json, dict) else None
        name = params.get("name") if isinstance(params, dict) else None
        if isinstance(name, str):
            return f"{method} {name}"
    return method


def latencies(side: Side) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    keys: dict[tuple[str | None, str], str] = {}  # identical requests share their key
    for r in side.requests:
        ms = latency_ms(side, r)
        if ms is None:
            continue
        if r.match_key is None:
            out[latency_key(r)].append(ms)
            continue
        memo = (r.method, r.match_key)
        key = keys.get(memo)
        if key is None:
            key = keys[memo] = latency_key(r)
        out[key].append(ms)
    return out


def latency_rows(a: Side, b: Side, threshold: float, min_ms: float) -> list[LatencyRow]:
    la, lb = latencies(a), latencies(b)
    rows = []
    for key in sorted(la.keys() | lb.keys()):
        pa = statistics.median(la[key]) if la.get(key) else None
        pb = statistics.median(lb[key]) if lb.get(key) else None
        ratio = None
        if pa is not None and pb is not None:
            ratio = pb / pa if pa > 0 else (float("inf") if pb > 0 else 1.0)
        # initialize waits for the server to start: that is start-up time, not behaviour
        flagged = (ratio is not None and ratio >= threshold and key != "initialize"
                   and max(pa or 0.0, pb or 0.0) >= min_ms)
        rows.append(LatencyRow(key, len(la.get(key, ())), len(lb.get(key, ())), _r(pa), _r(pb),
                               None if ratio is None else round(ratio, 3), flagged))
    return rows


def _r(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)
