"""Opening a cassette's SQLite connection: created, migrated, checked (a truncated file, a
newer format), and sessions left by a dead recorder repaired; SQLite errors translated into the
project's own."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from .store import Cassette


from .. import __version__, _log
from ..errors import CassetteError, FormatTooNewError, NotACassetteError
from . import schema


BUSY_TIMEOUT_S = 30.0

@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` on ``conn`` (in autocommit mode), committed at the end of the block,
    rolled back if it raises (a failed commit too)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may have rolled back already (SQLITE_FULL, IOERR): a ROLLBACK then fails with
        # "no transaction is active", which would hide the real error
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def connect(path: str | os.PathLike[str], *, create: bool = False,
            wait: bool = True) -> sqlite3.Connection:
    """Open a cassette's SQLite connection, creating and migrating the schema as needed.

    The connection is in autocommit mode; writers wrap their work in ``BEGIN IMMEDIATE``.
    With ``wait`` (readers; not with ``create``), a session that has ended but whose recorder
    is still writing it is waited for (bounded): a reader never sees half of a finished session.
    """
    path = Path(path)
    if path.is_dir():
        raise CassetteError(f"{path} is a directory, not a cassette file")
    if not path.exists():
        if not create:
            raise CassetteError(
                f"no cassette at {path}; record one with `mcprec record -c {path} -- SERVER...`"
            )
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            # said, not silent: a typo in -c would otherwise leave a cassette somewhere unexpected
            _log.warning("cassette", f"created directory {path.parent} for the cassette")
        try:  # owner-only: cassettes hold private traffic
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
    elif create and path.stat().st_size == 0:
        # made beforehand (touch, mktemp): a cassette is owner-only whoever made the file
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
    try:
        conn = sqlite3.connect(  # absolute: a name such as file:z.db is a file, not a URI
            os.path.abspath(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
            check_same_thread=False)
    except sqlite3.Error as e:
        raise CassetteError(f"cannot open cassette {path}: {e}") from e
    try:
        _prepare(conn, path, create=create, wait=wait and not create)
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, path: Path, *, create: bool, wait: bool) -> None:
    try:
        version = schema.read_format_version(conn)
        if version is None:
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise NotACassetteError(
                    f"{path} is a SQLite database but not an mcprec cassette (no meta table)"
                )
            if not create:
                raise CassetteError(f"{path} is an empty file, not a cassette; nothing recorded yet")
        elif version > schema.FORMAT_VERSION:
            raise FormatTooNewError(
                f"{path} was written by a newer mcprec (cassette format {version}; this mcprec "
                f"{__version__} reads up to {schema.FORMAT_VERSION}); upgrade mcprec to read it"
            )
        if version is None:
            # before the first table and WAL: large pages suit large messages (fewer overflow
            # pages to write); a no-op when another process created the schema meanwhile
            conn.execute(f"PRAGMA page_size = {schema.PAGE_SIZE}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            _to_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if version is None or version < schema.FORMAT_VERSION:
            try:
                _migrate(conn)
            except sqlite3.OperationalError as e:
                if version is None or "readonly" not in str(e):
                    raise
                # an older cassette on a read-only file or folder: read it as it is
        _check_length(conn, path)
        _repair_abandoned(conn, wait=wait)
    except sqlite3.DatabaseError as e:
        msg = str(e)
        if "not a database" in msg or "malformed" in msg:
            raise NotACassetteError(
                f"{path} is not an mcprec cassette (not a SQLite database, or corrupt: {msg})"
            ) from e
        if "readonly" in msg or "read-only" in msg:
            raise CassetteError(f"cassette {path} is read-only: {msg}") from e
        raise CassetteError(f"cannot open cassette {path}: {msg}") from e


def _to_wal(conn: sqlite3.Connection, patience_s: float = 10.0) -> None:
    """Switch a new cassette to WAL. SQLite answers "locked" at once, without its busy
    timeout, while another process is creating the same cassette: retry, briefly."""
    import time

    deadline = time.monotonic() + patience_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _migrate(conn: sqlite3.Connection) -> None:
    with write_transaction(conn):
        if (schema.read_format_version(conn) or 0) < schema.FORMAT_VERSION:
            schema.migrate(conn, mcprec_version=__version__)


def _check_length(conn: sqlite3.Connection, path: Path) -> None:
    """A truncated file (a cut-short copy or download) is caught at once, not mid-replay."""
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # pages may live in the WAL: the main file can be shorter
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = path.stat().st_size
    if size < pages * page_size:
        raise NotACassetteError(
            f"{path} is corrupt: truncated to {size} bytes of {pages * page_size}; "
            "restore it from a good copy"
        )


def _hostname() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it (without importing socket:
    replay's start-up pays for every import)."""
    return os.uname().nodename


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


