"""mcprec: record, replay and diff Model Context Protocol traffic.

The public surface is re-exported here lazily, so that ``mcprec replay`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Cassette": "mcprec.cassette",
    "Session": "mcprec.cassette",
    "Message": "mcprec.cassette",
    "open_cassette": "mcprec.cassette",
    "record_stdio": "mcprec.record",
    "McprecError": "mcprec.errors",
    "CassetteError": "mcprec.errors",
    "NoMatchError": "mcprec.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from .cassette import Cassette, Message, Session, open_cassette
    from .errors import CassetteError, McprecError, NoMatchError
    from .record import record_stdio


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcprec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
