"""Which recorded session answers a client, when a cassette holds many.

Each request is matched against every candidate still in the running; those that cannot answer
it drop out, unless none can (then the request is unmatched and nothing narrows). The answer
comes from the first candidate left, in preference order: an ``initialize`` whose params equal
the recorded ones first, then the latest session (``Cassette.session``). So a client gets the
session its traffic matches, and among sessions that all match so far, the latest.

The candidates are read once and shared by every client (``Candidates``: how many requests each
recorded session holds under each key, never modified once read): a client's choice holds the
indexes of the candidates still in the running and narrows them with a dictionary look-up per
candidate, and keeps one ``Matcher``, the preferred candidate's (when the preference moves to
another candidate, a new one is brought to the same position by the requests matched so far).
A replay server of 300 recorded sessions: each client's choice had made a ``Matcher`` for every
candidate and matched each request in all of them (~60 ms, and memory kept per client); now
~0.1-0.3 ms. Matching by other means than the stored keys (``--ignore``, ``--normalize``, custom
matchers, ``--strict-order``) keeps a ``Matcher`` per candidate, as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .. import wire
from ..cassette import Cassette, Session
from ..errors import NoMatchError
from ..matching import METHOD_ONLY, Match, Matcher, MatchOptions

_Table = tuple[tuple[dict[tuple[str, str], int], dict[str, int], "str | None"], ...]


class Candidates:
    """The recorded sessions a replay may answer from, and per session the number of client
    requests it recorded under each stored key and of each method, and its ``initialize``'s
    key: read at the first choice, then shared by every client and never modified."""

    __slots__ = ("cassette", "sessions", "_table", "__weakref__")

    def __init__(self, cassette: Cassette, sessions: Sequence[Session]) -> None:
        self.cassette = cassette
        self.sessions = tuple(sessions)
        self._table: _Table | None = None

    def table(self) -> _Table:
        if self._table is None:
            from ..cassette.request_keys import request_keys

            found = request_keys(self.cassette, self.sessions)
            self._table = tuple(found[s.id] for s in self.sessions)
        return self._table


_SHARED: weakref.WeakKeyDictionary[Cassette, dict[tuple[int, ...], Candidates]] = \
    weakref.WeakKeyDictionary()


def by_stored_keys(options: MatchOptions | None) -> bool:
    """Whether requests match by their stored keys alone (what ``Candidates`` counts)."""
    return options is None or not (options.ignore or options.matchers or options.normalize
                                   or options.strict_order)


def shared_candidates(cassette: Cassette, sessions: Sequence[Session],
                      options: MatchOptions | None) -> Candidates | None:
    """The ``Candidates`` of ``sessions`` in ``cassette``, one for every client (kept while the
    cassette is open); None for one session, or when ``options`` match otherwise than by the
    stored keys."""
    if len(sessions) < 2 or not by_stored_keys(options):
        return None
    memo = _SHARED.get(cassette)
    if memo is None:
        memo = _SHARED[cassette] = {}
    ids = tuple(s.id for s in sessions)
    found = memo.get(ids)
    if found is None:
        found = memo[ids] = Candidates(cassette, sessions)
    return found


class SessionChoice:
    """The candidate sessions for one client, narrowed as its requests arrive."""

    def __init__(self, cassette: Cassette, sessions: Sequence[Session],
                 options: MatchOptions | None = None, *,
                 shared: Candidates | None = None) -> None:
        if not sessions:
            raise ValueError("no candidate sessions")
        self.cassette = cassette
        self.options = options
        self.total = len(sessions)
        self._shared = shared if shared is not None else shared_candidates(
            cassette, sessions, options)
        self._candidates: list[tuple[Session, Matcher]] = []
        if self._shared is not None:
            self._alive: Sequence[int] = range(self.total)  # indexes into the shared sessions
            self._current = 0
            self._used: dict[tuple[str, str], int] = {}  # requests matched, per key
            self._history: list[tuple[dict[str, Any], bool]] = []  # while several are left
            self.session = self._shared.sessions[0]
            self.matcher = Matcher(cassette, self.session, options)
        else:  # a Matcher per candidate
            self._candidates = [(s, Matcher(cassette, s, options)) for s in sessions]
            self.session, self.matcher = self._candidates[0]

    @property
    def remaining(self) -> int:
        return len(self._alive) if self._shared is not None else len(self._candidates)

    def recorded(self, obj: dict[str, Any], *, has_meta: bool = True) -> bool:
        """Whether the one candidate left recorded a request with ``obj``'s very method and
        params (``Matcher.recorded``); False while several sessions are candidates."""
        return self.remaining == 1 and self.matcher.recorded(obj, has_meta=has_meta)

    def match_bytes(self, raw: bytes) -> tuple[Match, Any] | None:
        """``Matcher.match_bytes`` of the one candidate left; None while several are."""
        return self.matcher.match_bytes(raw) if self.remaining == 1 else None

    def match(self, obj: dict[str, Any], *, has_meta: bool = True) -> Match:
        """The recorded request for ``obj`` in the preferred candidate that has one."""
        if self.remaining == 1:
            return self.matcher.match(obj, has_meta=has_meta)
        if self._shared is not None:
            return self._match_shared(obj, has_meta)
        candidates = self._candidates
        if obj.get("method") == "initialize":
            same = [c for c in candidates if self._same_initialize(c[0], obj)]
            candidates = same or candidates
        survivors: list[tuple[Session, Matcher, Match]] = []
        first_error: NoMatchError | None = None
        for s, m in candidates:
            try:
                survivors.append((s, m, m.match(obj, has_meta=has_meta)))
            except NoMatchError as e:
                first_error = first_error or e
        if not survivors:
            assert first_error is not None
            raise first_error
        self._candidates = [(s, m) for s, m, _ in survivors]
        self.session, self.matcher, found = survivors[0]
        return found

    def _match_shared(self, obj: dict[str, Any], has_meta: bool) -> Match:
        assert self._shared is not None
        method = obj.get("method")
        if not isinstance(method, str):
            return self.matcher.match(obj, has_meta=has_meta)  # says what is wrong
        table = self._shared.table()
        alive = self._alive
        if method == "initialize":
            want = wire.match_key("initialize", obj.get("params"))
            same = [i for i in alive if table[i][2] == want]
            alive = same or alive
        key: tuple[str, str]
        repeat_error = self.options is not None and self.options.repeat == "error"
        if method in METHOD_ONLY:
            key = ("", method)
            need = self._used.get(key, 0) + 1 if repeat_error else 1
            survivors = [i for i in alive if table[i][1].get(method, 0) >= need]
        else:
            key = (method, wire.match_key(method, obj.get("params"), has_meta=has_meta))
            need = self._used.get(key, 0) + 1 if repeat_error else 1
            survivors = [i for i in alive if table[i][0].get(key, 0) >= need]
        if not survivors:  # unmatched: the preferred candidate's error says how
            return self.matcher.match(obj, has_meta=has_meta)
        self._used[key] = self._used.get(key, 0) + 1
        self._alive = survivors
        if survivors[0] != self._current:
            self._prefer(survivors[0])
        found = self.matcher.match(obj, has_meta=has_meta)
        if len(survivors) > 1:
            self._history.append((obj, has_meta))
        else:
            self._history = []
        return found

    def _prefer(self, i: int) -> None:
        """Answer from candidate ``i`` now: its Matcher at the position this client's requests
        so far have taken it to."""
        assert self._shared is not None
        self._current = i
        self.session = self._shared.sessions[i]
        self.matcher = Matcher(self.cassette, self.session, self.options)
        for obj, has_meta in self._history:
            try:
                self.matcher.match(obj, has_meta=has_meta)
            except NoMatchError:
                pass

    def _same_initialize(self, s: Session, obj: dict[str, Any]) -> bool:
        recorded = self.cassette.requests(s, "initialize")
        if not recorded:
            return False
        return recorded[0].match_key == wire.match_key("initialize", obj.get("params"))
