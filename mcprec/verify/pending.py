"""A verification run held in memory until it completes: the cassette is written only for a run
that completed (``store``); a run that failed (the server never answered, exited, refused)
leaves the cassette as it was, byte for byte."""

from __future__ import annotations

import os
import time
from typing import Any

from ..record.recorder import AUTO


class PendingRun:
    """What the mock client saw, with the time it saw it; ``SessionWriter``'s producer calls."""

    def __init__(self) -> None:
        self._start = time.monotonic_ns()
        self._items: list[tuple[Any, ...]] = []
        self.started_at = _now_iso()

    def now(self) -> int:
        return time.monotonic_ns() - self._start

    def message(self, direction: str, raw: bytes, t_ns: int | None = None,
                http: dict[str, Any] | None = None, context: str | None = AUTO) -> None:
        self._items.append(("m", direction, raw, self.now() if t_ns is None else t_ns, http,
                            context))

    def stderr_line(self, line: bytes, t_ns: int | None = None) -> None:
        self._items.append(("e", line, self.now() if t_ns is None else t_ns))

    def __len__(self) -> int:
        return len(self._items)

    def store(self, path: str | os.PathLike[str], name: str, *, transport: str, target: Any,
              tags: dict[str, str], redact: Any, exit_code: int | None) -> None:
        """Write the run as session ``name`` of the cassette at ``path``, complete."""
        from ..record.writer import open_session_writer

        writer = open_session_writer(path, name, transport=transport, target=target, tags=tags,
                                     redact=redact, started_at=self.started_at)
        try:
            for item in self._items:
                if item[0] == "m":
                    writer.message(item[1], item[2], item[3], http=item[4], context=item[5])
                else:
                    writer.stderr_line(item[1], item[2])
        finally:
            writer.close(exit_code=exit_code, status="complete")
        if writer.error is not None:
            from ..errors import CassetteError

            raise CassetteError(f"cannot store the verification run in {path}: "
                                f"{writer.error}") from writer.error


def _now_iso() -> str:
    from ..cassette.schema import now_iso

    return now_iso()
