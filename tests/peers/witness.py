"""An independent witness of the bytes on a stdio pipe: ``witness.py DIR -- COMMAND...``.

Runs COMMAND and copies our stdin to its stdin and its stdout to our stdout, byte for byte,
keeping a copy of each direction in DIR/c2s.bin and DIR/s2c.bin. Deliberately simple (blocking
threads, no parsing) so that it shares no code with the tap under test. Exits with COMMAND's code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


def pump(src: int, dst: int | None, copy: Path, close_dst: bool) -> None:
    with open(copy, "wb", buffering=0) as out:
        while chunk := os.read(src, 1 << 16):
            out.write(chunk)
            if dst is not None:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
    if close_dst and dst is not None:
        os.close(dst)


def main() -> int:
    out_dir = Path(sys.argv[1])
    assert sys.argv[2] == "--", "usage: witness.py DIR -- COMMAND..."
    out_dir.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # pass them on, leave no orphan
        signal.signal(sig, lambda signum, frame: child.send_signal(signum))
    assert child.stdin is not None and child.stdout is not None
    c2s = threading.Thread(
        target=pump, args=(0, child.stdin.fileno(), out_dir / "c2s.bin", True), daemon=True
    )
    s2c = threading.Thread(target=pump, args=(child.stdout.fileno(), 1, out_dir / "s2c.bin", False))
    c2s.start()
    s2c.start()
    s2c.join()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
