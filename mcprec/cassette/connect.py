"""Opening a cassette's SQLite connection, the one opener of the project: read-only (never
writing), or created, migrated and with sessions left by a dead recorder repaired; checked (a
truncated file, a newer format, damage); SQLite errors translated into the project's own."""

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


def connect(path: str | os.PathLike[str], *, create: bool = False, wait: bool = True,
            read_only: bool = False) -> sqlite3.Connection:
    """Open a cassette's SQLite connection: the one opener of the project.

    Writable (the default): the schema is created (``create``) and migrated as needed, the file
    switched to WAL, and sessions whose recorder died are marked incomplete. The connection is
    in autocommit mode; writers wrap their work in ``BEGIN IMMEDIATE``.

    ``read_only``: nothing is ever written to the cassette (no migration, no journal-mode
    switch, no repair: an abandoned session is reported as it is). The file is opened with
    SQLite's ``mode=ro``, or, where nothing can be writing it (a read-only filesystem, or a
    folder where the ``-wal``/``-shm`` files cannot be made), as ``immutable``. A cassette of
    any older format is read as it is.

    With ``wait`` (readers; not with ``create``), a session that has ended but whose recorder
    is still writing it is waited for (bounded): a reader never sees half of a finished session.
    """
    if create and read_only:
        raise ValueError("a cassette is created writable")
    path = Path(path)
    if path.is_dir():
        raise CassetteError(f"{path} is a directory, not a cassette file")
    if not path.exists():
        if not create:
            raise CassetteError(
                f"no cassette at {path}; record one with `mcprec record -c {path} -- SERVER...`"
            )
        _make(path)
    elif create and path.stat().st_size == 0:
        # made beforehand (touch, mktemp): a cassette is owner-only whoever made the file
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
    if read_only:
        conn = _open_read_only(path)
    else:
        try:
            conn = sqlite3.connect(  # absolute: a name such as file:z.db is a file, not a URI
                os.path.abspath(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                check_same_thread=False)
        except sqlite3.Error as e:
            raise CassetteError(f"cannot open cassette {path}: {e}") from e
    try:
        _prepare(conn, path, create=create, wait=wait and not create, read_only=read_only)
    except BaseException:
        conn.close()
        raise
    return conn


def _make(path: Path) -> None:
    """An empty, owner-only file at ``path`` (and its folder), or a one-line error."""
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            # said, not silent: a typo in -c would otherwise leave a cassette somewhere unexpected
            _log.warning("cassette", f"created directory {path.parent} for the cassette")
        try:  # owner-only: cassettes hold private traffic
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
    except (FileExistsError, NotADirectoryError) as e:  # a file where a folder should be
        raise CassetteError(f"cannot create cassette {path}: a part of {path.parent} is a "
                            "file, not a directory") from e
    except OSError as e:
        where = e.filename or path
        raise CassetteError(
            f"cannot create cassette {path}: {e.strerror or e} ({where})") from e


def _sqlite_uri(path: Path, query: str) -> str:
    """A ``file:`` URI of ``path`` (quoted: a name such as ``file:z.db`` or one holding ``?``
    or ``#`` stays a plain file)."""
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(path))}?{query}"


def _unwritable_place(path: Path) -> bool:
    """Whether nothing can be writing ``path``'s journal: its filesystem is read-only, or its
    folder takes no new file (so no ``-wal``/``-shm`` can be made beside it)."""
    with contextlib.suppress(OSError):
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return True
    return not os.access(path.parent, os.W_OK)


def unwritable(path: str | os.PathLike[str]) -> bool:
    """Whether the cassette at ``path`` cannot be written here: its filesystem is read-only,
    or the file or its folder is not writable by this user."""
    p = Path(path)
    return _unwritable_place(p) or (p.exists() and not os.access(p, os.W_OK))


def _open_read_only(path: Path) -> sqlite3.Connection:
    def attempt(query: str) -> sqlite3.Connection:
        conn = sqlite3.connect(_sqlite_uri(path, query), uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None, check_same_thread=False)
        try:  # the first read opens the journal: a WAL file without its -shm fails here
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    try:
        return attempt("mode=ro")
    except sqlite3.DatabaseError as e:
        if isinstance(e, sqlite3.OperationalError) and _unwritable_place(path):
            wal = Path(f"{path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise CassetteError(
                    f"cannot read cassette {path}: its {wal.name} holds recent writes that "
                    f"SQLite reads only with a {path.name}-shm beside it, which this folder "
                    "cannot take; copy the cassette and its -wal somewhere writable") from e
            try:
                return attempt("mode=ro&immutable=1")
            except sqlite3.Error as e2:
                raise _open_error(path, e2) from e2
        raise _open_error(path, e) from e
    except sqlite3.Error as e:
        raise _open_error(path, e) from e


