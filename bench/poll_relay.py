"""A bare stdio relay on a blocking poll loop: what relaying costs in Python without asyncio.

    python bench/poll_relay.py -- SERVER_CMD...

The same job as bare_relay.py (spawn the server, forward our stdin to its stdin and its stdout
to our stdout, each chunk written the moment it is read; no framing, parsing or recording),
on ``select.poll`` with ``os.read``/``os.write`` instead of asyncio's pipe transports: what a
tap could cost if its hot path left asyncio. A side whose write would block is buffered and
its source is not read until the buffer drains (the same back-pressure as bare_relay.py).
The server's stderr is inherited. Exits with the server's exit code.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

READ = 1 << 16
_IN = select.POLLIN | select.POLLHUP | select.POLLERR


def main() -> int:
    argv = sys.argv[sys.argv.index("--") + 1:]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    to_server, from_server = child.stdin.fileno(), child.stdout.fileno()
    for fd in (0, 1, to_server, from_server):
        os.set_blocking(fd, False)
    # source -> destination, and what waits to be written to each destination
    route = {0: to_server, from_server: 1}
    pending = {to_server: bytearray(), 1: bytearray()}
    source_of = {to_server: 0, 1: from_server}
    poller = select.poll()
    for fd in route:
        poller.register(fd, _IN)
    reading = set(route)
    while from_server in reading or pending[1]:
        for fd, events in poller.poll():
            if fd in route:
                data = os.read(fd, READ) if events & _IN else b""
                dest = route[fd]
                if not data:
                    poller.unregister(fd)
                    reading.discard(fd)
                    if fd == 0 and not pending[to_server]:
                        child.stdin.close()
                    continue
                try:
                    n = os.write(dest, data)
                except BlockingIOError:
                    n = 0
                if n < len(data):  # the destination is full: hold the source until it drains
                    pending[dest] += data[n:]
                    poller.modify(fd, 0)
                    poller.register(dest, select.POLLOUT)
            else:
                buf = pending[fd]
                del buf[:os.write(fd, buf)]
                if not buf:
                    poller.unregister(fd)
                    source = source_of[fd]
                    if source in reading:
                        poller.modify(source, _IN)
                    elif source == 0:
                        child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
