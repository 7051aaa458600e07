"""``TextEnum``: the base of mcprec's enumerations of names that are also stored text."""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    """An enumeration whose members are their text (``Kind.REQUEST == "request"``): what the
    cassette stores and the command line takes, checked and named in one place.

    ``enum.StrEnum`` does this from Python 3.11; mcprec supports 3.10. Members print as their
    text in f-strings on every version (3.12 changed how a ``str`` mixin formats)."""

    __str__ = str.__str__
    __format__ = str.__format__  # type: ignore[assignment]
