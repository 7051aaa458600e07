"""A stdio "server" that floods its client: it says ``ready`` on stderr, waits for one line
on stdin, then writes ``COUNT`` notifications of ``SIZE`` bytes each as fast as the pipe takes
them, and exits at stdin's EOF. For back-pressure tests: the output outruns a recorder that
cannot keep up.

Usage: flood_server.py COUNT SIZE
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    count, size = int(sys.argv[1]), int(sys.argv[2])
    os.write(2, b"flood: ready\n")
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
    line += b"x" * (size - len(line) - 4) + b'"}}\n'
    sys.stdin.buffer.readline()
    view = memoryview(line * count)
    while view:
        view = view[os.write(1, view):]
    sys.stdin.buffer.read()  # until the client closes


if __name__ == "__main__":
    main()
