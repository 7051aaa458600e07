"""What a diff finds: the dataclasses of ``DiffResult`` (rendering lives in ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import UsageError
from .paths import PayloadDifference, plain

Category = Literal["server", "tool", "resource", "resource_template", "prompt"]
CATEGORIES: tuple[Category, ...] = ("server", "tool", "resource", "resource_template", "prompt")
ExchangeStatus = Literal["changed", "only_a", "only_b"]
Severity = Literal["breaking", "warning", "compatible"]
SEVERITIES: tuple[Severity, ...] = ("breaking", "warning", "compatible")
"""Most severe first. See ``severity.py`` for what falls where."""
FAIL_ON = ("breaking", "warning", "any")


@dataclass(frozen=True)
class Change:
    """One MCP-level change to the server, or to one tool, resource, template or prompt."""

    category: Category
    name: str
    """The item's name (tools, prompts), URI (resources) or URI template; "" for the server."""
    kind: str
    """A stable code, e.g. ``removed``, ``required_input_added``, ``description_changed``."""
    message: str
    """One line for people, e.g. ``required input 'greeting' added``."""
    breaking: bool
    before: Any = None
    after: Any = None
    severity: Severity = "compatible"
    """``breaking`` when ``breaking`` is set; else ``warning`` or ``compatible`` (``severity.py``
    decides, when the summary is built)."""

    def __post_init__(self) -> None:
        if self.breaking and self.severity != "breaking":
            object.__setattr__(self, "severity", "breaking")

    @property
    def subject(self) -> str:
        label = self.category.replace("_", " ")
        return f"{label} {self.name}" if self.name else label

    def describe(self) -> str:
        return f"{self.subject}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "name": self.name, "kind": self.kind,
                "message": self.message, "breaking": self.breaking, "severity": self.severity,
                "before": plain(self.before), "after": plain(self.after)}


@dataclass
class Summary:
    """The MCP-aware view: server facts, and the catalogs' additions, removals and changes."""

    server_a: dict[str, Any]
    server_b: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """E.g. a catalog that only one side listed, so it was not compared."""

    def of(self, category: Category) -> list[Change]:
        return [c for c in self.changes if c.category == category]

    def to_dict(self) -> dict[str, Any]:
        return {"server_a": self.server_a, "server_b": self.server_b, "notes": self.notes,
                "changes": [c.to_dict() for c in self.changes]}


@dataclass(frozen=True)
class CountChange:
    """A method whose number of messages (notifications or server requests) changed."""

    method: str
    count_a: int
    count_b: int

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "count_a": self.count_a, "count_b": self.count_b}


@dataclass
class ExchangeDiff:
    """One client request whose exchange differs: its answer, or what the server sent meanwhile.

    The pseudo-exchange with ``method == ""`` holds what the server sent outside any request.
    """

    method: str
    label: str
    status: ExchangeStatus
    seq_a: int | None = None
    seq_b: int | None = None
    differences: list[PayloadDifference] = field(default_factory=list)
    error: Literal["appeared", "disappeared"] | None = None
    error_detail: str = ""
    unanswered: Literal["a", "b"] | None = None
    notifications: list[CountChange] = field(default_factory=list)
    server_requests: list[CountChange] = field(default_factory=list)
    summarized: bool = False
    """The answer is a list or initialize result: the summary shows its changes."""
    latency_a_ms: float | None = None
    latency_b_ms: float | None = None

    @property
    def severity(self) -> Severity | None:
        """``breaking``: an error appeared, or B left the request unanswered; ``warning``: any
        other difference of its own; None when only the summary shows the change."""
        if self.error == "appeared" or self.unanswered == "b":
            return "breaking"
        if (self.status != "changed" or self.differences or self.error or self.unanswered
                or self.notifications or self.server_requests):
            return "warning"
        return None

    @property
    def is_different(self) -> bool:
        return bool(self.status != "changed" or self.differences or self.error or
                    self.unanswered or self.notifications or self.server_requests or
                    self.summarized)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "label": self.label, "status": self.status,
            "seq_a": self.seq_a, "seq_b": self.seq_b, "error": self.error,
            "error_detail": self.error_detail or None, "unanswered": self.unanswered,
            "summarized": self.summarized, "severity": self.severity,
            "differences": [d.to_dict() for d in self.differences],
            "notifications": [c.to_dict() for c in self.notifications],
            "server_requests": [c.to_dict() for c in self.server_requests],
            "latency_a_ms": self.latency_a_ms, "latency_b_ms": self.latency_b_ms,
        }


