"""Verify a new build of a server against a recording: re-drive it with the recorded client
traffic (the mock client), record the new run as a session of its own, and diff the two."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any


from .. import _log
from ..cassette import Cassette
from ..errors import ServerStartError, UsageError
from ..record import check_command
from ..redact import Redactor
from ..diff.load import MINTED_TAG
from ..replay.playback import check_replayable
from .client import DEFAULT_TIMEOUT_S, DriveResult, drive_http, drive_stdio
from .pending import PendingRun


@dataclass
class Verification:
    original: str
    new: str
    drive: DriveResult


def _session_rules(redact: Redactor | None, c: Cassette, s: Any) -> Redactor:
    """The rules given, plus those the reference session was redacted with (its manifest):
    the new run is redacted alike, so that the two compare."""
    from ..redact.manifest import redactor_like

    return redactor_like(redact, c, s)


def run_verification(
    cassette: str | os.PathLike[str],
    server: Sequence[str] = (),
    *,
    target: str | None = None,
    session: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    redact: Redactor | None = None,
) -> Verification:
    """Drive ``server`` (a stdio command) or ``target`` (a Streamable HTTP URL) with the
    session's client traffic; record the run next to it."""
    if target is None and not server:
        raise UsageError("give the server to verify after `--`, or --target URL")
    if target is not None and server:
        raise UsageError("give either --target URL or a server command, not both")
    if target is None:
        check_command(server)
    path = Path(cassette)
    with Cassette.open(path) as c:
        s = c.session(session) if session is not None else _latest_reference(c)
        check_replayable(c, s)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        name = f"{s.name}-verify-{stamp}"
        rules = _session_rules(redact, c, s)
        pending = PendingRun()  # the cassette is written only once the run completed
        result = (drive_http(c, s, target, pending, timeout=timeout) if target
                  else drive_stdio(c, s, server, pending, timeout=timeout))
        if result.gone is not None:
            who = target if target else server[0]
            code = (f" (exit code {result.exit_code})" if result.exit_code and not result.hung
                    else "")
            said = (f"; its stderr ended: {result.stderr_tail[-1]}" if result.stderr_tail
                    else "")
            raise ServerStartError(f"verify: the server {who} {result.gone}{code}{said}")
        for old in c.sessions():  # keep one verification run per reference: the new one
            if old.tags.get("verify_of") == s.name:
                c.delete_session(old.name)
    tags = {"verify_of": s.name}
    if result.minted:  # the diff reads the live values as the recorded ones (docs/diff.md)
        tags[MINTED_TAG] = json.dumps({live: old for old, live in result.minted.items()})
    pending.store(path, name, transport="http" if target else "stdio",
                  target=target if target else list(server), tags=tags,
                  redact=rules, exit_code=result.exit_code)
    for rid in result.timed_out:
        _log.warning("verify", f"verify: no answer to request id={rid} within {timeout:g} s")
    for method in result.server_requests_unanswerable:
        _log.warning("verify", f"verify: the server asked {method!r}, which the recording "
                     "cannot answer")
    return Verification(s.name, name, result)


def _latest_reference(c: Cassette) -> Any:
    """The latest session that is not itself a verification run."""
    references = [s for s in c.sessions() if "verify_of" not in s.tags]
    if not references:
        return c.session(None)  # raises the usual "no sessions" error, or takes what is there
    return references[-1]


def accept(cassette: str | os.PathLike[str], v: Verification) -> None:
    """``--update``: the new run becomes the reference, under the original's name."""
    with Cassette.open(cassette) as c:
        c.delete_session(v.original)
        c.rename_session(v.new, v.original)
        accepted = c.session(v.original)  # a reference now, no longer a verification run
        c.update_session(accepted, tags={k: x for k, x in accepted.tags.items()
                                         if k not in ("verify_of", MINTED_TAG)})


def describe(result: Any, cassette: str | os.PathLike[str], v: Verification,
             server: Sequence[str], target: str | None, *, failed: bool) -> None:
    """Mark ``result`` (a ``DiffResult``) as this verification's, for its reports: what was
    verified, against which reference, and the exit status the gate gave."""
    result.verify = {"server": None if target else list(server), "target": target,
                     "reference": f"{cassette}:{v.original}", "new_session": v.new,
                     "exit_status": 1 if failed else 0, "client_order": list(v.drive.order),
                     "minted": len(v.drive.minted)}


def refs(cassette: str | os.PathLike[str], v: Verification) -> tuple[str, str]:
    return f"{cassette}:{v.original}", f"{cassette}:{v.new}"


__all__ = ["Verification", "accept", "describe", "refs", "run_verification"]

