"""``diff_sessions``, ``diff`` (``CASSETTE[:SESSION]`` arguments) and a pytest assertion."""

from __future__ import annotations

import math
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Union

from ..cassette import Cassette, Session, open_cassette
from ..errors import UsageError
from ..normalize import Normalizer
from .engine import (
    Comparer, align, compare_pair, keep_last_statuses, last_polls, latency_rows, reconcile_moved, unsolicited,
)
from .load import Side, load_side, minted_renames
from .model import DiffResult, SideInfo, Stats, Summary
from .summary import build_summary

CassetteLike = Union[str, "os.PathLike[str]", Cassette]
SessionLike = Union[str, Session, None]

DEFAULT_LATENCY_THRESHOLD = 1.5
DEFAULT_LATENCY_MIN_MS = 5.0
SURFACE_LISTS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")


def diff_sessions(
    cassette_a: CassetteLike,
    session_a: SessionLike,
    cassette_b: CassetteLike,
    session_b: SessionLike,
    *,
    ignore: tuple[str, ...] | list[str] = (),
    latency_threshold: float = DEFAULT_LATENCY_THRESHOLD,
    latency_min_ms: float = DEFAULT_LATENCY_MIN_MS,
    normalize: Normalizer | tuple[str, ...] | list[str] = (),
    normalizers: dict[str, str] | None = None,
    surface_only: bool = False,
) -> DiffResult:
    """Compare session A with session B (None: a cassette's latest session).

    ``normalize``: kinds of volatile values that compare equal by kind (``timestamps``,
    ``uuids``, ``iso8601``, ``epochs``, ``NAME=REGEX``, or names ``normalizers`` maps to
    regexes; see ``mcprec.normalize``). ``surface_only``: compare the server facts and the
    tools, resources, templates and prompts alone, not the exchanges or latencies.

    Raises ``UsageError`` for a bad ignore path, normalizer or an empty session,
    ``CassetteError`` / ``SessionNotFoundError`` for a missing cassette or session.
    """
    _check_latency_options(latency_threshold, latency_min_ms)
    normalizer = (normalize if isinstance(normalize, Normalizer)
                  else Normalizer.build(normalize, normalizers))
    cmp = Comparer(ignore, normalizer)
    with ExitStack() as stack:
        ca, cb = _open(cassette_a, stack), _open(cassette_b, stack)
        sa, sb = _session(ca, session_a), _session(cb, session_b)
        same = Path(ca.path).resolve() == Path(cb.path).resolve()
        a = load_side(ca, sa, minted_renames(sb, sa) if same else None)
        b = load_side(cb, sb, minted_renames(sa, sb) if same else None)
        result = compare_sides(a, b, cmp, latency_threshold, latency_min_ms,
                               surface_only=surface_only)
        note = _salt_note(ca, sa, cb, sb)
        if note:
            result.summary.notes.append(note)
        return result


def _salt_note(ca: Any, sa: Any, cb: Any, sb: Any) -> str | None:
    """Two cassettes, each hashed with its own salt: equal values have different pseudonyms."""
    if Path(ca.path).resolve() == Path(cb.path).resolve():
        return None
    ma = ca.redaction_manifests([sa]).get(sa.id) or {}
    mb = cb.redaction_manifests([sb]).get(sb.id) or {}
    if ma.get("salt") == "cassette" or mb.get("salt") == "cassette":
        return ("pseudonyms (--redact-strategy hash) are keyed by each cassette's own salt, so "
                "equal values differ between these cassettes; record both with "
                "$MCPREC_REDACT_SALT set alike to compare them")
    return None


def compare_sides(a: Side, b: Side, cmp: Comparer, latency_threshold: float,
                  latency_min_ms: float, *, surface_only: bool = False) -> DiffResult:
    """The diff of two loaded sessions."""
    keep_last_statuses(a)
    keep_last_statuses(b)
    summary = build_summary(a, b, cmp.answer)
    if surface_only:
        warnings = _warnings(a, b, summary)
        if not any(m in (r.method for r in side.requests) for side in (a, b)
                   for m in SURFACE_LISTS):
            warnings.append("neither session lists tools, resources, templates or prompts: "
                            "--surface-only compares the server facts alone")
        return DiffResult(
            a=_info(a, summary.server_a), b=_info(b, summary.server_b), summary=summary,
            exchanges=[], latency=[], stats=Stats(), warnings=warnings,
            ignore=cmp.ignore, latency_threshold=latency_threshold,
            latency_min_ms=latency_min_ms, normalize=cmp.normalizer.specs, surface_only=True,
        )
    stats = Stats()
    exchanges = []
    for pair in align(last_polls(a.requests), last_polls(b.requests), cmp.request_key):
        ex = compare_pair(cmp, a, b, pair, summary)
        if ex.status == "only_a":
            stats.only_a += 1
        elif ex.status == "only_b":
            stats.only_b += 1
        else:
            stats.paired += 1
        if ex.is_different:
            exchanges.append(ex)
    outside = unsolicited(cmp, a, b)
    if outside.is_different:
        exchanges.append(outside)
    exchanges, moved = reconcile_moved(exchanges)
    stats.changed = sum(1 for ex in exchanges if ex.status == "changed" and ex.method)
    stats.same = stats.paired - stats.changed
    return DiffResult(
        a=_info(a, summary.server_a), b=_info(b, summary.server_b), summary=summary,
        exchanges=exchanges, latency=latency_rows(a, b, latency_threshold, latency_min_ms),
        stats=stats, warnings=_warnings(a, b, summary), moved=moved, ignore=cmp.ignore,
        latency_threshold=latency_threshold, latency_min_ms=latency_min_ms,
        normalize=cmp.normalizer.specs,
    )