def sidecars_absent(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` has neither a ``-wal`` nor a ``-shm`` file beside it (see ``tidy``)."""
    return not os.path.exists(f"{path}-wal") and not os.path.exists(f"{path}-shm")


def tidy(path: str | os.PathLike[str]) -> None:
    """After a read-only connection is closed: remove the ``-wal``/``-shm`` files it left
    beside a cassette that had none, as SQLite does when the last connection that may write
    closes (one is opened and closed for that: a checkpoint of an empty WAL writes nothing; with
    another connection open, they stay). Never raises."""
    if sidecars_absent(path) or not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        return
    with contextlib.suppress(sqlite3.Error, OSError):
        conn = sqlite3.connect(os.path.abspath(path), timeout=0.1, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    # a damaged file SQLite would not open: an empty WAL (a read-only connection writes no
    # frame) and its index are only what that connection made
    with contextlib.suppress(OSError):
        if os.path.getsize(f"{path}-wal") == 0:
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")


def _open_error(path: Path, e: sqlite3.Error) -> CassetteError:
    msg = str(e)
    if isinstance(e, sqlite3.OperationalError) and "decode" not in msg:
        if "unable to open" in msg and not os.access(path, os.R_OK):
            return CassetteError(f"cannot read cassette {path}: permission denied")
        return CassetteError(f"cannot open cassette {path}: {msg}")
    return NotACassetteError(
        f"{path} is not an mcprec cassette (not a SQLite database, or corrupt: {msg})")


def _format_version(conn: sqlite3.Connection, path: Path) -> int | None:
    """``schema.read_format_version``, with a damaged or foreign value as a one-line error."""
    try:
        return schema.read_format_version(conn)
    except (ValueError, UnicodeDecodeError) as e:
        raise NotACassetteError(
            f"{path} is corrupt or not an mcprec cassette (its format version is unreadable: "
            f"{e})") from e


def _prepare(conn: sqlite3.Connection, path: Path, *, create: bool, wait: bool,
             read_only: bool = False) -> None:
    try:
        version = _format_version(conn, path)
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
        if read_only:
            conn.execute("PRAGMA query_only = ON")
            _check_length(conn, path)
            if wait:
                _wait_for_finishing(conn)
            return
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
        if "not a database" in msg or "malformed" in msg or "decode" in msg:
            raise NotACassetteError(
                f"{path} is not an mcprec cassette (not a SQLite database, or corrupt: {msg})"
            ) from e
        if "readonly" in msg or "read-only" in msg:
            raise CassetteError(
                f"cassette {path} is read-only: {msg} (commands that only read it open it "
                "read-only)") from e
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


_RECORDING = ("SELECT id, recorder_pid, recorder_host, ended_at FROM sessions "
              "WHERE status = 'recording'")


def _wait_for_finishing(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """Wait (at most ``FINISH_WAIT_S``) while a session has ended (``ended_at`` set) but is
    still being written by its live recorder on this host (status ``recording``): the tap exits
    at once, the recorder commits the rest on its own. Returns the sessions still recording."""
    host = _hostname()
    rows = conn.execute(_RECORDING).fetchall()
    deadline = time.monotonic() + FINISH_WAIT_S
    while time.monotonic() < deadline and any(
            r[3] is not None and r[2] == host and r[1] and _pid_alive(r[1]) for r in rows):
        time.sleep(0.005)
        rows = conn.execute(_RECORDING).fetchall()
    return rows


def abandoned(conn: sqlite3.Connection) -> set[int]:
    """The sessions still marked ``recording`` whose recorder on this host is gone (kill -9,
    power loss): incomplete, whatever the file says. A read-only reader reports them so."""
    host = _hostname()
    return {r[0] for r in conn.execute(_RECORDING).fetchall()
            if r[2] == host and r[1] and not _pid_alive(r[1])}


def _repair_abandoned(conn: sqlite3.Connection, *, wait: bool = False) -> None:
    """Mark sessions whose recorder on this host died (kill -9, power loss) as incomplete
    (with ``wait``: once those being finished are, see ``_wait_for_finishing``)."""
    host = _hostname()
    rows = _wait_for_finishing(conn) if wait else conn.execute(_RECORDING).fetchall()
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
    if isinstance(e, sqlite3.OperationalError) and "decode" not in str(e):
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


@contextlib.contextmanager
def translated_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """SQLite errors raised in the block, as ``CassetteError``s naming ``path``: for code that
    works on a cassette's connection itself (redact in place, import)."""
    try:
        yield
    except sqlite3.Error as e:
        raise _database_error(Path(path), e) from e


DatabaseError = sqlite3.Error
"""What SQLite raises, for the few readers that meet it outside ``Cassette``'s translated
methods (a large message's text read in pieces)."""


def copy_cassette(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """A consistent copy of ``src`` at ``dst`` through SQLite's backup API (its WAL included),
    ``src`` opened read-only (as ``connect`` opens it); a stale WAL beside ``dst`` is removed
    first, or it would be read as the copy's."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    source = _open_read_only(Path(src))
    try:
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
