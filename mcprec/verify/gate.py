"""The verify gate: the diff settings of one verification (the caller's options over the
``[diff]`` config) and the pass/fail rule. ``mcprec diff``, ``mcprec verify`` and the pytest
``mcprec_verify`` all build theirs with ``resolve`` and judge with ``Gate.fails``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

FAIL_ON = ("breaking", "warning", "any")


@dataclass
class Gate:
    """What to compare, how, and what fails."""

    ignore: tuple[str, ...] = ()
    normalize: Any = None
    """A ``Normalizer`` (None: none)."""
    surface_only: bool = False
    fail_on: str = "any"
    fail_on_latency: bool = False
    latency_threshold: float = 1.5
    latency_min_ms: float = 5.0
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """What the config file said that was not understood (shown by the caller)."""

    def _options(self) -> dict[str, Any]:
        return {"ignore": self.ignore, "normalize": self.normalize or (),
                "surface_only": self.surface_only, "latency_threshold": self.latency_threshold,
                "latency_min_ms": self.latency_min_ms}

    def diff(self, a: str, b: str | None) -> Any:
        """``mcprec diff A [B]`` (``CASSETTE[:SESSION]`` references) under this gate."""
        from ..diff import diff

        return diff(a, b, **self._options())

    def compare(self, cassette: str | os.PathLike[str], original: str, new: str) -> Any:
        """Two sessions of one cassette (a reference and its verification run)."""
        from ..diff import diff_sessions

        return diff_sessions(cassette, original, cassette, new, **self._options())

    def fails(self, result: Any, timed_out: Sequence[str] = ()) -> bool:
        """The rule: a difference of ``fail_on``'s severity or worse, a flagged latency with
        ``fail_on_latency``, or a request the server under test never answered."""
        return bool(result.fails(self.fail_on, fail_on_latency=self.fail_on_latency)
                    or timed_out)


def resolve(config: str | os.PathLike[str] | None = None, *,
            cwd: str | os.PathLike[str] = ".", ignore: Iterable[str] = (),
            normalize: Iterable[str] = (), fail_on: str | None = None,
            surface_only: bool | None = None, fail_on_latency: bool | None = None,
            latency_threshold: float | None = None,
            latency_min_ms: float | None = None) -> Gate:
    """The caller's options over the config file (``config``, else ``cwd``'s mcprec.toml and
    pyproject.toml): ignores and normalizers add up, the rest the caller decides (None: the
    config's, else the default)."""
    from ..diff import load_config
    from ..diff.api import DEFAULT_LATENCY_MIN_MS, DEFAULT_LATENCY_THRESHOLD
    from ..normalize import Normalizer, split_specs

    settings = load_config(config, cwd=cwd)
    chosen = _first(fail_on, settings.fail_on, "any")
    if chosen not in FAIL_ON:
        raise UsageError(f"fail_on must be breaking, warning or any; got {chosen!r}")
    specs = [*settings.normalize, *(x for x in split_specs(tuple(normalize))
                                    if x not in settings.normalize)]
    return Gate(
        ignore=(*settings.ignore, *(p for p in ignore if p not in settings.ignore)),
        normalize=Normalizer.build(specs, settings.normalizers),
        surface_only=bool(_first(surface_only, settings.surface_only, False)),
        fail_on=chosen,
        fail_on_latency=bool(_first(fail_on_latency, settings.fail_on_latency, False)),
        latency_threshold=float(_first(latency_threshold, settings.latency_threshold,
                                       DEFAULT_LATENCY_THRESHOLD)),
        latency_min_ms=float(_first(latency_min_ms, settings.latency_min_ms,
                                    DEFAULT_LATENCY_MIN_MS)),
        warnings=tuple(settings.warnings),
    )


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


__all__ = ["FAIL_ON", "Gate", "resolve"]
