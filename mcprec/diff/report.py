"""A ``DiffResult`` as JSON, text (optionally coloured), Markdown (for a PR comment) and one
self-contained HTML page (``mcprec.view.export.diff_html``: the view of ``mcprec view``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from .model import CATEGORIES, Change, DiffResult, ExchangeDiff, LatencyRow
from .paths import PayloadDifference, short

MAX_EXCHANGES = 200
MAX_DIFFS = 20
FORMAT_VERSION = 1

# --- JSON -----------------------------------------------------------------------------------


def to_dict(r: DiffResult) -> dict[str, Any]:
    return {
        "format": "mcprec-diff", "version": FORMAT_VERSION,
        "equal": r.equal, "a": r.a.to_dict(), "b": r.b.to_dict(),
        "breaking": len(r.breaking), "severity": r.severity, "counts": r.counts,
        "verdict": _verdict(r),
        "latency_regressions": len(r.latency_regressions),
        "warnings": r.warnings, "ignore": list(r.ignore), "normalize": list(r.normalize),
        "surface_only": r.surface_only, "verify": r.verify,
        "summary": r.summary.to_dict(), "stats": r.stats.to_dict(),
        "exchanges": [e.to_dict() for e in r.exchanges],
        "moved": [c.to_dict() for c in r.moved],
        "latency": {"threshold": r.latency_threshold, "min_ms": r.latency_min_ms,
                    "rows": [row.to_dict() for row in r.latency]},
    }


def to_json(r: DiffResult, *, indent: bool = True) -> str:
    data = to_dict(r)
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 if indent else 0, default=str).decode()
    except TypeError:  # an integer beyond 64 bits in a difference: slower, exact
        return json.dumps(data, indent=2 if indent else None, ensure_ascii=False, default=str,
                          separators=(",", ": ") if indent else (",", ":"))


# --- shared wording -------------------------------------------------------------------------

_PLURAL = {"server": "server", "tool": "tools", "resource": "resources",
           "resource_template": "resource templates", "prompt": "prompts"}


def _counts(changes: list[Change]) -> str:
    added = sum(c.kind == "added" for c in changes)
    removed = sum(c.kind == "removed" for c in changes)
    changed = len({c.name for c in changes if c.kind not in ("added", "removed")})
    parts = [f"{n} {w}" for n, w in ((added, "added"), (removed, "removed"),
                                     (changed, "changed")) if n]
    return ", ".join(parts)


def _change_text(c: Change) -> str:
    if c.category == "server":
        return c.message
    return f"{c.name}: {c.message}"


def _diff_text(d: PayloadDifference, width: int = 80) -> str:
    where = "" if d.where == "response" else f"{d.where} "
    if d.kind == "removed":
        return f"{where}{d.path}: removed (was {short(d.before, width)})"
    if d.kind == "added":
        return f"{where}{d.path}: added {short(d.after, width)}"
    return f"{where}{d.path}: {short(d.before, width)} → {short(d.after, width)}"


def _exchange_head(e: ExchangeDiff) -> str:
    seqs = f"A #{e.seq_a}" if e.seq_a is not None else ""
    if e.seq_b is not None:
        seqs += (", " if seqs else "") + f"B #{e.seq_b}"
    return f"{e.label}" + (f"  ({seqs})" if seqs else "")


def _exchange_notes(e: ExchangeDiff) -> list[str]:
    out = []
    if e.status == "only_a":
        out.append("only in A (no matching request in B)")
    elif e.status == "only_b":
        out.append("only in B (no matching request in A)")
    if e.error:
        out.append(f"error {e.error}: {e.error_detail}")
    if e.unanswered:
        out.append(f"no answer in {e.unanswered.upper()}")
    if e.summarized:
        out.append("answer changed: see the summary")
    for label, changes in (("notifications", e.notifications),
                           ("server requests", e.server_requests)):
        for c in changes:
            out.append(f"{label}: {c.method} {c.count_a} → {c.count_b}")
    return out


def _verdict(r: DiffResult) -> str:
    if r.equal:
        done = ([f"ignoring {len(r.ignore)} path(s)"] if r.ignore else []) + (
            [f"normalizing {', '.join(r.normalize)}"] if r.normalize else [])
        extra = f" after {' and '.join(done)}" if done else ""
        if r.surface_only:
            extra += " (surface only)"
        lat = (f"; {len(r.latency_regressions)} latency regression(s)"
               if r.latency_regressions else "")
        return f"EQUAL{extra}{lat}"
    parts = []
    if r.breaking:
        parts.append(f"{len(r.breaking)} breaking change(s)")
    warned = sum(c.severity == "warning" for c in r.summary.changes)
    if warned:
        parts.append(f"{warned} warning change(s)")
    compatible = len(r.summary.changes) - len(r.breaking) - warned
    if compatible:
        parts.append(f"{compatible} compatible change(s)")
    if r.exchanges:
        broken = sum(e.severity == "breaking" for e in r.exchanges)
        parts.append(f"{len(r.exchanges)} exchange(s) differ"
                     + (f" ({broken} breaking)" if broken else ""))
    if r.latency_regressions:
        parts.append(f"{len(r.latency_regressions)} latency regression(s)")
    return "DIFFERENT: " + ", ".join(parts)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _ratio(row: LatencyRow) -> str:
    return "-" if row.ratio is None else f"{row.ratio:.2f}x"


# --- text -----------------------------------------------------------------------------------

Style = Callable[[str, str], str]


def _plain(text: str, style: str) -> str:
    return text


def to_text(r: DiffResult, *, color: bool = False) -> str:
    """The text report, terminal-safe: the recordings' strings have their control characters
    escaped (``terminal.safe``, line by line); colour codes are added after that, at marks no
    recording can forge (a fresh random tag)."""
    from ..terminal import safe

    if not color:
        return "\n".join(safe(line) for line in _text_lines(r, _plain)) + "\n"
    import secrets

    tag = f"\ue000{secrets.token_hex(8)}:"
    codes = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}

    def mark(text: str, style: str) -> str:
        return f"{tag}{codes[style]}\ue001{text}{tag}0\ue001"

    text = "\n".join(safe(line) for line in _text_lines(r, mark)) + "\n"
    return re.sub(re.escape(tag) + "([0-9]+)\ue001", lambda m: f"\x1b[{m[1]}m", text)


def _text_lines(r: DiffResult, s: Style) -> list[str]:
    v = r.verify
    out = [s("mcprec verify" if v else "mcprec diff", "bold")]
    if v:
        out.append(f"  {_verify_what(v)}, against the reference {v['reference']}")
        out += [f"  {line}" for line in _verify_notes(v)]
    out += [f"  A: {r.a.label}  {r.a.server or '?'}  ({r.a.requests} requests)",
            f"  B: {r.b.label}  {r.b.server or '?'}  ({r.b.requests} requests)"]
    out += [s(f"warning: {w}", "yellow") for w in r.warnings]
    if r.ignore:
        out.append(f"  ignoring: {', '.join(r.ignore)}")
    if r.normalize:
        out.append(f"  normalizing: {', '.join(r.normalize)}")
    if r.surface_only:
        out.append("  surface only: server facts, tools, resources, templates and prompts")
    out += _text_summary(r, s)
    out += _text_exchanges(r, s)
    out += _text_latency(r, s)
    verdict = _verdict(r)
    out += ["", s(f"Result: {verdict}", "green" if r.equal else "red")]
    if v:
        out.append(f"Exit status: {_exit_status(v)}")
    return out


def _verify_notes(v: dict[str, Any]) -> list[str]:
    """When the client's messages with a cause were sent, and the minted values followed."""
    out = [f"client order: {line}" for line in v.get("client_order") or ()]
    if v.get("minted"):
        out.append(f"minted values followed: {v['minted']} (sent back as the live server "
                   "minted them; compared as the recorded ones)")
    return out


