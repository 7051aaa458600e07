"""Matching incoming requests to recorded ones.

Default rule: same method and same canonical params (key order ignored, ``_meta`` ignored);
identical requests are answered in recorded order. ``initialize`` and ``server/discover`` match
on the method alone: they are answered from the recording whatever the client offers.

Options: ignore JSON paths, strict order, custom matcher callables, and what to do when the
recorded answers for a request run out (repeat the last one, or fail). When nothing matches,
``NoMatchError.report`` lists the closest recorded requests and exactly how they differ.

Look-ups are lazy and indexed: nothing is loaded at start-up; a request costs one indexed query
on (session, method, match_key) the first time its key is seen.
"""

from __future__ import annotations

import os

import collections
from collections.abc import Callable, Sequence

from ._lazy import orjson
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, NamedTuple


from . import wire
from ._plain import Plain
from .cassette import Cassette, Message, Session
from .cassette.models import MESSAGE_FIELDS, message_from_row
from .errors import NoMatchError
# jsonpath and normalize are imported where --ignore, --normalize, custom matchers or a report
# of an unmatched request need them: a plain replay never does, and their imports (regular
# expressions, dataclasses) were 2.2-2.7 ms of its start-up (importtime, medians of 7 runs)

CustomMatcher = Callable[[dict[str, "Any"], dict[str, "Any"]], bool]
"""``matcher(incoming_request, recorded_request) -> bool``; both are full JSON-RPC objects."""

METHOD_ONLY = frozenset({"initialize", "server/discover"})
# columns of a row, in MESSAGE_FIELDS order
_SEQ, _METHOD, _CONTEXT, _KEY, _RAW = (MESSAGE_FIELDS.index(f) for f in (
    "seq", "method", "context_seq", "match_key", "raw"))
WINDOW = 2_000
"""Recorded traffic is read ahead of the playback position this many messages at a time (two
range reads), since clients mostly replay in recorded order: a request found in a window costs
no query of its own, and memory stays flat whatever the cassette's size."""
CUT_BYTES = 16 * 1024 * 1024
"""The texts of recorded requests that ``match_bytes`` keeps at most (the oldest read go first:
a request not found by its bytes is parsed and keyed, as any other), so that memory stays
flat however long the session."""
FIRST_WINDOW = 256
"""The first window is this small, each next one twice the last, up to ``WINDOW``: the first
request after ``initialize`` waits for the first window (a 5,000-request session: 10 ms with a
window of 2,000 at once, in-process)."""


RERECORD = "--mode new_episodes, or --mode all"
"""How a no-match report says to re-record; under pytest the plugin says it with its own
option (``RERECORD_PYTEST``). ``once`` is not one: it never records over a session."""
RERECORD_PYTEST = "pytest --mcprec-mode=new_episodes, or --mcprec-mode=all"
CONTEXT_ENV = "MCPREC_CONTEXT"
"""Set to ``pytest`` by the plugin for the replays it starts."""

class MatchOptions(Plain):
    """How incoming requests are matched to recorded ones (a ``Plain`` class, not a
    dataclass: see ``mcprec._plain``)."""

    __slots__ = ("ignore", "strict_order", "repeat", "matchers", "normalize")
    _FIELDS = __slots__

    ignore: Sequence[str]
    """JSON paths into the request to leave out, e.g. ``params.arguments.timestamp``; ``*``
    matches any key or index, ``$..ts`` any depth (see ``mcprec.jsonpath``)."""
    strict_order: bool
    """The next request must be the next recorded one."""
    repeat: Literal["last", "error"]
    """When identical requests outnumber recorded answers: answer with the last, or fail."""
    matchers: Sequence[CustomMatcher]
    """Extra checks: a recorded request matches only if every callable returns True."""
    normalize: Sequence[str]
    """Kinds of volatile values that match by kind on both sides (``timestamps``, ``uuids``,
    ``NAME=REGEX``...: see ``mcprec.normalize``), so a request carrying a fresh UUID or time
    still matches the recorded one. Applied at match time; the stored keys do not change."""

    def __init__(self, ignore: Sequence[str] = (), strict_order: bool = False,
                 repeat: Literal["last", "error"] = "last",
                 matchers: Sequence[CustomMatcher] = (), normalize: Sequence[str] = ()) -> None:
        self.ignore = ignore
        self.strict_order = strict_order
        self.repeat = repeat
        self.matchers = matchers
        self.normalize = normalize


