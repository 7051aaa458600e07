"""A raw-byte "server" for transparency tests: ``byte_mirror.py RECEIVED_FILE``.

Writes a greeting (unsolicited, not JSON, with invalid UTF-8) at once, then mirrors every byte it
reads back to stdout through a fixed byte-wise table (chunking-independent, newlines kept), and
appends what it read, as read, to RECEIVED_FILE. On EOF it writes a farewell with no trailing
newline and exits 0.
"""

from __future__ import annotations

import os
import sys

GREETING = b"hello from byte_mirror \xff\xfe not json\n"
FAREWELL = b"bye: no newline at the end \x00\x80"
TABLE = bytes(b if b in (0x0A, 0x0B) else b ^ 0x01 for b in range(256))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main() -> None:
    with open(sys.argv[1], "wb", buffering=0) as received:
        write_all(1, GREETING)
        while chunk := os.read(0, 1 << 16):
            received.write(chunk)
            write_all(1, chunk.translate(TABLE))
        write_all(1, FAREWELL)


if __name__ == "__main__":
    main()
