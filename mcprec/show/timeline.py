"""Human-readable views of a cassette: the session list and a session's timeline."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..cassette import Cassette, Message, Session
from ..terminal import safe
from ..wire import CLIENT_TO_SERVER


def human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KB", "MB", "GB"):
        n_f = n / 1024
        if n_f < 1024 or unit == "GB":
            return f"{n_f:.1f} {unit}"
        n = int(n_f)
    return f"{n} B"  # pragma: no cover


def human_duration_ns(ns: int) -> str:
    if ns < 1_000_000:
        return f"{ns / 1000:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


def session_dict(s: Session) -> dict[str, Any]:
    return {
        "name": s.name,
        "started_at": s.started_at,
        "ended_at": s.ended_at,
        "status": s.status,
        "transport": s.transport,
        "target": s.target,
        "protocol_version": s.protocol_version,
        "client_info": s.client_info,
        "server_info": s.server_info,
        "client_capabilities": s.client_capabilities,
        "server_capabilities": s.server_capabilities,
        "instructions": s.instructions,
        "exit_code": s.exit_code,
        "tags": s.tags,
        "mcprec_version": s.mcprec_version,
        "messages": s.message_count,
        "duration_ns": s.duration_ns,
    }


def backpressure_line(paused: dict[str, int]) -> str:
    """``show``'s line for a session whose forwarding waited for the recorder
    (``Cassette.backpressure``): how often, how long, and the memory bound that made it wait."""
    n, ms = paused["pauses"], paused["paused_ms"]
    took = human_duration_ns(ms * 1_000_000) if ms else "under 1 ms"
    return (f"forwarding paused {n} time{'s' if n != 1 else ''} ({took} in all) waiting for "
            f"the recorder (memory bound {paused['bound_bytes'] >> 20} MiB)")


def session_rows(sessions: Iterable[Session], unanswered: dict[int, int] | None = None,
                 losses: dict[int, Any] | None = None) -> list[list[str]]:
    """The rows of ``mcprec sessions``; ``unanswered``: session id -> requests with no answer;
    ``losses``: session id -> what recording lost (``Cassette.losses``)."""
    rows = [["NAME", "STARTED", "TARGET", "SERVER", "MSGS", "UNANS", "DURATION", "STATUS"]]
    for s in sessions:
        target = safe(s.target_label)
        if len(target) > 40:
            target = target[:37] + "..."
        rows.append([safe(cell) for cell in (
            s.name, s.started_at[:19].replace("T", " "), target, s.server_label or "-",
            str(s.message_count), str((unanswered or {}).get(s.id, 0)),
            human_duration_ns(s.duration_ns), _status(s, (losses or {}).get(s.id)),
        )])
    return rows


def _status(s: Session, lost: dict[str, Any] | None) -> str:
    if lost is None:
        return s.status
    return f"{s.status} (lost {lost['lost_messages']}: {lost['reason']})"


def format_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def message_dict(m: Message, latency_ns: int | None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "seq": m.seq,
        "t_ns": m.t_ns,
        "direction": m.direction,
        "kind": m.kind,
        "method": m.method,
        "id": m.rpc_id,
        "size": m.size,
    }
    if m.reply_to is not None:
        d["reply_to"] = m.reply_to
    if latency_ns is not None:
        d["latency_ns"] = latency_ns
    if m.http:
        d["http"] = m.http
    return d


def timeline(cassette: Cassette, session: Session) -> Iterator[tuple[Message, int | None]]:
    """Each message with, for responses, the latency since the request it answers."""
    request_t: dict[int, int] = {}
    for m in cassette.messages(session):
        latency = None
        if m.kind == "request":
            request_t[m.seq] = m.t_ns
        elif m.reply_to is not None and m.reply_to in request_t:
            latency = m.t_ns - request_t.pop(m.reply_to)
        yield m, latency


def format_message_line(m: Message, latency_ns: int | None, *, color: bool = False) -> str:
    if m.http and m.http.get("synthetic"):  # a transport failure the recorder noted
        line = safe(f"{m.seq:>5}  {m.t_ns / 1e6:>10.3f} ms  "
                    f"! {m.http.get('error', 'transport error')}")
        if color:
            import click

            return click.style(line, fg="red")
        return line
    arrow = "→" if m.direction == CLIENT_TO_SERVER else "←"
    who = "c→s" if m.direction == CLIENT_TO_SERVER else "s→c"
    t = f"{m.t_ns / 1e6:>10.3f} ms"
    ident = f"id={m.rpc_id}" if m.rpc_id is not None else ""
    method = m.method or ("-" if m.kind != "invalid" else _preview(m.raw))
    lat = human_duration_ns(latency_ns) if latency_ns is not None else ""
    line = (
        f"{m.seq:>5}  {t}  {arrow} {who}  {m.kind:<12}  {method:<32}  {ident:<10}  "
        f"{human_bytes(m.size):>9}  {lat}"
    ).rstrip()
    line = safe(line)
    if m.truncated is not None:
        line += f"  [truncated: {human_bytes(m.truncated)} on the wire]"
    if not color:
        return line
    import click

    fg = {"error": "red", "invalid": "magenta", "notification": "cyan",
          "response": "green"}.get(m.kind)
    return click.style(line, fg=fg)


def _preview(raw: bytes, width: int = 30) -> str:
    text = raw[: width * 4].decode("utf-8", "replace").replace("\n", " ")
    return repr(text[:width])
