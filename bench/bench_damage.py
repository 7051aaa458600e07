"""What finding damage costs on a 100 MB cassette: ``PRAGMA quick_check`` against reading a
session whole (the reader's own cost), and against counting its rows through the table's own
b-tree. Stdlib + mcprec only; prints one line a measurement.

    .venv/bin/python bench/bench_damage.py            # 100 MB, 5 rounds
    .venv/bin/python bench/bench_damage.py --mb 20 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcprec.show.dump import import_dump  # noqa: E402


def make(path: Path, mb: int, sessions: int = 4) -> None:
    """A cassette of ``mb`` MB: ``sessions`` sessions of tools/call pairs, answers of 2-40 KB."""
    lines = [json.dumps({"format": 8, "mcprec_export": 1}).encode()]
    per = mb * 1_000_000 // sessions
    for s in range(sessions):
        lines.append(json.dumps({"session": {
            "name": f"s{s}", "transport": "stdio", "target": ["srv"],
            "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:01Z",
            "status": "complete", "tags": {}, "mcprec_version": "0"}}).encode())
        size, seq, i = 0, 0, 0
        while size < per:
            pad = 2000 if i % 10 else 40000
            req = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"i": i}}}
            rsp = {"jsonrpc": "2.0", "id": i, "result": {"content": [
                {"type": "text", "text": f"{i:08d}" * (pad // 8)}]}}
            for d, m in (("c2s", req), ("s2c", rsp)):
                raw = json.dumps(m)
                size += len(raw)
                lines.append(json.dumps({"m": {"dir": d, "kind": "request" if d == "c2s"
                                               else "response", "raw": raw, "seq": seq,
                                               "t_ns": seq * 1000}}).encode())
                seq += 1
            i += 1
    import_dump(lines, path)


def timed(fn, rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.db"
        t = time.perf_counter()
        make(path, args.mb)
        print(f"made {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        sid = conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()[0]
        n = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
        print(f"one session: {n} messages")
        cases = {
            "PRAGMA quick_check (whole file)":
                lambda: conn.execute("PRAGMA quick_check").fetchall(),
            "PRAGMA integrity_check (whole file)":
                lambda: conn.execute("PRAGMA integrity_check").fetchall(),
            "read one session whole (rows and text, by the (session, seq) index)":
                lambda: sum(len(r[1]) for r in conn.execute(
                    "SELECT seq, raw FROM messages WHERE session_id = ? ORDER BY seq", (sid,))),
            "read one session's small columns (seq contiguity check)":
                lambda: sum(1 for _ in conn.execute(
                    "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (sid,))),
            "count one session through the table's b-tree (NOT INDEXED)":
                lambda: conn.execute("SELECT count(*) FROM messages NOT INDEXED "
                                     "WHERE session_id = ?", (sid,)).fetchone(),
            "count every session through the table's b-tree":
                lambda: conn.execute("SELECT session_id, count(*) FROM messages NOT INDEXED "
                                     "GROUP BY session_id").fetchall(),
            "count one session by index (max(seq) and count)":
                lambda: conn.execute("SELECT count(*), max(seq) FROM messages "
                                     "WHERE session_id = ?", (sid,)).fetchone(),
        }
        for name, fn in cases.items():
            ms, _ = timed(fn, args.rounds)
            print(f"{ms:9.1f} ms  {name}")
        conn.close()


if __name__ == "__main__":
    main()
