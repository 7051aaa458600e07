"""The batched background writer that records one session.

The forwarding path only calls ``message()`` / ``stderr_line()``, which put a tuple on a queue
(no parsing, no SQL). A writer thread drains the queue, classifies and pairs messages, and commits
them in transactions capped by count and by bytes. Batches form by themselves: while one commits,
the next accumulates, so an idle tap commits each message at once and a busy one commits in bulk.
``close()`` flushes everything on every exit path.
"""


from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any


from .. import wire
from ..cassette.rows import release_reserve
from ..cassette.store import Cassette
from ..cassette.models import Session
from .recorder import AUTO, Recorder, Redactor

MAX_BATCH_MESSAGES = 2000
MAX_BATCH_BYTES = 8 * 1024 * 1024

_MESSAGE = 0
_STDERR = 1
_STOP = 2
_SYNC = 3

class SessionWriter:
    """Records one session into a cassette from a background thread.

    Thread-safe producers: ``message`` and ``stderr_line`` may be called from any thread.
    (``mcprec record`` uses a recorder process instead: see ``process.py`` and ``child.py``.)
    """

    def __init__(
        self,
        cassette: Cassette,
        session: Session,
        *,
        redact: Redactor | None = None,
        clock_start_ns: int | None = None,
        first_seq: int = 0,
        own_cassette: bool = True,
    ) -> None:
        self.cassette = cassette
        self.session = session
        self.start_ns = clock_start_ns if clock_start_ns is not None else time.monotonic_ns()
        self._recorder = Recorder(cassette.connection, session, path=cassette.path, redact=redact,
                                  first_seq=first_seq)
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._framers: dict[str, TimedFramer] = {}
        self._closed = False
        self._own_cassette = own_cassette
        self._thread = threading.Thread(target=self._run, name="mcprec-writer", daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._recorder.error

    @property
    def count(self) -> int:
        return self._recorder.count

    # --- producers (hot path) ---------------------------------------------------------------

    def now(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def message(
        self, direction: str, raw: bytes, t_ns: int | None = None,
        http: dict[str, Any] | None = None, context: str | None = AUTO,
        fault: dict[str, Any] | None = None,
    ) -> None:
        if direction not in wire.DIRECTIONS:  # said here, not as the writing thread's crash
            from ..errors import UsageError

            raise UsageError(f"direction must be {wire.CLIENT_TO_SERVER.value!r} or "
                             f"{wire.SERVER_TO_CLIENT.value!r}, got {direction!r}")
        self._queue.put(
            (_MESSAGE, direction, time.monotonic_ns() - self.start_ns if t_ns is None else t_ns,
             raw, http, context, fault)
        )

    def stderr_line(self, line: bytes, t_ns: int | None = None) -> None:
        self._queue.put((_STDERR, t_ns if t_ns is not None else self.now(), line))

    # the chunk interface of a stdio tap: streams cut into lines here, on the caller's thread

    def chunk(self, direction: str, data: bytes, t_ns: int) -> None:
        self._framer(direction).feed_at(data, t_ns)

    def stream_end(self, direction: str) -> None:
        self._framer(direction).close()

    def stderr_chunk(self, data: bytes, t_ns: int) -> None:
        self._framer("stderr").feed_at(data, t_ns)

    def _framer(self, stream: str) -> TimedFramer:
        f = self._framers.get(stream)
        if f is None:
            if stream == "stderr":
                f = TimedFramer(lambda line, t: self.stderr_line(line, t))
            else:
                f = TimedFramer(lambda line, t, d=stream: self.message(d, line, t))
            self._framers[stream] = f
        return f

    def sync(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed."""
        done = threading.Event()
        self._queue.put((_SYNC, done))
        return done.wait(timeout)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self, *, exit_code: int | None = None, status: str = "complete") -> None:
        """Flush every queued message and mark the session ended. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put((_STOP,))
        self._thread.join()
        self._recorder.finish(exit_code=exit_code, status=status)
        release_reserve(self.cassette.connection)  # the space held back for a full disk
        if self._own_cassette:
            self.cassette.close()

    # --- writer thread ----------------------------------------------------------------------

    def _run(self) -> None:
        q = self._queue
        rec = self._recorder
        while True:
            item = q.get()
            size = 0
            stop = False
            while True:
                tag = item[0]
                if tag == _MESSAGE:
                    rec.add(item[1], item[2], item[3], item[4], item[5])
                    if item[6] is not None:
                        rec.fault(item[6])
                    size += len(item[3])
                elif tag == _STDERR:
                    rec.add_stderr(item[1], item[2])
                elif tag == _SYNC:
                    rec.commit()
                    item[1].set()
                elif tag == _STOP:
                    stop = True
                    break
                if rec.pending >= MAX_BATCH_MESSAGES or size >= MAX_BATCH_BYTES:
                    break
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
            rec.commit()
            if stop:
                return


class TimedFramer:
    """A ``LineFramer`` whose lines carry the time of the chunk that completed them.

    With ``limit``, a longer line reaches ``oversize(first_bytes, full_size, t_ns)`` instead.
    """

    def __init__(self, emit: Any, limit: int | None = None, oversize: Any = None) -> None:
        self._t = 0
        self._framer = wire.LineFramer(
            lambda line, term: emit(line, self._t), limit=limit,
            oversize=(lambda head, size: oversize(head, size, self._t)) if oversize else None)

    def feed_at(self, data: bytes, t_ns: int) -> None:
        self._t = t_ns
        self._framer.feed(data)

    def close(self) -> None:
        self._framer.close()


def redacted_head(redact: Any, target: Any, tags: dict[str, str] | None
                  ) -> tuple[Any, dict[str, str] | None]:
    """A session's target (argv or URL) and tags with secrets replaced, for its row."""
    if redact is None or not hasattr(redact, "redact_value"):
        return target, tags
    from ..redact.urls import redact_target

    return (redact_target(redact.redact_value(target)),
            redact.redact_value(tags) if tags else tags)


def open_session_writer(
    path: str | os.PathLike[str],
    name: str,
    *,
    transport: str,
    target: Any,
    tags: dict[str, str] | None = None,
    redact: Redactor | None = None,
    started_at: str | None = None,
) -> SessionWriter:
    """Create (or open) the cassette, add a session and start its writer."""
    from ..redact.manifest import for_recording

    cassette = Cassette.open(path, create=True)
    try:
        redact, manifest = for_recording(redact, cassette)
        target, tags = redacted_head(redact, target, tags)
        session = cassette.create_session(
            name, transport=transport, target=target, tags=tags, recorder_pid=os.getpid(),
            started_at=started_at,
        )
        if manifest is not None:
            cassette.set_redaction_manifest(session, manifest)
    except BaseException:
        cassette.close()
        raise
    return SessionWriter(cassette, session, redact=redact)
