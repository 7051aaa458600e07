"""``Plain``: a value class with a dataclass's repr and equality, without dataclasses.

Replay's start-up imports no dataclasses (with the inspect, ast and dis it loads: 11-15 ms) and
builds no dataclass (0.6-0.9 ms a class at import); the classes it needs derive from this.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Plain:
    """Repr and equality over the attributes ``_FIELDS`` names, as a dataclass with ``eq``
    makes them (unhashable)."""

    __slots__ = ()
    _FIELDS: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Plain)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]
