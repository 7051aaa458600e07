"""Severity tiers of what a diff finds: ``breaking``, ``warning``, ``compatible``.

``breaking``: a client that worked with A may fail with B (``schema_compat`` decides for the
catalogs; in exchanges, an error that appeared or an answer B never gave).

``warning``: nothing a client's code trips over, but what the model (or the user) is shown, or
what the server answers, changed:

- a tool's, prompt's, resource's or template's ``description`` (models read descriptions to
  choose tools and fill in arguments), a prompt argument's description, and the
  ``description``, ``default``, ``examples`` or ``deprecated`` of a property in a tool's input
  or output schema;
- ``annotations`` (``readOnlyHint``, ``destructiveHint``, a resource's ``audience``...: hosts
  decide on them whether to ask the user first);
- a resource's or template's ``mimeType``;
- the server's ``instructions`` and its protocol version;
- every exchange that differs on its own: a changed result value, an error that went away, a
  request made on one side only, notifications or server requests that appeared, disappeared
  or changed.

``compatible``: the rest: additions (tools, optional inputs, output properties, capabilities),
widened inputs, titles, names, ``serverInfo``, icons, ``_meta``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .model import Change, Severity

WARNING_KINDS = frozenset({
    "description_changed", "argument_description_changed", "annotations_changed",
    "mimeType_changed", "instructions_changed", "protocol_version_changed",
})
SCHEMA_ANNOTATION_KINDS = frozenset({"input_description_changed", "output_description_changed"})
MODEL_READ_KEYWORDS = frozenset({"description", "default", "examples", "deprecated",
                                 "markdownDescription"})


def classify(change: Change) -> Change:
    """``change`` with its severity set (breaking changes stay breaking)."""
    if change.breaking:
        return change
    severity: Severity = "warning" if _is_warning(change) else "compatible"
    return change if change.severity == severity else replace(change, severity=severity)


def _is_warning(change: Change) -> bool:
    if change.kind in WARNING_KINDS:
        return True
    if change.kind in SCHEMA_ANNOTATION_KINDS:
        keys: Any = change.before if isinstance(change.before, dict) else {}
        return bool(MODEL_READ_KEYWORDS & set(keys))
    return False
