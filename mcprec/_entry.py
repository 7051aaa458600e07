"""The ``mcprec`` entry point: a fast path for plain replays, else the full command line."""

from __future__ import annotations

import os
import sys

from .errors import McprecError


# options whose default the fast path may be given explicitly
_DEFAULTS = frozenset({("-m", "none"), ("--mode", "none"), ("--timing", "none"),
                       ("--repeat", "last"), ("--protocol-version", "recorded")})


def _fast_replay(args: list[str]) -> int | None:
    """``mcprec replay CASSETTE|-c CASSETTE [-s NAME] [--report FILE] [--allow-unmatched]
    [--protocol-version rewrite]``, the form test
    suites launch most, without loading click: every test pays the start-up. Anything else
    returns None and goes through the full command line (tests/project/test_entry.py checks that both
    give the same exit codes and messages)."""
    if len(args) >= 2 and args[0] in ("-c", "--cassette") and not args[1].startswith("-"):
        args = [args[1], *args[2:]]  # the cassette as ``record -c`` takes it
    if os.environ.get("MCPREC_MODE", "none") != "none" or not args or args[0].startswith("-"):
        return None
    cassette, rest = args[0], args[1:]
    if os.path.isdir(cassette):
        return None  # the full command line says so, as a usage error
    from .config import mentions

    if mentions(b"faults", b"normaliz"):  # replay settings the full command line reads
        return None
    session, report, allow = os.environ.get("MCPREC_SESSION"), None, False
    version = "recorded"
    while rest:
        if len(rest) >= 2 and rest[0] in ("-s", "--session"):
            session, rest = rest[1], rest[2:]
        elif len(rest) >= 2 and rest[0] == "--report":
            report, rest = rest[1], rest[2:]
        elif len(rest) >= 2 and (rest[0], rest[1]) in _DEFAULTS:
            rest = rest[2:]  # a default said out loud
        elif rest[0] == "--allow-unmatched":
            allow, rest = True, rest[1:]
        elif rest[:2] == ["--protocol-version", "rewrite"]:
            version, rest = "rewrite", rest[2:]
        else:
            return None
    from . import _log
    from .replay import replay_stdio

    _log.to_stderr()
    try:
        return replay_stdio(cassette, session=session, report=report, allow_unmatched=allow,
                            protocol_version=version)
    except McprecError as e:
        print(f"mcprec: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


def _exit_now(code: int) -> None:
    """Exit with ``code`` once stdout and stderr are flushed, without the interpreter's teardown
    (every module and object freed one by one; the cassette is closed already): a replay
    launched per test ended 12.3 -> 2.5 ms after its client closed stdin (medians of 11)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _std_fds() -> None:
    """Open /dev/null on fd 0, 1 or 2 where whoever started us closed it (a shell's ``1>&-``):
    else the first file opened (a cassette, a pipe to the server) takes that number and is
    read or written as if it were stdin or stdout. Python leaves ``sys.stdout`` None then."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
            if getattr(sys, name) is None:
                setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))


def main(argv: list[str] | None = None) -> None:
    if argv is None:  # the process is ours
        _std_fds()
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["replay"]:
        code = _fast_replay(args[1:])
        if code is not None:
            if argv is None:  # the process is ours: nothing is left to tear down
                _exit_now(code)
            sys.exit(code)
    from .cli import main as cli_main

    cli_main(argv)
