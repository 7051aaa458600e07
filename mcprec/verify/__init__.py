"""Verify a new build of a server against a recording.

- ``client``: the mock client, which re-drives a real server with a session's recorded client
  traffic (over stdio or Streamable HTTP) and records what it answers;
- ``run``: one verification (``run_verification``): the new run stored as a session of its own
  next to the reference, ``accept`` for ``--update``;
- ``gate``: the diff settings (options over the ``[diff]`` config) and the pass/fail rule, one
  ``Gate`` for ``mcprec verify`` and the pytest ``mcprec_verify``;
- ``all``: one session under a gate, or every reference session (``verify --all``) and its
  summary;
- ``check``: what the pytest ``mcprec_verify`` fixture runs (no pytest in it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Gate": "gate", "resolve": "gate",
    "Run": "all", "expand_cassettes": "all", "reference_sessions": "all", "verify_one": "all",
    "Verification": "run", "accept": "run", "refs": "run", "run_verification": "run",
}

if TYPE_CHECKING:
    from .all import Run, expand_cassettes, reference_sessions, verify_one
    from .gate import Gate, resolve
    from .run import Verification, accept, refs, run_verification

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """The names above, imported when first used: ``verify.gate`` alone stays cheap (the CLI's
    ``diff`` needs it, not the mock client)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcprec.verify' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