def _verify_what(v: dict[str, Any]) -> str:
    """What was verified: ``server: python srv.py`` or ``target: URL``."""
    if v.get("target"):
        return f"target: {v['target']}"
    return "server: " + " ".join(_shell_word(str(x)) for x in v.get("server") or ())


def _shell_word(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _exit_status(v: dict[str, Any]) -> str:
    code = v.get("exit_status")
    meaning = {0: "passed", 1: "failed"}.get(code, "") if isinstance(code, int) else ""
    return f"{code} ({meaning})" if meaning else str(code)


def _text_summary(r: DiffResult, s: Style) -> list[str]:
    out = ["", s("Summary", "bold")]
    if not r.summary.changes:
        out.append("  no changes to the server, tools, resources, templates or prompts")
    for cat in CATEGORIES:
        changes = r.summary.of(cat)
        if not changes:
            continue
        head = _PLURAL[cat] + ("" if cat == "server" else f": {_counts(changes)}")
        out.append(f"  {head}")
        for c in changes:
            tag = (s("BREAKING", "red") if c.breaking else s("WARNING ", "yellow")
                   if c.severity == "warning" else "        ")
            color = "green" if c.kind == "added" else "red" if c.kind == "removed" else "yellow"
            out.append(f"    {tag}  {s(_change_text(c), color)}")
    out += [s(f"  note: {n}", "dim") for n in r.summary.notes]
    return out


def _text_exchanges(r: DiffResult, s: Style) -> list[str]:
    if r.surface_only:
        return ["", s("Exchanges", "bold") + ": not compared (--surface-only)"]
    st = r.stats
    out = ["", s("Exchanges", "bold") + f": {st.paired} paired ({st.same} same, "
           f"{st.changed} changed), {st.only_a} only in A, {st.only_b} only in B"]
    for e in r.exchanges[:MAX_EXCHANGES]:
        mark, color = (("-", "red") if e.status == "only_a" else ("+", "green")
                       if e.status == "only_b" else ("!", "red") if e.error == "appeared"
                       else ("~", "yellow"))
        tag = " " + s("BREAKING", "red") if e.severity == "breaking" else ""
        out.append(f"  {s(mark, color)} {_exchange_head(e)}{tag}")
        out += [f"      {s(n, color)}" for n in _exchange_notes(e)]
        out += [f"      {_diff_text(d)}" for d in e.differences[:MAX_DIFFS]]
        if len(e.differences) > MAX_DIFFS:
            out.append(f"      ... and {len(e.differences) - MAX_DIFFS} more differences")
    if len(r.exchanges) > MAX_EXCHANGES:
        out.append(f"  ... and {len(r.exchanges) - MAX_EXCHANGES} more exchanges "
                   "(--format json lists them all)")
    for c in r.moved:
        out.append(s(f"  note: {c.count_a} {c.method} attributed to other requests than in A "
                     "(timing; not a difference)", "dim"))
    return out


def _text_latency(r: DiffResult, s: Style) -> list[str]:
    if r.surface_only:
        return []
    out = ["", s("Latency", "bold") + f" (p50 ms; flagged at >= {r.latency_threshold:g}x "
           f"when a side is >= {r.latency_min_ms:g} ms)"]
    if not r.latency:
        return out + ["  no answered requests"]
    width = max(len(row.key) for row in r.latency)
    out.append(f"  {'method':<{width}}  {'n':>5}  {'A':>9}  {'B':>9}  {'B/A':>8}")
    for row in r.latency:
        n = f"{row.count_a}" if row.count_a == row.count_b else f"{row.count_a}/{row.count_b}"
        line = (f"  {row.key:<{width}}  {n:>5}  {_ms(row.p50_a_ms):>9}  {_ms(row.p50_b_ms):>9}  "
                f"{_ratio(row):>8}")
        out.append(s(line + "  SLOWER", "yellow") if row.flagged else line)
    return out


# --- Markdown -------------------------------------------------------------------------------


def _code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    text = text.replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(r: DiffResult) -> str:
    icon = "✅" if r.equal else ("❌" if r.severity == "breaking" else "⚠️")
    v = r.verify
    if v:
        out = [f"## {icon} mcprec verify: {_code(r.a.label)} → {_code(r.b.label)}", "",
               f"{_cell(_verify_what(v))}, against the reference {_code(v['reference'])}", "",
               f"**{_verdict(r)}**, exit status {_exit_status(v)}", ""]
        notes = _verify_notes(v)
        if notes:
            out += [f"- {_cell(n)}" for n in notes] + [""]
    else:
        out = [f"## {icon} mcprec diff: {_code(r.a.label)} → {_code(r.b.label)}", "",
               f"**{_verdict(r)}**", ""]
    out += ["| | A | B |", "|---|---|---|",
           f"| session | {_cell(_code(r.a.session))} | {_cell(_code(r.b.session))} |",
           f"| server | {_cell(r.a.server or '?')} | {_cell(r.b.server or '?')} |",
           f"| requests | {r.a.requests} | {r.b.requests} |", ""]
    out += [f"> **Warning:** {w}" for w in r.warnings]
    if r.ignore:
        out += ["", "Ignoring: " + ", ".join(_code(p) for p in r.ignore)]
    if r.normalize:
        out += ["", "Normalizing: " + ", ".join(_code(n) for n in r.normalize)]
    if r.surface_only:
        out += ["", "Surface only: the server facts, tools, resources, templates and prompts "
                "(exchanges and latency not compared)."]
    out += _md_summary(r)
    out += _md_exchanges(r)
    out += _md_latency(r)
    from ..terminal import safe_lines

    return safe_lines("\n".join(out).rstrip() + "\n")


def _md_summary(r: DiffResult) -> list[str]:
    out = ["", "### Summary", ""]
    if not r.summary.changes:
        out.append("No changes to the server, tools, resources, templates or prompts.")
    if r.breaking:
        out += [f"**Breaking changes ({len(r.breaking)})**", ""]
        out += [f"- **BREAKING** {_md_change(c)}" for c in r.breaking]
        out.append("")
    warned = [c for c in r.summary.changes if c.severity == "warning"]
    if warned:
        out += [f"**Warnings ({len(warned)})**", ""]
        out += [f"- **WARNING** {_md_change(c)}" for c in warned]
        out.append("")
    compatible = [c for c in r.summary.changes if c.severity == "compatible"]
    if compatible:
        out += [f"**Compatible changes ({len(compatible)})**", ""]
        out += [f"- {_md_change(c)}" for c in compatible]
        out.append("")
    out += [f"_Note: {n}_" for n in r.summary.notes]
    return out


def _md_change(c: Change) -> str:
    subject = c.category.replace("_", " ")
    who = f"{subject} {_code(c.name)}" if c.name else subject
    return f"{who}: {_code(c.message)}"


def _md_exchanges(r: DiffResult) -> list[str]:
    if r.surface_only:
        return []
    st = r.stats
    out = ["", "### Exchanges", "",
           f"{st.paired} paired ({st.same} same, {st.changed} changed) · {st.only_a} only in A "
           f"· {st.only_b} only in B", ""]
    for e in r.exchanges[:MAX_EXCHANGES]:
        tag = " **BREAKING**" if e.severity == "breaking" else ""
        out.append(f"- {_code(_exchange_head(e))}{tag}")
        out += [f"  - {n}" for n in _exchange_notes(e)]
        out += [f"  - {_code(_diff_text(d))}" for d in e.differences[:MAX_DIFFS]]
        if len(e.differences) > MAX_DIFFS:
            out.append(f"  - … and {len(e.differences) - MAX_DIFFS} more differences")
    if len(r.exchanges) > MAX_EXCHANGES:
        out.append(f"- … and {len(r.exchanges) - MAX_EXCHANGES} more exchanges")
    for c in r.moved:
        out.append(f"_Note: {c.count_a} {_code(c.method)} attributed to other requests "
                   "(timing; not a difference)._")
    return out


def _md_latency(r: DiffResult) -> list[str]:
    if r.surface_only:
        return []
    out = ["", "### Latency", "",
           f"p50 in ms; flagged at ≥ {r.latency_threshold:g}x when a side is ≥ "
           f"{r.latency_min_ms:g} ms.", ""]
    if not r.latency:
        return out + ["No answered requests."]
    flagged = r.latency_regressions
    if flagged:
        out += _md_latency_table(flagged) + [""]
    else:
        out += ["No method is flagged.", ""]
    out += ["<details><summary>All methods</summary>", ""]
    return out + _md_latency_table(r.latency) + ["", "</details>"]


def _md_latency_table(rows: list[LatencyRow]) -> list[str]:
    out = ["| method | n | A | B | B/A | |", "|---|---:|---:|---:|---:|---|"]
    for row in rows:
        n = f"{row.count_a}" if row.count_a == row.count_b else f"{row.count_a}/{row.count_b}"
        flag = "🐢 slower" if row.flagged else ""
        out.append(f"| {_cell(_code(row.key))} | {n} | {_ms(row.p50_a_ms)} | "
                   f"{_ms(row.p50_b_ms)} | {_ratio(row)} | {flag} |")
    return out


# --- GitHub workflow annotations ---------------------------------------------------------------

MAX_ANNOTATIONS = 50
"""GitHub shows at most 10 errors and 10 warnings of a step (50 of a job); more are cut."""


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``, ``file=``): also ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str, file: str | None = None) -> str:
    """``::error file=F,title=T::message``, escaped per GitHub's workflow-command rules."""
    props = ([f"file={escape_property(file)}"] if file else []) + [
        f"title={escape_property(title)}"]
    from ..terminal import safe

    return safe(f"::{level} {','.join(props)}::{escape_data(message)}")


