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
import os
import random
import time
from types import SimpleNamespace
from typing import Any
from collections.abc import Callable

from ..cassette import Cassette
from .process import ProcessSessionWriter, RecorderProcess, create_recorded_session
from ..naming import proxy_session_name
from ..redact import Redactor
from ..transports.recording import SessionRecording

NAMES_KEPT = 1000
"""Session names kept for ``names`` (a proxy running for days records many more)."""


class ProxyRecordings:
    """The sessions recorded through one proxy into one cassette."""

    def __init__(self, cassette: str | os.PathLike[str], target: str, *,
                 session: str | None = None, tags: dict[str, str] | None = None,
                 redact: Redactor | None = None,
                 on_pressure: Callable[[bool], None] | None = None,
                 sample: float | None = None, seed: int | None = None) -> None:
        """``sample``: the fraction of sessions recorded (each drawn as it begins, from a
        generator seeded with ``seed``); the others are forwarded alone."""
        self.cassette_path = cassette
        self.target = target
        self.session_name = session
        self.tags = tags or {}
        self.redact = redact
        self.names: list[str] = []
        """The names of the first ``NAMES_KEPT`` sessions (``count`` counts them all)."""
        self.count = 0
        self._count = 0  # sessions tried: a name that failed is not offered again
        self._open: dict[int, ProcessSessionWriter] = {}  # by session id: those not ended
        self._recorder: RecorderProcess | None = None
        self._on_pressure = on_pressure
        self.sample = sample
        self.skipped = 0  # sessions not drawn by the sample
        self._draw = random.Random(seed).random if sample is not None else None

    def open(self, transport: str) -> SessionRecording:
        """A new session (``transport`` is ``http``, or ``sse`` for the legacy transport)."""
        if self._draw is not None and self.sample is not None and self._draw() >= self.sample:
            self.skipped += 1
            return Unsampled(transport)
        self._count += 1
        name = proxy_session_name(self.target, self.session_name, self._count)
        if self._recorder is None:  # one recorder process for every session of this proxy
            # the cassette exists before the recorder process opens it (which it does not
            # create): started first, the recorder could find an empty file and stop
            Cassette.open(self.cassette_path, create=True).close()
            self._recorder = RecorderProcess(
                self.cassette_path,
                rules=self.redact.rules.to_dict() if self.redact is not None else {"off": True})
            self._recorder.on_pressure = self._on_pressure
        session = create_recorded_session(
            self.cassette_path, name, transport=transport, target=self.target, tags=self.tags,
            redact=self.redact, recorder_pid=self._recorder.pid)
        writer = ProcessSessionWriter(self._recorder, session, own=False)
        self.count += 1
        if len(self.names) < NAMES_KEPT:
            self.names.append(name)
        self._open[session.id] = writer
        return writer

    def close(self, writer: SessionRecording, status: str = "complete") -> None:
        """End one session: nothing of it is kept here after."""
        writer.close(status=status)
        if writer.session is not None and writer.session.id is not None:
            self._open.pop(writer.session.id, None)

    @property
    def open_sessions(self) -> int:
        """How many sessions are being recorded (begun and not ended)."""
        return len(self._open)

    @property
    def lost(self) -> bool:
        """Whether the recorder said a write to the cassette failed (messages were lost)."""
        return self._recorder is not None and self._recorder.lost

    async def aclose(self) -> None:
        """End every session still open and wait until everything is committed."""
        for w in self._open.values():  # close() is idempotent
            w.close(status="complete")
        self._open.clear()
        if self._recorder is not None:  # every session's last frames, then wait for commits
            self._recorder.end_input()
            await asyncio.to_thread(self._recorder.wait)


class Unsampled:
    """A session left out by ``--sample``: forwarded as any other, recorded nowhere."""

    def __init__(self, transport: str) -> None:
        self.start_ns = time.monotonic_ns()
        self.session: Any = SimpleNamespace(transport=transport, id=None, name=None)

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None:
        pass

    def stream_end(self, direction: str) -> None:
        pass

    def stderr_chunk(self, data: bytes, t_ns: int) -> None:
        pass

    def message(self, direction: str, raw: bytes, t_ns: int | None = None,
                http: dict[str, Any] | None = None, context: str | None = None) -> None:
        pass

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        pass
