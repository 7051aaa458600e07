"""Which recorded session answers a client, when a cassette holds many.

Every candidate session keeps its own ``Matcher``. Each request is matched against every
candidate still in the running; those that cannot answer it drop out, unless none can (then the
request is unmatched and nothing narrows). The answer comes from the first candidate left, in
preference order: an ``initialize`` whose params equal the recorded ones first, then the latest
session (``Cassette.session``). So a client gets the session its traffic matches, and among
sessions that all match so far, the latest.
"""

from __future__ import annotations

from collections.abc import Sequence
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .. import wire
from ..cassette import Cassette, Session
from ..errors import NoMatchError
from ..matching import Match, Matcher, MatchOptions


class SessionChoice:
    """The candidate sessions for one client, narrowed as its requests arrive."""

    def __init__(self, cassette: Cassette, sessions: Sequence[Session],
                 options: MatchOptions | None = None) -> None:
        if not sessions:
            raise ValueError("no candidate sessions")
        self.cassette = cassette
        self.total = len(sessions)
        self._candidates = [(s, Matcher(cassette, s, options)) for s in sessions]
        self.session, self.matcher = self._candidates[0]

    @property
    def remaining(self) -> int:
        return len(self._candidates)

    def recorded(self, obj: dict[str, Any], *, has_meta: bool = True) -> bool:
        """Whether the one candidate left recorded a request with ``obj``'s very method and
        params (``Matcher.recorded``); False while several sessions are candidates."""
        return len(self._candidates) == 1 and self.matcher.recorded(obj, has_meta=has_meta)

    def match_bytes(self, raw: bytes) -> tuple[Match, Any] | None:
        """``Matcher.match_bytes`` of the one candidate left; None while several are."""
        return self.matcher.match_bytes(raw) if len(self._candidates) == 1 else None

    def match(self, obj: dict[str, Any], *, has_meta: bool = True) -> Match:
        """The recorded request for ``obj`` in the preferred candidate that has one."""
        if len(self._candidates) == 1:
            return self.matcher.match(obj, has_meta=has_meta)
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

    def _same_initialize(self, s: Session, obj: dict[str, Any]) -> bool:
        recorded = self.cassette.requests(s, "initialize")
        if not recorded:
            return False
        return recorded[0].match_key == wire.match_key("initialize", obj.get("params"))