def github_annotations(r: DiffResult, file: str | None = None, *,
                       latency: bool = False) -> list[str]:
    """One annotation per finding: ``error`` for breaking ones, ``warning`` for the rest
    (warning and compatible changes, differing exchanges, notes; latency regressions with
    ``latency``, when they count: ``--fail-on-latency``), most severe first. ``file``: the path
    to annotate (default: B's cassette)."""
    where = str(r.b.cassette) if file is None else file
    pair = f"{r.a.label} → {r.b.label}"
    found: list[tuple[int, str]] = []
    rank = {"breaking": 0, "warning": 1, "compatible": 2}
    for c in r.summary.changes:
        level = "error" if c.severity == "breaking" else "warning"
        title = f"mcprec: {c.severity} change: {c.subject}"
        found.append((rank[c.severity], annotation(level, title, f"{c.message} ({pair})", where)))
    for e in r.exchanges:
        sev = e.severity
        if sev is None:
            continue
        lines = _exchange_notes(e) + [_diff_text(d) for d in e.differences[:MAX_DIFFS]]
        if len(e.differences) > MAX_DIFFS:
            lines.append(f"... and {len(e.differences) - MAX_DIFFS} more differences")
        title = f"mcprec: {sev} exchange: {e.label}"
        found.append((rank[sev], annotation("error" if sev == "breaking" else "warning", title,
                                            "\n".join([*lines, pair]), where)))
    for row in r.latency_regressions if latency else ():
        found.append((1, annotation(
            "warning", f"mcprec: slower: {row.key}",
            f"p50 {_ms(row.p50_a_ms)} → {_ms(row.p50_b_ms)} ms ({_ratio(row)}) ({pair})",
            where)))
    tool = "mcprec verify" if r.verify else "mcprec diff"
    for w in r.warnings:
        found.append((1, annotation("warning", tool, w, where)))
    if r.verify:  # first: what this is
        v = r.verify
        found.append((-1, annotation(
            "notice", "mcprec verify", f"{_verify_what(v)}, against the reference "
            f"{v['reference']}: {_verdict(r)}; exit status {_exit_status(v)}", where)))
    found.sort(key=lambda t: t[0])
    out = [line for _, line in found[:MAX_ANNOTATIONS]]
    if len(found) > MAX_ANNOTATIONS:
        out.append(annotation("warning", tool,
                              f"... and {len(found) - MAX_ANNOTATIONS} more findings: see the "
                              "job summary", where))
    return out


def to_github(r: DiffResult, file: str | None = None) -> str:
    """The annotations, then the Markdown report (for the log; the job summary takes the
    Markdown alone)."""
    lines = github_annotations(r, file)
    return "\n".join(lines) + ("\n\n" if lines else "") + to_markdown(r)
