"""The recording proxy's cassette sessions, from the first to the last commit.

Each MCP session the proxy sees becomes a cassette session, created (named, its row written) the
moment it is first seen. All of them are written by one recorder process, started with the first
session; closing ends every session still open and waits until the recorder has committed all.
When the recorder falls far behind, ``on_pressure(True)`` tells the proxy to take in no more,
``on_pressure(False)`` that it caught up. Every session open meanwhile counts the pause (the
whole proxy waited: whatever it had in flight, or would have sent), and keeps it in the cassette
as a stdio session does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace
from collections.abc import Callable

from .. import _log
from ..cassette import Cassette
from ..cassette.sets import rotated_path
from ..errors import McprecError
from .process import ProcessSessionWriter, RecorderProcess, create_recorded_session
from ..naming import proxy_session_name
from ..redact import Redactor
from ..transports.recording import NullRecording, SessionRecording

NAMES_KEPT = 1000
"""Session names kept for ``names`` (a proxy running for days records many more)."""


class ProxyRecordings:
    """The sessions recorded through one proxy into one cassette, or into a cassette rotated by
    size or time (a new file for the sessions that begin once the bound is passed)."""

    def __init__(self, cassette: str | os.PathLike[str], target: str, *,
                 session: str | None = None, tags: dict[str, str] | None = None,
                 redact: Redactor | None = None,
                 on_pressure: Callable[[bool], None] | None = None,
                 sample: float | None = None, seed: int | None = None,
                 rotate_size: int | None = None, rotate_every: float | None = None) -> None:
        """``sample``: the fraction of sessions recorded (each drawn as it begins, from a
        generator seeded with ``seed``); the others are forwarded alone. ``rotate_size``
        (bytes) and ``rotate_every`` (seconds): record into ``NAME-<UTC time>.db`` files next
        to ``cassette`` (``sets.rotated_path``), a new one for the sessions that begin once the
        current file has passed ``rotate_size`` bytes or ``rotate_every`` seconds since its first
        session. A session stays whole in the file it began in."""
        self.target = target
        self.session_name = session
        self.tags = tags or {}
        self.redact = redact
        self.names: list[str] = []
        """The names of the first ``NAMES_KEPT`` sessions (``count`` counts them all)."""
        self.count = 0
        self._count = 0  # sessions tried: a name that failed is not offered again
        self._open: dict[ProcessSessionWriter, _File] = {}  # those not ended, and their file
        self._on_pressure = on_pressure
        self._pressed: set[int] = set()  # recorders (by pid) far behind
        self.sample = sample
        self.skipped = 0  # sessions not drawn by the sample
        self._draw = random.Random(seed).random if sample is not None else None
        self.base = Path(cassette)
        self.rotate_size = rotate_size
        self.rotate_every = rotate_every
        self.rotating = rotate_size is not None or rotate_every is not None
        self._file: _File | None = None  # the file new sessions go to
        self._retired: list[RecorderProcess] = []  # recorders of files left, finishing
        self._lost = False  # a recorder let go of said a write failed
        self.files: list[Path] = []
        """The files written so far, in order (one unless rotating)."""

    @property
    def cassette_path(self) -> Path:
        """The file new sessions are recorded into (rotating: chosen when first asked)."""
        return self._current().path

    def _current(self) -> _File:
        if self._file is None:
            path = rotated_path(self.base) if self.rotating else self.base
            self._file = _File(path)
            self.files.append(path)
        return self._file

    def _rotate_if_due(self) -> None:
        """Begin a new file when the current one has sessions and has passed a bound."""
        f = self._file
        if not self.rotating or f is None or f.started is None:
            return
        why = None
        if self.rotate_every is not None and time.monotonic() - f.started >= self.rotate_every:
            why = "--rotate-every"
        elif self.rotate_size is not None and f.size() >= self.rotate_size:
            why = "--rotate-size"
        if why is None:
            return
        salt = f.salt()
        self._file = _File(rotated_path(self.base, after=f.path))
        self.files.append(self._file.path)
        if salt is not None:  # pseudonyms keyed alike in every file of the recording
            with Cassette.open(self._file.path, create=True) as c:
                c.redaction_salt(create=True, salt=salt)
        _log.info("record", f"new sessions go to {self._file.path} ({f.path} passed {why})")
        if not f.open_sessions:
            self._retire(f)

    def _retire(self, f: _File) -> None:
        """A file left behind has no session open any more: its recorder commits the rest and
        ends (waited for by ``aclose``; those already ended are let go here)."""
        if f.recorder is None:
            return
        f.recorder.end_input()
        self._pressed.discard(f.recorder.pid)
        self._lost = self._lost or any(r.lost for r in self._retired)
        self._retired = [r for r in self._retired if not r.finished()]
        self._retired.append(f.recorder)
        f.recorder = None

    def _pressure(self, pid: int) -> Callable[[bool], None]:
        def changed(behind: bool) -> None:
            before = bool(self._pressed)
            if behind:
                self._pressed.add(pid)
            else:
                self._pressed.discard(pid)
            if before != bool(self._pressed) and self._on_pressure is not None:
                self._on_pressure(bool(self._pressed))
        return changed

    def open(self, transport: str) -> SessionRecording:
        """A new session (``transport`` is ``http``, or ``sse`` for the legacy transport)."""
        if self._draw is not None and self.sample is not None and self._draw() >= self.sample:
            self.skipped += 1
            return Unsampled(transport)
        self._rotate_if_due()
        f = self._current()
        self._count += 1
        name = proxy_session_name(self.target, self.session_name, self._count)
        if f.recorder is None:  # one recorder process for every session of this file
            # the cassette exists before the recorder process opens it (which it does not
            # create): started first, the recorder could find an empty file and stop
            Cassette.open(f.path, create=True).close()
            f.recorder = RecorderProcess(
                f.path,
                rules=self.redact.rules.to_dict() if self.redact is not None else {"off": True})
            f.recorder.on_pressure = self._pressure(f.recorder.pid)
        session = create_recorded_session(
            f.path, name, transport=transport, target=self.target, tags=self.tags,
            redact=self.redact, recorder_pid=f.recorder.pid)
        writer = ProcessSessionWriter(f.recorder, session, own=False)
        if f.started is None:
            f.started = time.monotonic()
        f.open_sessions += 1
        self.count += 1
        if len(self.names) < NAMES_KEPT:
            self.names.append(name)
        self._open[writer] = f
        return writer

    def stale(self, writer: SessionRecording) -> bool:
        """Whether ``writer``'s file is no longer the one new sessions go to (the bound passed):
        the proxy's one session of sessionless traffic (a stateless server) then gives way to
        a new one, in the new file, between requests."""
        if not self.rotating:
            return False
        self._rotate_if_due()
        f = self._open.get(writer)  # type: ignore[call-overload]
        return f is not None and f is not self._file

    def close(self, writer: SessionRecording, status: str = "complete") -> None:
        """End one session: nothing of it is kept here after."""
        writer.close(status=status)
        f = self._open.pop(writer, None)  # type: ignore[call-overload]
        if f is not None:
            f.open_sessions -= 1
            if f is not self._file and not f.open_sessions:
                self._retire(f)

    @property
    def open_sessions(self) -> int:
        """How many sessions are being recorded (begun and not ended)."""
        return len(self._open)

    @property
    def lost(self) -> bool:
        """Whether the recorder said a write to the cassette failed (messages were lost)."""
        return self._lost or any(r.lost for r in self._retired) or (
            self._file is not None and self._file.recorder is not None
            and self._file.recorder.lost)

    async def aclose(self) -> None:
        """End every session still open and wait until everything is committed."""
        for w in self._open:  # close() is idempotent
            w.close(status="complete")
        files = list(dict.fromkeys(self._open.values()))
        self._open.clear()
        if self._file is not None and self._file not in files:
            files.append(self._file)
        for f in files:
            self._retire(f)
        for r in self._retired:  # every session's last frames, then wait for commits
            await asyncio.to_thread(r.wait)
            self._lost = self._lost or r.lost
        self._retired.clear()


class _File:
    """One cassette file of the proxy's recording: its recorder process (started with its
    first session) and how many of its sessions are open."""

    __slots__ = ("path", "recorder", "started", "open_sessions")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recorder: RecorderProcess | None = None
        self.started: float | None = None  # monotonic time of its first session
        self.open_sessions = 0

    def size(self) -> int:
        """Bytes on disk: the database and its write-ahead log."""
        total = 0
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def salt(self) -> bytes | None:
        with contextlib.suppress(McprecError), Cassette.open(self.path, wait=False) as c:
            return c.redaction_salt()
        return None


class Unsampled(NullRecording):
    """A session left out by ``--sample``: forwarded as any other, recorded nowhere."""

    def __init__(self, transport: str) -> None:
        super().__init__()
        self.session = SimpleNamespace(transport=transport, id=None, name=None)