# --- differences -----------------------------------------------------------------------------


if TYPE_CHECKING:
    class Difference(NamedTuple):
        """One leaf where a recorded request and the incoming one differ."""

        path: str
        recorded: Any
        got: Any
        kind: Literal["changed", "only_recorded", "only_got"] = "changed"

        def describe(self) -> str:
            return _describe(self)
else:  # made with collections (typing is not imported at run time): a frozen dataclass took
    # 0.9 ms to build at every replay's start-up, this 0.1 ms
    class Difference(collections.namedtuple("Difference", ("path", "recorded", "got", "kind"),
                                            defaults=("changed",))):
        """One leaf where a recorded request and the incoming one differ."""

        __slots__ = ()

        def describe(self) -> str:
            return _describe(self)


def _describe(d: Difference) -> str:
    if d.kind == "only_recorded":
        return f"{d.path}: only in the recording ({_short(d.recorded)})"
    if d.kind == "only_got":
        return f"{d.path}: only in this request ({_short(d.got)})"
    return f"{d.path}: recorded {_short(d.recorded)}, got {_short(d.got)}"


def _short(value: Any, width: int = 60) -> str:
    text = wire.dumps(value).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


_SIDE: dict[str, Literal["changed", "only_recorded", "only_got"]] = {
    "changed": "changed", "removed": "only_recorded", "added": "only_got"}


def differences(recorded: Any, got: Any) -> list[Difference]:
    """Leaf-level differences between two JSON values, each at a path ``--ignore`` takes (the
    diff's walker, keys in sorted order, strings compared as strings)."""
    from .jsonpath import leaf_differences

    return [Difference(path or "$", before, after, _SIDE[kind])
            for path, before, after, kind in leaf_differences(recorded, got, "",
                                                              sort_keys=True)]


_JSONPATH: list[Any] = []


def _jsonpath() -> Any:
    """``mcprec.jsonpath``, imported at first use (an import statement per call costs ~1 µs)."""
    if not _JSONPATH:
        from . import jsonpath

        _JSONPATH.append(jsonpath)
    return _JSONPATH[0]


# --- the matcher -----------------------------------------------------------------------------


# Match, _KeyState and _Position are plain classes, not dataclasses: building the three as
# dataclasses took 0.83-0.95 ms of CPU at import, paid by every replay's start-up (as plain
# classes 0.02-0.03 ms); a Match is made for every request.


class Match(Plain):
    """The recorded request that answers an incoming one: its ``seq``, and its ``request``
    (a ``Message``, read when first asked for: a request answered from the replay plan
    never is)."""

    __slots__ = ("seq", "repeated", "_request", "_matcher")
    _FIELDS = ("request", "repeated")

    def __init__(self, request: Message | None, repeated: bool = False, seq: int = -1,
                 matcher: Matcher | None = None) -> None:
        self._request = request
        self.seq = seq if request is None else request.seq
        self.repeated = repeated
        """True when the recorded answers ran out and the last one is reused."""
        self._matcher = matcher

    @property
    def request(self) -> Message:
        if self._request is None:
            assert self._matcher is not None
            self._request = self._matcher._message(self.seq)
        return self._request