FINISH_WAIT_S = 60.0
"""How long a reader waits for a recorder to finish writing a session that has ended."""


def _repair_abandoned(conn: sqlite3.Connection, *, wait: bool = False) -> None:
    """Mark sessions whose recorder on this host died (kill -9, power loss) as incomplete.

    With ``wait``, first wait while a session has ended (``ended_at`` set) but is still being
    written by its live recorder (status ``recording``): the tap exits at once, the recorder
    commits the rest on its own.
    """
    host = _hostname()
    query = ("SELECT id, recorder_pid, recorder_host, ended_at FROM sessions "
             "WHERE status = 'recording'")
    rows = conn.execute(query).fetchall()
    deadline = time.monotonic() + FINISH_WAIT_S
    while wait and time.monotonic() < deadline and any(
            r[3] is not None and r[2] == host and r[1] and _pid_alive(r[1]) for r in rows):
        time.sleep(0.005)
        rows = conn.execute(query).fetchall()
    dead = [r[0] for r in rows if r[2] == host and r[1] and not _pid_alive(r[1])]
    if not dead:
        return
    try:
        with write_transaction(conn):
            conn.executemany(
                "UPDATE sessions SET status = 'incomplete', ended_at = coalesce(ended_at, ?) "
                "WHERE id = ? AND status = 'recording'",
                [(schema.now_iso(), i) for i in dead],
            )
            if (schema.read_format_version(conn) or 0) >= schema.PLAN_FORMAT_VERSION:
                from . import plan

                for sid in dead:  # ended now: replayed from a plan, as any other
                    plan.build_or_skip(conn, sid)
    except sqlite3.OperationalError:  # read-only or busy: repair next time
        pass


def _database_error(path: Path, e: sqlite3.Error) -> CassetteError:
    """A SQLite failure while reading, as the project's error: SQL stays behind this line."""
    if isinstance(e, sqlite3.OperationalError):
        return CassetteError(f"cannot read cassette {path}: {e}")
    return NotACassetteError(
        f"{path} is corrupt or truncated ({e}); record it again or restore it from a copy")


if TYPE_CHECKING:
    _F = TypeVar("_F", bound=Callable[..., Any])


def _translated(fn: _F) -> _F:
    """A ``Cassette`` method whose SQLite errors reach callers as ``CassetteError``s."""
    @functools.wraps(fn)
    def wrapper(self: Cassette, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise _database_error(self.path, e) from e
    return wrapper  # type: ignore[return-value]


def _translated_iter(fn: _F) -> _F:
    """``_translated`` for a method that yields rows as it reads them."""
    @functools.wraps(fn)
    def wrapper(self: Cassette, *args: Any, **kwargs: Any) -> Any:
        try:
            yield from fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise _database_error(self.path, e) from e
    return wrapper  # type: ignore[return-value]


DatabaseError = sqlite3.Error
"""What SQLite raises, for the few readers that meet it outside ``Cassette``'s translated
methods (a large message's text read in pieces)."""


def copy_cassette(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """A consistent copy of ``src`` at ``dst`` through SQLite's backup API (its WAL included),
    ``src`` opened read-only; a stale WAL beside ``dst`` is removed first, or it would be read
    as the copy's."""
    from urllib.parse import quote

    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    try:
        source = sqlite3.connect(f"file:{quote(str(Path(src).resolve()))}?mode=ro", uri=True)
        try:
            target = sqlite3.connect(os.path.abspath(dst))
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as e:
        raise _database_error(Path(src), e) from e
