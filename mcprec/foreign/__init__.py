"""Recordings made by other MCP tools, read into sessions of a cassette (``mcprec import --from``).

Each reader (``readers.py``) turns a file of one tool into a ``Foreign`` recording: the messages
as they crossed the wire, as far as that tool kept them, with their times, and one line saying
what its format does not keep. The recording is then written as an ``mcprec export`` dump and read
by ``show.dump.import_dump``, so pairing, match keys and the session's facts are derived as for
any recorded session: replay, diff, verify, lint and view work on it. docs/import.md has the
mapping of each format.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import UsageError

FORMATS = ("inspector", "mcp-cassette", "mcp-recorder", "mcp-vcr", "agent-vcr")
C2S, S2C = "c2s", "s2c"


@dataclass
class Foreign:
    """One recording of another tool, as messages in wire order."""

    tool: str
    messages: list[tuple[str, Any, int]] = field(default_factory=list)
    """(``c2s``/``s2c``, the message (a JSON value, or the text of a line that was not
    JSON), nanoseconds from the start)."""
    lost: str = ""
    """What the format does not keep, in one line."""
    target: list[str] | None = None
    started_at: str | None = None
    source_transport: str | None = None

    def add(self, direction: str, message: Any, t_ns: int) -> None:
        self.messages.append((direction, message, max(int(t_ns), 0)))


def read(tool: str, path: str | os.PathLike[str]) -> Foreign:
    """The recording in ``path``, written by ``tool`` (one of ``FORMATS``); a ``UsageError``
    naming the file when it is not such a recording."""
    from . import readers

    if tool not in FORMATS:
        raise UsageError(f"unknown format {tool!r}; use one of {', '.join(FORMATS)}")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such file: {p}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{p}: not UTF-8 text; is this a {tool} recording?") from None
    except OSError as e:
        raise UsageError(f"cannot read {p}: {e.strerror}") from None
    reader = readers.READERS[tool]
    try:
        rec = reader(text, str(p))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        if isinstance(e, UsageError):
            raise
        raise UsageError(f"{p}: not a {tool} recording ({type(e).__name__}: {e})") from None
    if not rec.messages:
        raise UsageError(f"{p}: the {tool} recording holds no messages")
    return rec


def export_lines(rec: Foreign, name: str) -> Iterator[bytes]:
    """``rec`` as the lines of an ``mcprec export`` dump of one session named ``name``."""
    from ..show.dump import EXPORT_VERSION

    yield orjson.dumps({"mcprec_export": EXPORT_VERSION}) + b"\n"
    tags = {"imported_from": rec.tool, "import_lost": rec.lost}
    if rec.source_transport:
        tags["imported_transport"] = rec.source_transport
    head: dict[str, Any] = {"name": name, "transport": "stdio", "target": rec.target,
                            "tags": tags, "status": "complete"}
    if rec.started_at:
        head["started_at"] = rec.started_at
    yield orjson.dumps({"session": head}) + b"\n"
    last = 0
    for seq, (direction, message, t_ns) in enumerate(rec.messages):
        last = max(last, t_ns)  # times never go back, whatever the file says
        raw = message if isinstance(message, str) else _compact(message)
        yield orjson.dumps({"m": {"seq": seq, "dir": direction, "raw": raw,
                                  "t_ns": last}}) + b"\n"


def _compact(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits: slower, exact
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def import_file(tool: str, path: str | os.PathLike[str], cassette: str | os.PathLike[str], *,
                name: str | None = None, replace: bool = False) -> tuple[str, Foreign]:
    """Read ``path`` (written by ``tool``) into ``cassette`` as session ``name`` (default: the
    file's name without its extensions); returns the session's name and the recording."""
    from ..show.dump import import_dump

    rec = read(tool, path)
    session = name or Path(path).name.split(".")[0] or tool
    import_dump(list(export_lines(rec, session)), cassette, replace=replace, source=str(path))
    return session, rec


__all__ = ["FORMATS", "Foreign", "export_lines", "import_file", "read"]
