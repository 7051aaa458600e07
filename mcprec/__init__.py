"""mcprec: record, replay and diff Model Context Protocol traffic.

The public surface, re-exported here lazily so that ``mcprec replay`` starts fast (a test holds
``__all__`` to this list):

- cassettes: ``open_cassette``, ``Cassette``, ``Session``, ``Message``
- recording: ``record_stdio``, ``record_http``
- replay: ``replay_stdio``, ``replay_http``, ``ReplaySettings``, ``MatchOptions``
- diff and verify: ``diff_sessions``, ``assert_no_breaking_changes``, ``run_verification``
- secrets: ``Redactor``, ``Rules``
- errors: ``McprecError``, ``CassetteError``, ``NoMatchError``
- ``__version__``
"""

from __future__ import annotations

# typing is imported for type checkers only (below): at run time it cost replay's start-up
# ~3-5 ms
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS = {
    "Cassette": "mcprec.cassette",
    "Session": "mcprec.cassette",
    "Message": "mcprec.cassette",
    "open_cassette": "mcprec.cassette",
    "record_stdio": "mcprec.record.api",
    "record_http": "mcprec.record.api",
    "replay_stdio": "mcprec.replay",
    "replay_http": "mcprec.replay",
    "ReplaySettings": "mcprec.replay",
    "MatchOptions": "mcprec.matching",
    "diff_sessions": "mcprec.diff",
    "assert_no_breaking_changes": "mcprec.diff",
    "run_verification": "mcprec.verify",
    "Redactor": "mcprec.redact",
    "Rules": "mcprec.redact",
    "McprecError": "mcprec.errors",
    "CassetteError": "mcprec.errors",
    "NoMatchError": "mcprec.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from typing import Any

    from .cassette import Cassette, Message, Session, open_cassette
    from .diff import assert_no_breaking_changes, diff_sessions
    from .errors import CassetteError, McprecError, NoMatchError
    from .matching import MatchOptions
    from .record.api import record_http, record_stdio
    from .redact import Redactor, Rules
    from .replay import ReplaySettings, replay_http, replay_stdio
    from .verify import run_verification


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcprec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