def _check_latency_options(threshold: float, min_ms: float) -> None:
    if not math.isfinite(threshold) or threshold <= 0:
        raise UsageError(f"the latency threshold must be a positive ratio, e.g. 1.5; got {threshold}")
    if not math.isfinite(min_ms) or min_ms < 0:
        raise UsageError(f"the latency floor must be a number of ms >= 0; got {min_ms}")


def _open(cassette: CassetteLike, stack: ExitStack) -> Cassette:
    if isinstance(cassette, Cassette):
        return cassette
    return stack.enter_context(open_cassette(cassette))


def _session(cassette: Cassette, session: SessionLike) -> Session:
    return session if isinstance(session, Session) else cassette.session(session)


def _info(side: Side, facts: dict[str, Any]) -> SideInfo:
    info = facts.get("serverInfo") or {}
    server = " ".join(str(info[k]) for k in ("name", "version") if info.get(k))
    return SideInfo(side.cassette.path, side.session.name, server, len(side.requests),
                    side.count)


def _warnings(a: Side, b: Side, summary: Summary) -> list[str]:
    out = []
    name_a = (summary.server_a.get("serverInfo") or {}).get("name")
    name_b = (summary.server_b.get("serverInfo") or {}).get("name")
    if name_a != name_b:
        out.append(f"different servers: A is {name_a!r}, B is {name_b!r}; compared anyway")
    if a.cassette.path.resolve() == b.cassette.path.resolve() and a.session.id == b.session.id:
        out.append(f"session {a.session.name!r} is compared with itself")
    for side, tag in ((a, "A"), (b, "B")):
        if side.session.status != "complete":
            out.append(f"{tag} (session {side.session.name!r}) is {side.session.status}: "
                       "its recording may be cut short")
        if side.batches:
            out.append(f"{tag} holds {side.batches} JSON-RPC batch message(s); batches are "
                       "not compared")
    return out


# --- CASSETTE[:SESSION] -----------------------------------------------------------------------


def parse_ref(text: str) -> tuple[Path, str | None]:
    """``cassettes/x.db:v2`` -> ``(Path("cassettes/x.db"), "v2")``; no session -> None.

    A path that exists as given is a cassette even if it holds a colon.
    """
    if not text:
        raise UsageError("empty session reference; write CASSETTE or CASSETTE:SESSION")
    if Path(text).exists() or ":" not in text:
        return Path(text), None
    head, _, name = text.rpartition(":")
    if not head:
        raise UsageError(f"no cassette in {text!r}; write CASSETTE or CASSETTE:SESSION")
    return Path(head), (name or None)


def diff(a: str, b: str | None = None, **options: Any) -> DiffResult:
    """``diff("c.db")``: its last two sessions; ``diff("c.db:v1", "c.db:v2")``;
    ``diff("a.db", "b.db")``: the latest session of each. Options as for ``diff_sessions``."""
    path_a, name_a = parse_ref(a)
    if b is None:
        if name_a is not None:
            raise UsageError(
                f"only one session given ({a}); give a second one to compare it with, "
                "or just the cassette to compare its last two sessions"
            )
        with open_cassette(path_a) as c:
            sessions = c.sessions()
            if len(sessions) < 2:
                raise UsageError(
                    f"cassette {path_a} holds {len(sessions)} session(s); comparing its last "
                    "two needs two (or give two sessions: A B)"
                )
            return diff_sessions(c, sessions[-2], c, sessions[-1], **options)
    path_b, name_b = parse_ref(b)
    return diff_sessions(path_a, name_a, path_b, name_b, **options)


def assert_no_breaking_changes(result_or_a: DiffResult | str, b: str | None = None,
                               **options: Any) -> DiffResult:
    """Raise ``AssertionError`` listing the breaking changes, if any; return the result.

    ``assert_no_breaking_changes("c.db:v1", "c.db:v2", ignore=[...])`` or with a ``DiffResult``.
    """
    result = (result_or_a if isinstance(result_or_a, DiffResult)
              else diff(result_or_a, b, **options))
    if result.breaking:
        lines = [f"{len(result.breaking)} breaking change(s) from {result.a.label} to "
                 f"{result.b.label}:"]
        lines += [f"  - {c.describe()}" for c in result.breaking]
        raise AssertionError("\n".join(lines))
    return result
