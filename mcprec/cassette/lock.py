"""The lock that processes recording the same cassette take turns with: the pytest plugin's
workers (pytest-xdist) and ``mcprec replay`` in a recording mode, e.g. parallel CI jobs.

An exclusive ``flock`` on ``<cassette>.lock``, which holds the holder's process id. A process
whose ancestor holds it (``mcprec replay --mode once`` launched by a test while the plugin holds
the lock for that test) goes ahead: its ancestor took its turn for it. Without ``fcntl``
(Windows) it does not lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def cassette_lock(cassette: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on ``<cassette>.lock`` for the block, waiting for it if another
    process holds it. The lock file is removed on the way out."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = Path(cassette)
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if _held_by_ancestor(fd):
                    os.close(fd)
                    yield
                    return
                fcntl.flock(fd, fcntl.LOCK_EX)
            # the holder before us may have removed the file we waited on: lock the new one
            held = os.fstat(fd)
            now = os.stat(lock)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()  # before the lock goes, so that no one waits on a removed file
        os.close(fd)


def _held_by_ancestor(fd: int) -> bool:
    """Whether the process id in the lock file is one of this process's ancestors."""
    try:
        holder = int(os.pread(fd, 32, 0) or b"0")
    except (OSError, ValueError):
        return False
    return holder > 1 and holder in _ancestors()


def _ancestors() -> set[int]:
    """This process's parent, grandparent …: from /proc where there is one, else the parent."""
    found, pid = set(), os.getpid()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            found.add(os.getppid())
            break
        if pid <= 1:
            break
        found.add(pid)
    return found
