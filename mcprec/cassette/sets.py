"""Several cassette files read as one: the arguments that name them, the names a rotating
recording gives its files, and ``CassetteSet``, a read-only view of their sessions.

A recording proxy that rotates its cassette (``record --target --rotate-size`` or
``--rotate-every``) writes ``NAME-<UTC time>.db`` files next to the ``-c NAME.db`` it was given;
each session lives whole in one file. ``replay``, ``sessions`` and ``verify --all`` take a file,
a directory (its ``*.db`` files, in sorted order) or a glob (``'cassettes/staging-*.db'``), and
``expand`` is how each of them reads the argument.

``CassetteSet`` is what replay reads a set through: a ``Cassette`` whose sessions are those of
every file, each renumbered with an id unique in the set (the view's id); every look-up about a
session goes to the file that holds it, with the session's own id there. Nothing is copied or
merged on disk, and nothing is written through it.
"""

from __future__ import annotations

import calendar
import copy
import glob
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ..errors import CassetteError, SessionNotFoundError, UsageError
from .models import Message, Session
from .store import Cassette

GLOB_CHARS = frozenset("*?[")
_STAMP = re.compile(r"-(\d{8}T\d{6})\.(\d{3})Z\.[^.]*$")


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Cassette files: a file as it is, a directory's ``*.db`` files (at any depth, sorted), a
    glob's matches (sorted); each once, in the order given. A ``UsageError`` (one line) for a
    path that does not exist, a directory without cassettes, a glob that matches nothing."""
    out: list[Path] = []
    for given in paths:
        p = Path(given)
        text = os.fspath(given)
        if p.is_dir():
            found = sorted(x for x in p.rglob("*.db") if x.is_file())
            if not found:
                raise UsageError(f"no cassettes (*.db) under {p}")
            out += found
        elif p.exists():
            out.append(p)
        elif GLOB_CHARS & set(text):
            matched = sorted(Path(x) for x in glob.glob(text, recursive=True)
                             if os.path.isfile(x))
            if not matched:
                raise UsageError(f"no cassettes match {text}")
            out += matched
        else:
            raise UsageError(f"no such cassette: {p}")
    return list(dict.fromkeys(out))


def is_set(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names several files (a directory or a glob), not one cassette file."""
    p = Path(path)
    return p.is_dir() or (not p.exists() and bool(GLOB_CHARS & set(os.fspath(path))))


# --- the files of a rotating recording -------------------------------------------------------

def rotated_path(base: str | os.PathLike[str], after: Path | None = None,
                 now: float | None = None) -> Path:
    """The next file of a recording rotated from ``base`` (``cassettes/staging.db``):
    ``cassettes/staging-20261206T013000.123Z.db``, the UTC time it was opened to the
    millisecond. Names sort as the files were opened: a name that would not sort after
    ``after`` (the file before it; two in one millisecond, a clock set back) or that exists
    takes the next millisecond."""
    b = Path(base)
    suffix = b.suffix or ".db"
    ms = int((time.time() if now is None else now) * 1000)
    last = _STAMP.search(after.name) if after is not None else None
    if last is not None:  # never before the file it follows
        ms = max(ms, calendar.timegm(time.strptime(last[1], "%Y%m%dT%H%M%S")) * 1000
                 + int(last[2]) + 1)
    while True:
        secs, frac = divmod(ms, 1000)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(secs)) + f".{frac:03d}Z"
        path = b.with_name(f"{b.stem}-{stamp}{suffix}")
        if (after is None or path.name > after.name) and not path.exists():
            return path
        ms += 1


def rotated_glob(base: str | os.PathLike[str]) -> str:
    """The glob that names every file rotated from ``base``."""
    b = Path(base)
    return str(b.with_name(f"{b.stem}-*{b.suffix or '.db'}"))


# --- several files, read as one ----------------------------------------------------------------

def open_set(paths: Sequence[str | os.PathLike[str]], *, label: str | None = None
             ) -> Cassette:
    """The cassette files ``paths`` (from ``expand``) opened for reading: one file as a
    ``Cassette``, several as a ``CassetteSet``."""
    if len(paths) == 1:
        return Cassette.open(paths[0], read_only=True)
    parts: list[Cassette] = []
    try:
        for p in paths:
            parts.append(Cassette.open(p, read_only=True))
    except BaseException:
        for c in parts:
            c.close()
        raise
    return CassetteSet(parts, label=label)


