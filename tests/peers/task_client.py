"""A stdio client of a 2025-11-25 task: ``python task_client.py POLL MAX -- CMD...``.

Initializes, calls server-everything's ``simulate-research-query`` as a task, then polls
``tasks/get`` every POLL seconds (POLL 0: polls never, waits for the status notifications) until
a terminal status, or MAX polls; then ``tasks/result`` once terminal (else it stops the
server, SIGTERM). Prints one JSON line: the
polls, the statuses seen, the seconds from the call to the terminal status, the notified ones."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

TERMINAL = ("completed", "failed", "cancelled")


def main() -> None:
    poll, most = float(sys.argv[1]), int(sys.argv[2])
    argv = sys.argv[sys.argv.index("--") + 1:]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    assert p.stdin is not None and p.stdout is not None
    buf = b""
    notes: list[str] = []
    started = time.monotonic()

    def send(o: dict[str, Any]) -> None:
        assert p.stdin is not None
        p.stdin.write(json.dumps(o).encode() + b"\n")
        p.stdin.flush()

    def recv(want: int | None, timeout: float = 30) -> dict[str, Any] | None:
        nonlocal buf
        end = time.monotonic() + timeout
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                o = json.loads(line)
                if want is not None and o.get("id") == want and "method" not in o:
                    return o  # type: ignore[no-any-return]
                if o.get("method") == "notifications/tasks/status":
                    notes.append(o["params"]["status"])
                    if want is None and notes[-1] in TERMINAL:
                        return None
            assert p.stdout is not None
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise TimeoutError(want)
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                raise EOFError(want)
            buf += data

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"tasks": {}},
        "clientInfo": {"name": "task-client", "version": "1"}}})
    recv(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    started = time.monotonic()
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "simulate-research-query", "arguments": {"topic": "x"}, "task": {"ttl": 60000}}})
    answer = recv(1)
    assert answer is not None
    tid = answer["result"]["task"]["taskId"]
    statuses: list[str] = []
    i = 2
    if poll == 0:
        recv(None)
        statuses.append(notes[-1])
    while poll and len(statuses) < most and (not statuses or statuses[-1] not in TERMINAL):
        time.sleep(poll)
        send({"jsonrpc": "2.0", "id": i, "method": "tasks/get", "params": {"taskId": tid}})
        got = recv(i)
        assert got is not None
        statuses.append(got["result"]["status"])
        i += 1
    done = round(time.monotonic() - started, 2)
    result = None
    if statuses[-1] in TERMINAL:
        send({"jsonrpc": "2.0", "id": i, "method": "tasks/result", "params": {"taskId": tid}})
        result = recv(i)
    print(json.dumps({"statuses": statuses, "done": done, "notes": notes,
                      "result": None if result is None else result.get("result")}))
    if statuses[-1] not in TERMINAL:  # stopped while working: the server goes too
        p.terminate()
    p.stdin.close()
    p.wait(10)


if __name__ == "__main__":
    main()