class _Aging:
    """The messages (or lists of them) of recently used seqs, in two generations: once the new
    one holds ``LIMIT`` seqs, it becomes the old one and the old one is dropped whole. What it
    forgot is read again from the cassette (indexed) if it is asked for again; replay asks for a
    seq's messages once or twice, close together (its request, its answer, a repeat); one
    found in the old generation moves to the new.

    Kept for good, every request played left its request and answer behind: memory grew with
    the session (~1.4 KB a small request: 20,000 replayed in-process, peak RSS 144 -> 117 MB),
    and the garbage collector went over them again and again (5,000 requests in-process,
    callgrind: 155,500 -> 151,800 instructions a request; generations of 256 and 1,024 kept
    more and saved less: 153,400 and 155,100)."""

    __slots__ = ("new", "old")
    LIMIT = 128

    def __init__(self) -> None:
        self.new: dict[int, Any] = {}
        self.old: dict[int, Any] = {}

    def get(self, seq: int) -> Any:
        found = self.new.get(seq)
        if found is None:
            found = self.old.get(seq)
            if found is not None:  # still in use: kept on
                self[seq] = found
        return found

    def __setitem__(self, seq: int, value: Any) -> None:
        new = self.new
        new[seq] = value
        if len(new) >= self.LIMIT:
            self.old, self.new = new, {}


class _KeyState:
    __slots__ = ("seqs", "next")

    def __init__(self, seqs: list[int], next: int = 0) -> None:
        self.seqs = seqs
        self.next = next


class _Position:
    __slots__ = ("played", "requests_seen")

    def __init__(self) -> None:
        self.played: set[int] = set()
        self.requests_seen = 0


