"""The view as one self-contained HTML file: ``view --html``, ``diff --format html``,
``verify --html``.

The file holds the page's style and scripts inline and the answers the API would give,
precomputed, as JSON; the page reads them instead of asking a server. Nothing in it reaches
the network (its Content-Security-Policy allows no connection at all). What ``mcprec scan``
would flag is left out of the file, not just hidden: a file is made to be shared.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cassette import Cassette, Session
from ..redact import Redactor, default_redactor
from .data import ViewData
from .page import static_page

if TYPE_CHECKING:
    from ..diff.model import DiffResult

FILE_MAX_MESSAGES = 50_000
"""A session with more messages is listed in a file, without its timeline (use ``mcprec view``)."""
FILE_TEXT_MAX = 256 * 1024
"""A message's text in a file is cut after this many bytes (the page says so)."""


class _File:
    """The data of one file, built session by session. ``fid`` is a session's id in the file
    (a diff may compare sessions of two cassettes, whose ids can be the same)."""

    def __init__(self, cassette: dict[str, Any]) -> None:
        self.out: dict[str, Any] = {
            "mode": "file", "cassette": cassette, "sessions": [], "session": {},
            "timeline": {}, "during": {}, "messages": {}, "locate": {}, "diffs": {},
            "start": "#/",
        }

    def add_session(self, data: ViewData, s: Session, fid: int, *,
                    also: Iterable[int] = ()) -> None:
        info = data.session(s.id)
        info["id"] = fid
        key = str(fid)
        self.out["sessions"].append(info)
        self.out["session"][key] = info
        messages: dict[str, Any] = self.out["messages"].setdefault(key, {})
        if info["messages"] > FILE_MAX_MESSAGES:
            info["file_note"] = (f"{info['messages']} messages: more than a file holds "
                                 f"({FILE_MAX_MESSAGES}); `mcprec view` shows them all")
        else:
            self._timeline(data, s, fid, messages)
        for seq in also:  # the messages a diff points at, timeline or not
            for one in (seq, *self._answer_of(data, s, seq)):
                if str(one) not in messages:
                    messages[str(one)] = self._message(data, s, fid, one)

    def _timeline(self, data: ViewData, s: Session, fid: int, messages: dict[str, Any]) -> None:
        key = str(fid)
        total = data.session(s.id)["entries"]
        entries = data.timeline(s.id, 0, total, cap=total)["entries"]
        during: dict[str, Any] = {}
        locate: dict[str, Any] = {}
        for i, e in enumerate(entries):
            if e["type"] != "message":
                continue
            seq = e["seq"]
            locate[str(seq)] = {"index": i, "chain": [seq]}
            if "answer" in e:
                locate[str(e["answer"]["seq"])] = {"index": i, "chain": [e["answer"]["seq"], seq]}
            if e["children"]:
                inside = data.during(s.id, seq)
                inside["session"] = fid
                during[str(seq)] = inside
                for c in inside["entries"]:
                    locate[str(c["seq"])] = {"index": i, "chain": [c["seq"], seq]}
                    if "answer" in c:
                        locate[str(c["answer"]["seq"])] = {
                            "index": i, "chain": [c["answer"]["seq"], c["seq"], seq]}
        for seq in sorted(int(k) for k in locate):
            messages[str(seq)] = self._message(data, s, fid, seq)
        self.out["timeline"][key] = entries
        self.out["during"][key] = during
        self.out["locate"][key] = locate

    @staticmethod
    def _answer_of(data: ViewData, s: Session, seq: int) -> list[int]:
        from ..cassette.views import answer_seq

        found = answer_seq(data.cassette, s, seq)
        return [] if found is None else [found]

    @staticmethod
    def _message(data: ViewData, s: Session, fid: int, seq: int) -> dict[str, Any]:
        m = data.message(s.id, seq, text_max=FILE_TEXT_MAX)
        m["session"] = fid
        return m


def _data(c: Cassette, redact: Redactor | None) -> ViewData:
    return ViewData(c, redact if redact is not None else default_redactor(), withhold=True)


def view_html(cassette: str | os.PathLike[str], session: str | None = None, *,
              redact: Redactor | None = None) -> str:
    """The view of ``cassette`` (or of one session of it) as one HTML file."""
    with Cassette.open(cassette, read_only=True) as c:
        data = _data(c, redact)
        f = _File(data.cassette_info())
        chosen = [c.session(session, stats=False)] if session is not None else c.sessions()
        for s in chosen:
            f.add_session(data, s, s.id)
        if session is not None:
            f.out["start"] = f"#/s/{chosen[0].id}"
        return static_page(f.out, f"mcprec view: {Path(cassette).name}")


def write_view_html(out: str | os.PathLike[str], cassette: str | os.PathLike[str],
                    session: str | None = None, *, redact: Redactor | None = None) -> None:
    Path(out).write_bytes(view_html(cassette, session, redact=redact).encode("utf-8", "replace"))


def diff_html(result: DiffResult, *, redact: Redactor | None = None) -> str:
    """A diff as one HTML file: the report, both sessions (their timelines when they are small
    enough for a file) and, side by side, every exchange that differs."""
    a, b = result.a, result.b
    with Cassette.open(a.cassette, read_only=True) as ca, \
            Cassette.open(b.cassette, read_only=True) as cb:
        da, db = _data(ca, redact), _data(cb, redact)
        names = [str(a.cassette)] if a.cassette == b.cassette else [str(a.cassette),
                                                                      str(b.cassette)]
        info = da.cassette_info()
        info.update(path=" and ".join(names), name=" vs ".join(Path(n).name for n in names))
        f = _File(info)
        sa, sb = ca.session(a.session, stats=False), cb.session(b.session, stats=False)
        f.add_session(da, sa, 1, also=[e.seq_a for e in result.exchanges if e.seq_a is not None])
        f.add_session(db, sb, 2, also=[e.seq_b for e in result.exchanges if e.seq_b is not None])
        d = result.to_dict()
        d["session_ids"] = {"a": 1, "b": 2}
        da.guard_diff(d)
        f.out["diffs"]["1:2"] = d
        f.out["start"] = "#/diff?a=1&b=2"
        tool = "mcprec verify" if result.verify else "mcprec diff"
        return static_page(f.out, f"{tool}: {a.label} → {b.label}")


def write_diff_html(out: str | os.PathLike[str], result: DiffResult, *,
                    redact: Redactor | None = None) -> None:
    Path(out).write_bytes(diff_html(result, redact=redact).encode("utf-8", "replace"))