_NOT_YET = "9999"  # a session still being recorded ends after any that ended


class CassetteSet(Cassette):
    """Several open cassettes read as one (read-only). Its sessions are copies of the files'
    with an id unique in the set; a look-up about one goes to its file with its own id."""

    def __init__(self, parts: Sequence[Cassette], *, label: str | None = None) -> None:
        # no connection of its own: Cassette.__init__ is not called
        self.parts = tuple(parts)
        self.path = Path(label) if label is not None else Path(
            os.path.commonpath([str(c.path.parent) for c in self.parts]) or ".")
        self.planned = all(c.planned for c in self.parts)
        self._by_id: dict[int, tuple[Cassette, Session]] = {}
        self._ids: dict[tuple[int, int], int] = {}  # (part, id there) -> id in the set
        self._names: dict[str, list[int]] = {}
        n = 0
        for i, part in enumerate(self.parts):
            for s in part.sessions_latest_first(stats=False)[::-1]:  # ids in file order
                n += 1
                self._ids[(i, s.id)] = n
                self._by_id[n] = (part, s)
                self._names.setdefault(s.name, []).append(n)
        self._order = {sid: (part.path.name, s.id) for sid, (part, s) in self._by_id.items()}

    def __repr__(self) -> str:
        return f"CassetteSet({', '.join(str(c.path) for c in self.parts)})"

    # --- what the set is made of -----------------------------------------------------------

    def close(self) -> None:
        for c in self.parts:
            c.close()

    @property
    def connection(self) -> Any:
        raise CassetteError(f"{self.path}: a set of {len(self.parts)} cassettes has no single "
                            "connection")

    def part_of(self, session: Session) -> tuple[Cassette, Session]:
        """The file that holds ``session`` (a session of this set), and the session there."""
        found = self._by_id.get(session.id)
        if found is None:
            raise SessionNotFoundError(f"{self.path}: no session #{session.id} in this set")
        return found

    def _as_set(self, part: Cassette, s: Session) -> Session:
        i = self.parts.index(part)
        view = copy.copy(s)
        view.id = self._ids[(i, s.id)]
        return view

    def _resolve(self, session: Session | str | None) -> tuple[Cassette, Session]:
        if not isinstance(session, Session):
            session = self.session(session, stats=False)
        return self.part_of(session)

    # --- sessions -----------------------------------------------------------------------------

    def sessions(self) -> list[Session]:
        """Every session, file by file (in sorted order), each file's oldest first."""
        return [self._as_set(c, s) for c in self.parts for s in c.sessions()]

    def sessions_latest_first(self, *, stats: bool = True) -> list[Session]:
        every = [self._as_set(c, s) for c in self.parts
                 for s in c.sessions_latest_first(stats=stats)]
        every.sort(key=lambda s: (s.ended_at or _NOT_YET, self._order[s.id]), reverse=True)
        return every

    def session(self, name: str | None = None, *, stats: bool = True) -> Session:
        if name is None:
            if not self._by_id:
                raise SessionNotFoundError(f"{self.path}: no sessions in "
                                           f"{len(self.parts)} cassettes")
            latest = self.sessions_latest_first(stats=False)[0]
            part, s = self.part_of(latest)
            return self._as_set(part, part.session(s.name, stats=stats)) if stats else latest
        ids = self._names.get(name, [])
        if not ids:
            names = list(self._names)
            hint = ", ".join(names[-5:]) if names else "none"
            if len(names) > 5:
                hint = f"{len(names)} in all, the last five: ..., {hint}"
            raise SessionNotFoundError(f"{self.path}: no session {name!r} in "
                                       f"{len(self.parts)} cassettes (sessions: {hint})")
        if len(ids) > 1:
            where = ", ".join(str(self._by_id[i][0].path) for i in ids)
            raise CassetteError(f"{self.path}: session {name!r} is in several cassettes "
                                f"({where}); replay one of them")
        part, s = self._by_id[ids[0]]
        return self._as_set(part, part.session(name, stats=stats) if stats else s)

    def session_by_id(self, session_id: int) -> Session:
        found = self._by_id.get(session_id)
        if found is None:
            raise SessionNotFoundError(f"{self.path}: no session #{session_id}")
        return self._as_set(*found)

    def _grouped(self, sessions: Any) -> Iterator[tuple[Cassette, list[Session] | None]]:
        """Per file, its sessions among ``sessions`` (None: all of them)."""
        if sessions is None:
            for c in self.parts:
                yield c, None
            return
        groups: dict[int, list[Session]] = {}
        for s in sessions:
            part, real = self.part_of(s if isinstance(s, Session) else
                                      self.session_by_id(int(s)))
            groups.setdefault(self.parts.index(part), []).append(real)
        for i, found in groups.items():
            yield self.parts[i], found

    def _by_set_id(self, part: Cassette, per_id: dict[int, Any]) -> dict[int, Any]:
        i = self.parts.index(part)
        return {self._ids[(i, sid)]: v for sid, v in per_id.items() if (i, sid) in self._ids}

    def redaction_manifests(self, sessions: Any = None) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for part, found in self._grouped(sessions):
            out.update(self._by_set_id(part, part.redaction_manifests(found)))
        return out

    def redaction_beyond_defaults(self, sessions: Any) -> bool:
        return any(part.redaction_beyond_defaults(found or [])
                   for part, found in self._grouped(list(sessions)))

    def redaction_salt(self, *, create: bool = False, salt: bytes | None = None
                       ) -> bytes | None:
        """The salt of the set's files (a rotating recording gives each the first one's)."""
        if create:
            self._read_only("make a salt")
        for c in self.parts:
            found = c.redaction_salt()
            if found is not None:
                return found
        return None

    def backpressure(self, sessions: Any = None) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for part, found in self._grouped(sessions):
            out.update(self._by_set_id(part, part.backpressure(found)))
        return out

    def losses(self, sessions: Any = None) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for part, found in self._grouped(sessions):
            out.update(self._by_set_id(part, part.losses(found)))
        return out

    def request_keys(self, sessions: Sequence[Session]) -> dict[int, Any]:
        """``request_keys`` of each file's sessions, by the ids of the set."""
        from .request_keys import request_keys

        out: dict[int, Any] = {}
        for part, found in self._grouped(sessions):
            out.update(self._by_set_id(part, request_keys(part, found or [])))
        return out

    # --- messages: the look-ups of one session, in its file ----------------------------------

    def raw_of(self, message: Message) -> bytes:
        raise CassetteError(f"{self.path}: a message is read from its own cassette")

    def open_text(self, message: Message) -> Any:
        return None

    # --- nothing is written through a set ---------------------------------------------------

    def _read_only(self, what: str) -> Any:
        raise CassetteError(f"{self.path}: a set of cassettes is read-only (cannot {what}); "
                            "give one cassette file")

    def create_session(self, *args: Any, **kwargs: Any) -> Any:
        return self._read_only("create a session")

    def update_session(self, *args: Any, **kwargs: Any) -> None:
        self._read_only("change a session")

    def rename_session(self, *args: Any, **kwargs: Any) -> None:
        self._read_only("rename a session")

    def delete_session(self, *args: Any, **kwargs: Any) -> None:
        self._read_only("delete a session")

    def set_redaction_manifest(self, *args: Any, **kwargs: Any) -> None:
        self._read_only("store a manifest")

    def set_backpressure(self, *args: Any, **kwargs: Any) -> None:
        self._read_only("store back-pressure")


def _in_its_file(name: str) -> Any:
    def look_up(self: CassetteSet, session: Any, *args: Any, **kwargs: Any) -> Any:
        part, real = self._resolve(session)
        return getattr(part, name)(real, *args, **kwargs)

    look_up.__name__ = name
    look_up.__doc__ = f"``Cassette.{name}`` of the session, in the file that holds it."
    return look_up


for _name in ("messages", "message", "exchanges_by_key", "window", "plan_window", "requests",
              "next_request", "has_requests", "has_messages", "count_requests",
              "request_methods", "handling", "followers", "has_followers", "last_seq",
              "last_position", "answer", "client_messages", "stderr"):
    setattr(CassetteSet, _name, _in_its_file(_name))