class Matcher:
    """Finds the recorded request that answers each incoming one, for one replayed session."""

    def __init__(self, cassette: Cassette, session: Session, options: MatchOptions | None = None):
        self.cassette = cassette
        self.session = session
        self.options = options or MatchOptions()
        self._ignore: tuple[Any, ...] = ()
        if self.options.ignore:
            from .jsonpath import parse_path

            self._ignore = tuple(parse_path(p) for p in self.options.ignore)
        self._norm: Any = None  # built here when asked for (a bad spec fails now), else at use
        if self.options.normalize:
            from .normalize import Normalizer

            self._norm = Normalizer.build(self.options.normalize)
        self._by_key: dict[tuple[str, str], _KeyState] = {}
        self._by_method: dict[str, list[Message]] = {}
        self._cache = _Aging()  # seq -> Message
        self._handling = _Aging()  # seq -> list[Message]
        self._pos = _Position()
        self._strict_cursor = -1
        # stored keys hash the params as recorded: with ignores or normalizers, both sides'
        # canonical forms are compared instead (the same in every path below)
        self._keyed = not self._ignore and not self.options.matchers and not self._norm
        # read-ahead windows: recorded traffic [0, _hi) is read; keys found there, in order
        self._hi = 0
        self._window = FIRST_WINDOW  # the size of the next window read
        self._ahead = 0  # read the next window once the client is this close to the last's end
        self._end: int | None = None  # the session's last seq + 1
        self._window_keys: dict[tuple[str, str], list[int]] = {}
        self._rows: dict[int, tuple[Any, ...]] = {}
        self._handling_rows: dict[int, list[tuple[Any, ...]]] = {}
        # from the replay plan (cassette/plan.py): seq -> its plain answer (its text, where its
        # id starts and ends, its time)
        self._plain: dict[int, tuple[bytes, int, int, int]] = {}
        self._planned = True  # read the plan, while the session has one
        self._whole: set[tuple[str, str]] = set()  # keys read whole by their own query
        self._key_requests: dict[int, Message] = {}  # what those queries read, until used
        self._key_handling: dict[int, list[Message]] = {}
        self._known: tuple[Any, str] | None = None  # (request, key) that ``recorded`` keyed
        # recorded requests read so far, by their bytes without the id (``wire.id_cut``): a
        # request sent as it was recorded is matched by its bytes (``match_bytes``)
        self._by_cut: dict[bytes, tuple[str, str]] | None = (
            {} if self._keyed and not self.options.strict_order else None)
        self._cut_bytes = 0  # the bytes of the texts in _by_cut (at most CUT_BYTES)
        self._keys_hold: dict[str, bool] = {}  # per method: its stored keys are this mcprec's
        self._only_cuts: dict[bytes, str] | None = None  # see _method_only_cuts

    # -- public

    def match(self, obj: dict[str, Any], *, has_meta: bool = True) -> Match:
        """The recorded request for ``obj`` (a JSON-RPC request); raises ``NoMatchError``.
        ``has_meta=False`` says the request holds no ``_meta`` anywhere (a faster key)."""
        method = obj.get("method")
        if not isinstance(method, str):
            raise NoMatchError("request without a method")
        self._pos.requests_seen += 1
        if self.options.strict_order:
            found = self._match_strict(obj, method)
        elif method in METHOD_ONLY:
            found = self._take(("", method), lambda: self._seqs_for_method(method))
        elif self._keyed:
            known, self._known = self._known, None
            key = known[1] if known is not None and known[0] is obj else wire.match_key(
                method, obj.get("params"), has_meta=has_meta)
            found = self._take((method, key), lambda: self._seqs_for_key(method, key))
        else:
            canon = self._canonical(obj)
            found = self._take(
                (method, canon.decode()),
                lambda: [m.seq for m in self._requests_of(method)
                         if self._canonical(m.json) == canon and self._custom_ok(obj, m.json)],
            )
        if found is None:
            raise self._no_match(obj, method)
        self._played(found)
        return found

    def match_bytes(self, raw: bytes) -> tuple[Match, Any] | None:
        """``match`` of a request whose bytes, but for its id, are those of a recorded request
        read so far, and its id; None for any other (``match`` of the parsed request then says
        what it says). Its key is the recorded one: neither parsed, nor keyed, nor redacted
        (as for ``recorded``). 5,000 small pipelined requests sent as recorded, in-process:
        32.0-34.8 -> 27.9-28.6 µs of CPU a request (medians of 9 runs, on a busy machine)."""
        by_cut = self._by_cut
        if by_cut is None:
            return None
        cut = wire.id_cut(raw)
        if cut is None:
            return None
        known = by_cut.get(cut[0])
        if known is None:
            method = self._method_only_cuts().get(cut[0])
            if method is not None:
                known = ("", method)  # as ``match`` takes it: by its method alone
            elif self._end is None:  # the first other request: read the first window, as
                self._end = self.cassette.last_seq(self.session) + 1  # ``match`` would
                self._read_window()
                known = by_cut.get(cut[0])
            if known is None:
                return None
        try:
            rid = wire.id_value(cut[1])
        except orjson.JSONDecodeError:
            return None  # not JSON after all: ``match`` of the parsed request says so
        method = known[0]
        if not method:
            found = self._take(known, lambda: self._seqs_for_method(known[1]))
            return None if found is None else self._found_bytes(found, rid)
        holds = self._keys_hold.get(method)
        if holds is None:
            # once per method: a key stored by another mcprec version (another hash) is not
            # trusted; ``match`` then reports it as such. A session recorded with this
            # mcprec's scheme needs no key made to know it (nor orjson to make one)
            holds = self._keys_hold[method] = self.session.key_scheme == wire.KEY_SCHEME or \
                wire.match_key(method, wire.loads(raw).get("params"),
                               has_meta=wire.holds_meta(raw)) == known[1]
        if not holds:
            return None
        found = self._take(known, lambda: self._seqs_for_key(*known))
        if found is None:
            return None  # ran out: ``match`` says so
        return self._found_bytes(found, rid)

    def _method_only_cuts(self) -> dict[bytes, str]:
        """The recorded requests matched by their method alone (``initialize``), by their bytes
        without the id: an ``initialize`` sent as recorded is answered without a JSON parser
        (see ``wire.id_json``), and without reading the first window."""
        if self._only_cuts is None:
            self._only_cuts = {}
            for method in METHOD_ONLY:
                for m in self._requests_of(method):
                    cut = wire.id_cut(m.raw)
                    if cut is not None:
                        self._only_cuts.setdefault(cut[0], method)
        return self._only_cuts

    def _found_bytes(self, found: Match, rid: Any) -> tuple[Match, Any]:
        self._pos.requests_seen += 1
        self._played(found)
        return found, rid

    def _played(self, found: Match) -> None:
        seq = found.seq
        self._pos.played.add(seq)
        if self._end is not None and seq >= self._hi - self._ahead and self._hi < self._end:
            self._read_window()  # read ahead of where the client is

    def recorded(self, obj: dict[str, Any], *, has_meta: bool = True) -> bool:
        """Whether a request with ``obj``'s very method and params was recorded (keyed matching
        alone; False otherwise). Loads what ``match`` would load for it and changes nothing
        that ``match`` returns; ``match`` of the same object then reuses its key."""
        method = obj.get("method")
        if not self._keyed or self.options.strict_order or not isinstance(method, str) \
                or method in METHOD_ONLY:
            return False
        key = wire.match_key(method, obj.get("params"), has_meta=has_meta)
        self._known = (obj, key)
        state = self._by_key.get((method, key))
        if state is None:
            state = self._by_key[(method, key)] = _KeyState(self._seqs_for_key(method, key))
        return bool(state.seqs)

    def unplayed(self) -> list[Message]:
        """Recorded client requests that no incoming request has used."""
        return [
            m for m in self.cassette.messages(self.session, kinds=(wire.REQUEST,))
            if m.direction == wire.CLIENT_TO_SERVER and m.seq not in self._pos.played
        ]

    # -- strategies

    def _take(self, key: tuple[str, str], load: Callable[[], list[int]]) -> Match | None:
        state = self._by_key.get(key)
        if state is None:
            state = self._by_key[key] = _KeyState(load())
        if not state.seqs:
            return None
        if (state.next >= len(state.seqs) and key in self._window_keys
                and key not in self._whole and self._end is not None and self._hi < self._end):
            state.seqs = self._read_key(*key)  # more of them may lie past the windows read
        if state.next < len(state.seqs):
            seq = state.seqs[state.next]
            state.next += 1
            return Match(None, False, seq, self)
        if self.options.repeat == "last":
            return Match(None, True, state.seqs[-1], self)
        return None

    def _match_strict(self, obj: dict[str, Any], method: str) -> Match | None:
        nxt = self._next_client_request(self._strict_cursor)
        if nxt is None:
            return None
        if nxt.method != method:
            return None
        if method not in METHOD_ONLY and (
            self._canonical(nxt.json) != self._canonical(obj) or not self._custom_ok(obj, nxt.json)
        ):
            return None
        self._strict_cursor = nxt.seq
        return Match(nxt)

    # -- look-ups (lazy, indexed)

    def _seqs_for_key(self, method: str, key: str) -> list[int]:
        if self._end is None:
            self._end = self.cassette.last_seq(self.session) + 1
            self._read_window()
        seqs = self._window_keys.get((method, key))
        if seqs is not None:
            return seqs  # later windows append to this very list
        return self._read_key(method, key)

    def _read_window(self) -> None:
        """Read the next window of recorded traffic and index its requests by key."""
        assert self._end is not None
        lo, hi = self._hi, min(self._hi + self._window, self._end)
        if lo >= hi:
            return
        self._ahead = (hi - lo) // 2
        self._window = min(WINDOW, self._window * 2)
        if self._planned:
            plan = self.cassette.plan_window(self.session, lo, hi)
            if plan is not None:
                self._read_plan(plan, hi)
                return
            self._planned = False
        requests, handling = self.cassette.window(self.session, lo, hi)
        self._hi = hi
        self._hold(requests, handling)
        for row in requests:
            key = (row[_METHOD], row[_KEY])
            raw = row[_RAW]
            if self._index(row[_SEQ], key) and type(raw) is bytes:
                cut = wire.id_cut(raw)
                if cut is not None:
                    self._know_cut(cut[0], key)
        self._forget_cuts()

    def _read_plan(self, plan: list[tuple[Any, ...]], hi: int) -> None:
        """``_read_window`` from the replay plan's rows: the requests' keys and cuts as it
        reads them from whole rows, and each plain answer (``plain``). The requests without one
        are read whole (``window``) if many, else one by one when played."""
        self._hi = hi
        plain = self._plain
        other: list[int] = []
        for seq, method, mkey, raw, at, end, answer, answer_at, answer_end, t_ns in plan:
            key = (method, mkey)
            if answer is not None:
                plain[seq] = (answer, answer_at, answer_end, t_ns)
            else:
                other.append(seq)
            if self._index(seq, key) and raw is not None:
                self._know_cut(raw[:at] + raw[end:], key)
        self._forget_cuts()
        if len(other) > 8:
            self._hold(*self.cassette.window(self.session, other[0], other[-1] + 1),
                       wanted=set(other))

    def _hold(self, requests: list[tuple[Any, ...]], handling: list[tuple[Any, ...]],
              wanted: set[int] | None = None) -> None:
        """Keep a window's rows (of the requests ``wanted``, or all) until their requests are
        played (``_message``, ``handling``)."""
        for row in requests:
            seq = row[_SEQ]
            if wanted is None or seq in wanted:
                self._rows[seq] = row
                self._handling_rows[seq] = []
        for row in handling:
            context = row[_CONTEXT]
            if wanted is None or context in wanted:
                self._handling_rows.setdefault(context, []).append(row)

    def _index(self, seq: int, key: tuple[str, str]) -> bool:
        """Index a request read ahead by its key; whether it is to be matched by its bytes
        (``match_bytes``: keyed matching, a stored key, not matched by its method alone)."""
        if key not in self._whole:
            self._window_keys.setdefault(key, []).append(seq)
        return self._by_cut is not None and key[1] is not None and key[0] not in METHOD_ONLY

    def _know_cut(self, cut: bytes, key: tuple[str, str]) -> None:
        """``match_bytes`` finds ``key`` by a request's bytes without its id; the first request
        read with these bytes keeps them."""
        by_cut = self._by_cut
        assert by_cut is not None
        if cut not in by_cut:
            by_cut[cut] = key
            self._cut_bytes += len(cut)

    def _forget_cuts(self) -> None:
        by_cut = self._by_cut
        while by_cut and self._cut_bytes > CUT_BYTES:
            oldest = next(iter(by_cut))
            del by_cut[oldest]
            self._cut_bytes -= len(oldest)

    def plain(self, seq: int) -> tuple[bytes, int, int, int] | None:
        """The recorded request ``seq``'s plain answer from the replay plan, once: (its text,
        where its id's value starts and ends, its time); None for any other (``handling``
        says what the server sent)."""
        found = self._plain.pop(seq, None)
        if found is not None and self._key_requests:
            self._key_requests.pop(seq, None)
            self._key_handling.pop(seq, None)
        return found

    def _read_key(self, method: str, key: str) -> list[int]:
        """Every recorded request with this key, by its own indexed query."""
        self._whole.add((method, key))
        found, handling = self.cassette.exchanges_by_key(self.session, method, key)
        # held until used, as a window's rows are (the aging caches would forget most of many)
        self._key_handling.update(handling)
        for m in found:
            self._key_requests[m.seq] = m
        return [m.seq for m in found]

    def handling(self, seq: int) -> list[Message]:
        """What the server sent while handling the recorded request ``seq`` (cached)."""
        found = self._handling.get(seq)
        if found is None:
            rows = self._handling_rows.pop(seq, None) if seq < self._hi else None
            keyed = self._key_handling.pop(seq, None) if self._key_handling else None
            if rows is not None:
                found = [message_from_row(r, self.cassette) for r in rows]
            else:
                found = keyed if keyed is not None else self.cassette.handling(self.session, seq)
            self._handling[seq] = found
        return found

    def _seqs_for_method(self, method: str) -> list[int]:
        return [m.seq for m in self._requests_of(method)]

    def _requests_of(self, method: str) -> list[Message]:
        found = self._by_method.get(method)
        if found is None:
            found = self._by_method[method] = self.cassette.requests(self.session, method)
            for m in found:
                self._cache[m.seq] = m
        return found

    def _message(self, seq: int) -> Message:
        m = self._cache.get(seq)
        if m is None:
            row = self._rows.pop(seq, None)
            keyed = self._key_requests.pop(seq, None) if self._key_requests else None
            m = message_from_row(row, self.cassette) if row is not None else (
                keyed or self.cassette.message(self.session, seq))
            assert m is not None
            self._cache[seq] = m
        return m

    def _next_client_request(self, after: int) -> Message | None:
        return self.cassette.next_request(self.session, after)

    @property
    def _normalizer(self) -> Any:
        if self._norm is None:
            from .normalize import Normalizer

            self._norm = Normalizer.build(())
        return self._norm

    def _canonical(self, obj: Any) -> bytes:
        jp = _jsonpath()
        params = obj.get("params") if isinstance(obj, dict) else None
        request = {"method": obj.get("method"), "params": wire.strip_meta(params or {})}
        form = self._normalizer.apply(jp.remove_paths(request, self._ignore))
        return wire.dumps(jp.plain(form), sort_keys=True)

    def _custom_ok(self, incoming: dict[str, Any], recorded: Any) -> bool:
        return all(m(incoming, recorded) for m in self.options.matchers)

    # -- the report

    def _no_match(self, obj: dict[str, Any], method: str) -> NoMatchError:
        rid = obj.get("id")
        head = (
            f"no recorded response matches request id={_short(rid)} {method} "
            f"(session {self.session.name!r} in {self.cassette.path})"
        )
        lines = [head]
        closest: list[dict[str, Any]] = []
        same = self._requests_of(method)
        total_requests = self.cassette.count_requests(self.session)
        lines.append(
            f"  playback position: request #{self._pos.requests_seen} of this run; "
            f"{len(self._pos.played)} of {total_requests} recorded requests played; "
            f"{sum(1 for m in same if m.seq in self._pos.played)} of {len(same)} "
            f"recorded {method!r} requests played"
        )
        if self.options.strict_order:
            nxt = self._next_client_request(self._strict_cursor)
            lines.append(
                "  strict order: the next recorded request is "
                + (f"seq {nxt.seq} {nxt.method}" if nxt else "none (the recording is exhausted)")
            )
            candidates = [nxt] if nxt else []
        else:
            candidates = list(same)
        if not candidates and not self.options.strict_order:
            # nothing of that method: show what there is
            methods = self.cassette.request_methods(self.session)
            lines.append(
                f"  {method!r} was never recorded in this session; recorded methods: "
                + (", ".join(methods) if methods else "none")
            )
        else:
            incoming = self._comparable(obj)
            ranked = sorted(
                candidates,
                key=lambda m: (len(differences(self._comparable(m.json), incoming)), m.seq),
            )
            if ranked:
                lines.append("  closest recorded requests:")
            for i, m in enumerate(ranked[:3], 1):
                state = "played" if m.seq in self._pos.played else "not yet played"
                diffs = differences(self._comparable(m.json), incoming)
                closest.append({"seq": m.seq, "method": m.method,
                                "played": m.seq in self._pos.played,
                                "differences": [{"path": d.path, "recorded": d.recorded,
                                                 "got": d.got, "kind": d.kind} for d in diffs]})
                lines.append(f"    {i}. seq {m.seq} {m.method} ({state})")
                if not diffs:
                    lines.append(f"       {self._why_identical_failed(m, method)}")
                for d in diffs[:8]:
                    lines.append(f"       {d.describe()}")
                if len(diffs) > 8:
                    lines.append(f"       ... and {len(diffs) - 8} more differences")
        lines.append(
            f"  to accept it: re-record ("
            f"{RERECORD_PYTEST if os.environ.get(CONTEXT_ENV) == 'pytest' else RERECORD}), "
            "or --ignore the volatile paths"
        )
        report = "\n".join(lines)
        return NoMatchError(head, report, request=obj, candidates=closest)

    def _why_identical_failed(self, m: Message, method: str) -> str:
        """Why a recorded request with the very same params did not match."""
        if m.method != method:  # strict order: the recording expects another method here
            return f"same params, but the recording has {m.method} here, not {method}"
        if self.options.repeat == "error" and m.seq in self._pos.played:
            return "identical, but its recorded answers are used up (--repeat error)"
        if self.options.matchers:
            return "identical params; a custom matcher rejected it"
        # found by method but not by its stored match key: indexed by another mcprec version
        return ("identical params, but its stored match key differs (recorded by another "
                "mcprec version?); re-record the session")

    def _comparable(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        jp = _jsonpath()
        params = wire.strip_meta(obj.get("params") or {})
        return jp.plain(self._normalizer.apply(jp.remove_paths({"params": params}, self._ignore)))
