"""Tasks (2025-11-25) replayed as state over time, not as the n-th recorded poll.

Each task's recorded status timeline (its ``tasks/get`` answers and ``notifications/tasks/status``)
is served by the time elapsed since the client's request created it, as recorded (``--timing``
scales it): a client polling faster or slower than the recorded one sees each status when the
recorded server reported it, and a recording that ended in a terminal status always reaches it.
Status notifications play at their recorded offsets from the creation, once each. A recording that stopped while a task was still
working answers its last status, and the report says so.

Imported only for sessions whose recording polls a task.
"""

from __future__ import annotations

from typing import Any

from .. import _log, wire
from ..cassette import Cassette, Message, Session

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUS = "notifications/tasks/status"


class _Timeline:
    __slots__ = ("created", "entries", "served", "base")

    def __init__(self, created: Message) -> None:
        self.created = created  # the client request that created the task
        self.entries: list[tuple[int, dict[str, Any], Message | None]] = []
        """(recorded offset from the creating request in ns, the task, the status notification
        it came in, or None: a tasks/get answer), in recorded order."""
        self.served = -1  # the latest entry the client was told
        self.base: float | None = None  # the live time of the creating request


class Tasks:
    """The recorded tasks of one session, and what this client was told of each."""

    def __init__(self, cassette: Cassette, session: Session) -> None:
        self.timelines: dict[str, _Timeline] = {}
        self.creations: dict[int, list[_Timeline]] = {}  # creating request seq -> its tasks
        self.gets: set[int] = set()  # recorded tasks/get request seqs
        self.results: set[int] = set()  # recorded tasks/result request seqs
        self.notes: set[int] = set()  # recorded status notification seqs
        self.unfinished: list[dict[str, Any]] = []
        self._said: set[str] = set()
        self._played: set[int] = set()
        requests: dict[int, Message] = {}
        for m in cassette.messages(session):
            kind = m.kind
            if kind == wire.REQUEST and m.direction == wire.CLIENT_TO_SERVER:
                requests[m.seq] = m
                if m.method == "tasks/get":
                    self.gets.add(m.seq)
                elif m.method == "tasks/result":
                    self.results.add(m.seq)
                continue
            if kind == wire.RESPONSE and m.reply_to in requests and b'"taskId"' in m.raw:
                result = m.json.get("result") if isinstance(m.json, dict) else None
                req = requests[m.reply_to]
                if not isinstance(result, dict):
                    continue
                task = result.get("task")
                if isinstance(task, dict) and isinstance(task.get("taskId"), str):
                    line = self.timelines[task["taskId"]] = _Timeline(req)
                    self.creations.setdefault(req.seq, []).append(line)
                    line.entries.append((m.t_ns - req.t_ns, task, None))
                elif req.method == "tasks/get" and isinstance(result.get("status"), str):
                    got = self.timelines.get(str(result.get("taskId")))
                    if got is not None:
                        task = {k: v for k, v in result.items() if k != "_meta"}
                        got.entries.append((m.t_ns - got.created.t_ns, task, None))
            elif kind == wire.NOTIFICATION and m.method == STATUS:
                params = m.json.get("params") if isinstance(m.json, dict) else None
                told = self.timelines.get(str((params or {}).get("taskId")))
                if told is not None and isinstance(params, dict):
                    task = {k: v for k, v in params.items() if k != "_meta"}
                    told.entries.append((m.t_ns - told.created.t_ns, task, m))
                    self.notes.add(m.seq)
        for tid, line in self.timelines.items():
            line.entries.sort(key=lambda e: e[0])
            last = line.entries[-1][1].get("status")
            if last not in TERMINAL:
                self.unfinished.append({
                    "taskId": tid, "status": last,
                    "reason": "the recording stopped while the task was still " + str(last)})

    def created(self, seq: int, started: float) -> list[tuple[_Timeline, list[Message]]]:
        """The client's request played as the recorded ``seq`` created tasks: their status
        notifications, to play at their recorded offsets from ``started``."""
        out = []
        for line in self.creations.get(seq, ()):
            line.base = started
            line.served = -1
            out.append((line, [n for _, _, n in line.entries if n is not None]))
        return out

    def status(self, task_id: Any, now: float, scale: float) -> dict[str, Any] | None:
        """The task's status for a ``tasks/get`` at ``now``: the latest the recorded server had
        reported at that offset from the creation (``scale``: --timing), never an older one than
        the client was told; None for a task not recorded (or not created by this client)."""
        line = self.timelines.get(task_id) if isinstance(task_id, str) else None
        if line is None or line.base is None:
            return None
        elapsed_ns = (now - line.base) / scale * 1e9 if scale > 0 else float("inf")
        i = line.served
        while i + 1 < len(line.entries) and line.entries[i + 1][0] <= elapsed_ns:
            i += 1
        line.served = i = max(i, 0)
        task = line.entries[i][1]
        if i == len(line.entries) - 1 and task.get("status") not in TERMINAL and (
                task_id not in self._said):
            self._said.add(task_id)
            _log.warning("replay", f"task {task_id}: the recording stopped while it was "
                         f"{task.get('status')}; replay answers that status from now on")
        return task

    def ends_at(self, task_id: Any, scale: float) -> float | None:
        """When (a ``clock()`` time) the task reaches its recorded terminal status, replayed
        (``scale``: --timing); None when it never does or was not created by this client."""
        line = self.timelines.get(task_id) if isinstance(task_id, str) else None
        if line is None or line.base is None:
            return None
        for offset, task, _ in line.entries:
            if task.get("status") in TERMINAL:
                return line.base + offset / 1e9 * scale
        return None

    def told(self, m: Message) -> bool:
        """A recorded status notification is about to play (from the script it was recorded
        in, or at its offset from the creation): False when it played already."""
        if m.seq not in self.notes:
            return True
        if m.seq in self._played:
            return False
        self._played.add(m.seq)
        return True
