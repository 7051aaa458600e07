"""``ReplaySettings``: how a replay plays and what it forgives, spelled once.

The command line (``mcprec replay --timing/--max-gap/--protocol-version/--fault/--seed/
--allow-unmatched``), the library (``replay_stdio``, ``replay_http``), the test helpers
(``replay_server``, ``replay_http_server``, ``replay_streams``) and the pytest marker all take
these settings as this one class, which parses every accepted spelling once:

    timing            None or "none": answer at once; "recorded" (1.0): the recorded pauses;
                      a number (or its text): the recorded pauses scaled by it
    max_gap           with timing: the longest pause replayed, in seconds or as a duration
                      ("500ms", "2s", "1.5m", "1h")
    protocol_version  "recorded", or "rewrite" (answer initialize with the client's version)
    faults            fault rules (docs/faults.md), one string or several; ``seed`` for p=
    allow_unmatched   a request with no recorded match does not fail the replay

How requests match is ``MatchOptions``'s part, not this one's.

On the replay start-up path: a ``Plain`` class (no dataclasses, no typing at run time); the
fault rules are parsed, by ``faults/rules.py``, only when there are some.
"""

from __future__ import annotations

from .._plain import Plain
from ..errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ..faults.rules import Faults

PROTOCOL_VERSION_POLICIES = ("recorded", "rewrite")
"""``protocol_version``: answer initialize with the recorded version, or with the client's."""

OPTION_NAMES = {"timing": "--timing", "max_gap": "--max-gap",
                "protocol_version": "--protocol-version", "faults": "--fault", "seed": "--seed",
                "allow_unmatched": "--allow-unmatched"}
"""Each setting as ``mcprec replay`` spells it."""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class SettingError(UsageError):
    """A replay setting that does not parse: said with the settings' Python names
    (``str(error)``: ``max_gap``) or as ``mcprec replay``'s options (``error.for_cli()``:
    ``--max-gap``). ``message`` writes each setting it names in braces (``{max_gap}``)."""

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        self._message = message
        super().__init__(self._spelled({}))

    def _spelled(self, names: dict[str, str]) -> str:
        text = self._message
        for name in OPTION_NAMES:
            text = text.replace("{" + name + "}", names.get(name, name))
        return text

    def for_cli(self) -> str:
        return self._spelled(OPTION_NAMES)


def parse_timing(value: float | str | None) -> float | None:
    """``None``/``"none"`` -> None, ``"recorded"`` -> 1.0, a scale (number or text) -> it."""
    if value is None or value == "none":
        return None
    if value == "recorded":
        return 1.0
    bad = f"{{timing}} is {value!r}; expected none, recorded or a number"
    if isinstance(value, bool):
        raise SettingError("timing", bad)
    try:
        scale = float(value)
    except (TypeError, ValueError):
        raise SettingError("timing", bad) from None
    if not scale >= 0:  # also refuses nan
        raise SettingError("timing", f"{{timing}} is {value!r}; the scale must not be negative")
    return scale


def parse_duration(value: float | str, setting: str, *, zero: bool = False) -> float:
    """``500ms``, ``2s``, ``1.5m``, ``1h``, or a plain number of seconds -> seconds. A bad one
    is a ``SettingError`` naming ``setting`` (a name of ``OPTION_NAMES`` is spelled for the
    reader, any other as it is)."""
    name = "{" + setting + "}" if setting in OPTION_NAMES else setting
    if isinstance(value, bool):
        seconds = -1.0
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        import re

        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", str(value))
        if m is None:
            raise SettingError(setting, f"{name} is {value!r}; expected a duration such as "
                               "500ms, 2s or 1m")
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if not (seconds > 0 or zero and seconds == 0):
        raise SettingError(setting, f"{name} is {value!r}; it must be more than 0")
    return seconds


def seconds_text(seconds: float) -> str:
    """A number of seconds as a duration ``parse_duration`` reads back (``0.02s``)."""
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"