@dataclass(frozen=True)
class LatencyRow:
    """p50 latency of one method (tools/call and prompts/get: of one tool or prompt)."""

    key: str
    count_a: int
    count_b: int
    p50_a_ms: float | None
    p50_b_ms: float | None
    ratio: float | None
    """B's p50 over A's; None when one side has no answered request."""
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "count_a": self.count_a, "count_b": self.count_b,
                "p50_a_ms": self.p50_a_ms, "p50_b_ms": self.p50_b_ms, "ratio": self.ratio,
                "flagged": self.flagged}


@dataclass(frozen=True)
class SideInfo:
    """Which session one side of the diff is."""

    cassette: Path
    session: str
    server: str
    requests: int
    messages: int

    @property
    def label(self) -> str:
        return f"{self.cassette}:{self.session}"

    def to_dict(self) -> dict[str, Any]:
        return {"cassette": str(self.cassette), "session": self.session, "server": self.server,
                "requests": self.requests, "messages": self.messages}


@dataclass
class Stats:
    paired: int = 0
    same: int = 0
    changed: int = 0
    only_a: int = 0
    only_b: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"paired": self.paired, "same": self.same, "changed": self.changed,
                "only_a": self.only_a, "only_b": self.only_b}


@dataclass
class DiffResult:
    """Everything ``diff_sessions`` found. ``exchanges`` holds only the exchanges that differ."""

    a: SideInfo
    b: SideInfo
    summary: Summary
    exchanges: list[ExchangeDiff]
    latency: list[LatencyRow]
    stats: Stats
    warnings: list[str] = field(default_factory=list)
    moved: list[CountChange] = field(default_factory=list)
    """Notifications (without a progress token) attributed to other requests than before, same
    number in all: a matter of timing, not counted as a difference."""
    ignore: tuple[str, ...] = ()
    latency_threshold: float = 1.5
    latency_min_ms: float = 5.0
    normalize: tuple[str, ...] = ()
    """The normalizers applied (``--normalize``), as their specs."""
    surface_only: bool = False
    """Only the server facts and the catalogs were compared (``--surface-only``)."""
    verify: dict[str, Any] | None = None
    """Set when the diff is a verification's (``mcprec verify``): ``server`` (the command) or
    ``target`` (the URL), ``reference`` (``CASSETTE:SESSION``), ``new_session`` and
    ``exit_status``; the reports then say so."""

    @property
    def breaking(self) -> list[Change]:
        """The breaking catalog and server changes (``counts`` also counts exchanges)."""
        return [c for c in self.summary.changes if c.breaking]

    @property
    def counts(self) -> dict[str, int]:
        """Changes and differing exchanges by severity: ``{"breaking": n, "warning": n,
        "compatible": n}``."""
        out: dict[str, int] = {s: 0 for s in SEVERITIES}
        for c in self.summary.changes:
            out[c.severity] += 1
        for e in self.exchanges:
            sev = e.severity
            if sev is not None:
                out[sev] += 1
        return out

    @property
    def severity(self) -> Severity | None:
        """The most severe finding; None when equal."""
        counts = self.counts
        return next((s for s in SEVERITIES if counts[s]), None)

    def fails(self, fail_on: str = "any", *, fail_on_latency: bool = False) -> bool:
        """Whether the result fails a gate: ``any`` difference (the default, as ``diff``'s
        exit code has always been), a ``warning`` or worse, or only a ``breaking`` one."""
        if fail_on not in FAIL_ON:
            raise UsageError(f"fail_on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
        if fail_on_latency and self.latency_regressions:
            return True
        if fail_on == "any":
            return not self.equal
        counts = self.counts
        return bool(counts["breaking"] or (fail_on == "warning" and counts["warning"]))

    @property
    def latency_regressions(self) -> list[LatencyRow]:
        return [r for r in self.latency if r.flagged]

    @property
    def equal(self) -> bool:
        """No difference after ignores (latency is not counted: see ``is_different``)."""
        return not self.summary.changes and not self.exchanges

    def is_different(self, *, fail_on_latency: bool = False) -> bool:
        return not self.equal or (fail_on_latency and bool(self.latency_regressions))

    def to_dict(self) -> dict[str, Any]:
        from .report import to_dict

        return to_dict(self)

    def to_json(self, *, indent: bool = True) -> str:
        from .report import to_json

        return to_json(self, indent=indent)

    def to_text(self, color: bool = False) -> str:
        from .report import to_text

        return to_text(self, color=color)

    def to_markdown(self) -> str:
        from .report import to_markdown

        return to_markdown(self)

    def __str__(self) -> str:
        return self.to_text()