class ReplaySettings(Plain):
    """How a replay plays (``timing``, ``max_gap``, ``protocol_version``, ``faults`` with
    ``seed``) and whether an unmatched request fails it (``allow_unmatched``). Every value is
    checked when the settings are made: a bad one is a one-line ``UsageError``
    (``SettingError``) naming the setting."""

    __slots__ = ("timing", "max_gap", "protocol_version", "faults", "seed", "allow_unmatched")
    _FIELDS = __slots__

    timing: float | None
    """The scale of the recorded pauses (1.0: as recorded); None answers at once."""
    max_gap: float | None
    """With ``timing``: the longest pause replayed between two messages, in seconds."""
    protocol_version: str
    """``recorded`` or ``rewrite``."""
    faults: tuple[str, ...]
    """Fault rules, as written (``tools/call:search error=-32000:busy nth=2``)."""
    seed: int | None
    """The seed of the faults drawn with ``p=`` (None: one is drawn and reported)."""
    allow_unmatched: bool
    """Whether a request without a recorded match leaves the replay's outcome alone."""

    def __init__(self, *, timing: float | str | None = None,
                 max_gap: float | str | None = None, protocol_version: str = "recorded",
                 faults: str | Iterable[str] = (), seed: int | None = None,
                 allow_unmatched: bool = False) -> None:
        self.timing = parse_timing(timing)
        self.max_gap = None if max_gap is None else parse_duration(max_gap, "max_gap",
                                                                   zero=True)
        if self.max_gap is not None and self.timing is None:
            raise SettingError("max_gap", "{max_gap} goes with {timing} recorded (or a scale)")
        if protocol_version not in PROTOCOL_VERSION_POLICIES:
            raise SettingError("protocol_version", f"{{protocol_version}} is "
                               f"{protocol_version!r}; choose recorded or rewrite")
        self.protocol_version = protocol_version
        self.faults = (faults,) if isinstance(faults, str) else tuple(faults)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise SettingError("seed", f"{{seed}} is {seed!r}; expected a whole number")
        self.seed = seed
        self.allow_unmatched = bool(allow_unmatched)
        if self.faults:
            self._parsed_faults()  # a bad rule is said now, not when the replay starts

    def replace(self, **changes: Any) -> ReplaySettings:
        """A copy with ``changes`` (checked as in the constructor)."""
        given = {f: getattr(self, f) for f in self._FIELDS}
        given.update(changes)
        return ReplaySettings(**given)

    def merged(self, *, timing: float | str | None = None,
               max_gap: float | str | None = None, protocol_version: str = "recorded",
               faults: str | Iterable[str] = (), seed: int | None = None,
               allow_unmatched: bool = False) -> ReplaySettings:
        """These settings with each keyword that differs from the default over them: what
        ``replay_stdio(..., settings=s, timing=1.0)`` and the like replay with."""
        changes: dict[str, Any] = {}
        if timing is not None and timing != "none":
            changes["timing"] = timing
        if max_gap is not None:
            changes["max_gap"] = max_gap
        if protocol_version != "recorded":
            changes["protocol_version"] = protocol_version
        if faults:
            changes["faults"] = faults
        if seed is not None:
            changes["seed"] = seed
        if allow_unmatched:
            changes["allow_unmatched"] = True
        return self.replace(**changes) if changes else self

    def fault_plan(self) -> Faults | None:
        """A fresh ``Faults`` for one replay (the rules with their own counts, drawn from
        ``seed``); None without rules."""
        if not self.faults:
            return None
        from ..faults.rules import Faults

        return Faults(self._parsed_faults(), self.seed)

    def _parsed_faults(self) -> list[Any]:
        from ..faults.rules import parse_rule

        out = []
        for i, text in enumerate(self.faults, 1):
            try:
                out.append(parse_rule(text))
            except UsageError as e:
                raise SettingError("faults", f"{{faults}} #{i}: {e}") from None
        return out
