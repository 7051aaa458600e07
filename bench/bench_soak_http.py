"""Soak over HTTP: many short client sessions through the recording proxy and against replay.

    .venv/bin/python bench/bench_soak_http.py                  # modest sizes, ~1-2 minutes
    .venv/bin/python bench/bench_soak_http.py --full           # the issue's sizes (long)
    .venv/bin/python bench/bench_soak_http.py --proxy 20000 --replay-one 20000 --replay-many 3000
    .venv/bin/python bench/bench_soak_http.py --only proxy     # one phase: proxy, one, many

Each client session, one after another, is a plain Streamable HTTP client on a keep-alive
connection of its own: ``initialize``, ``notifications/initialized``, one ``tools/call``,
``DELETE``. Three phases, each a fresh server process:

- ``proxy``: N sessions through ``mcprec record --target`` in front of ``bench/http_upstream.py``
  (a fast upstream: JSON answers, session ids); RSS of the proxy and of its recorder process.
- ``one``: N clients against ``mcprec replay --http -s NAME`` of one recorded session.
- ``many``: N clients against ``mcprec replay --http`` (no ``-s``) of a cassette of S recorded
  sessions (``--candidates``, 300), each client calling the tool as one of them did (chosen at
  random), so that its choice narrows S candidates to one.

RSS is read from /proc every N/10 sessions, with the time a session took over that tenth.
Growth is measured from the RSS after the first tenth (the issue's "after the first 10,000" of
100,000). ``many`` also times the choice itself in this process: a fresh client's choice among
the S recorded sessions for its ``initialize`` and its ``tools/call`` (median of 200).

Stdlib + orjson only; a benchmark, not a test (exit 1 only when a correctness check fails).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MCPREC = [sys.executable, "-m", "mcprec"]
UPSTREAM = [sys.executable, str(HERE / "http_upstream.py")]
RECORDING = re.compile(r"mcprec: recording (\S+) -> ")
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class BenchError(Exception):
    pass


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Proc:
    """A child process; its URL from its first stdout line, or from a line of its stderr."""

    def __init__(self, argv: list[str], tmp: Path, name: str, from_stderr: bool = False) -> None:
        self.name = name
        self.err = tmp / f"{name}.stderr"
        self.out = tmp / f"{name}.stdout"
        with open(self.err, "wb") as e, open(self.out, "wb") as o:
            self.popen = subprocess.Popen(argv, stdout=o, stderr=e, cwd=ROOT)
        deadline = time.monotonic() + 30
        self.url = ""
        while not self.url:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise BenchError(f"{name} did not start: {self.err.read_text()[-800:]}")
            if from_stderr:
                m = RECORDING.search(self.err.read_text(errors="replace"))
                self.url = m.group(1) if m else ""
            else:
                first = self.out.read_text(errors="replace").split("\n", 1)
                self.url = first[0].strip() if len(first) == 2 else ""
            if not self.url:
                time.sleep(0.02)

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BenchError(f"{self.name} did not exit within 60 s of SIGINT") from None
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def rss(self, with_children: bool = False) -> tuple[int, int]:
        """RSS (KiB) of the process, and of its children (the recorder process)."""
        kids = sum(rss_kib(c) for c in children(self.popen.pid)) if with_children else 0
        return rss_kib(self.popen.pid), kids


def client_session(url: str, text: str) -> None:
    """initialize, initialized, one tools/call, DELETE: each answer checked."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("POST", u.path, orjson.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "soak", "version": "1"}}}), HEADERS)
        r = conn.getresponse()
        body = r.read()
        sid = r.getheader("mcp-session-id")
        if r.status != 200 or sid is None or b'"serverInfo"' not in body:
            raise BenchError(f"initialize: HTTP {r.status} {body[:200]!r}")
        h = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        conn.request("POST", u.path, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', h)
        r = conn.getresponse()
        r.read()
        if r.status != 202:
            raise BenchError(f"initialized: HTTP {r.status}")
        conn.request("POST", u.path, orjson.dumps({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}), h)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200 or text.encode() not in body:
            raise BenchError(f"tools/call: HTTP {r.status} {body[:200]!r}")
        conn.request("DELETE", u.path, headers=h)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise BenchError(f"DELETE: HTTP {r.status}")
    finally:
        conn.close()


def soak(proc: Proc, n: int, texts: list[str], with_children: bool, label: str
         ) -> dict[str, Any]:
    """``n`` sessions one after another; RSS and time per session every n/10."""
    step = max(1, n // 10)
    rows: list[tuple[int, int, int, float]] = []
    base = proc.rss(with_children)
    print(f"  {label}: start RSS {base[0] / 1024:.1f} MiB"
          + (f" (recorder {base[1] / 1024:.1f} MiB)" if with_children else ""), flush=True)
    t = time.perf_counter()
    for i in range(1, n + 1):
        client_session(proc.url, texts[i % len(texts)] if len(texts) > 1 else texts[0])
        if i % step == 0 or i == n:
            now = time.perf_counter()
            per = (now - t) / (i - (rows[-1][0] if rows else 0)) * 1000
            t = now
            r, k = proc.rss(with_children)
            rows.append((i, r, k, per))
            print(f"  {i:>8,} sessions  RSS {r / 1024:7.1f} MiB"
                  + (f"  recorder {k / 1024:6.1f} MiB" if with_children else "")
                  + f"  {per:6.2f} ms/session", flush=True)
    first = rows[0]
    last = rows[-1]
    growth = (last[1] - first[1]) / 1024
    total = (last[1] - base[0]) / 1024
    print(f"  {label}: RSS growth after the first tenth {growth:+.1f} MiB, in all "
          f"{total:+.1f} MiB" + (f"; recorder after the first tenth "
                                 f"{(last[2] - first[2]) / 1024:+.1f} MiB" if with_children else "")
          + f"; median {statistics.median(r[3] for r in rows):.2f} ms/session", flush=True)
    return {"sessions": n, "growth_mib": growth, "total_mib": total,
            "ms_per_session": statistics.median(r[3] for r in rows),
            "recorder_growth_mib": (last[2] - first[2]) / 1024}


def record_cassette(tmp: Path, name: str, texts: list[str]) -> Path:
    """A cassette of one recorded session per text (each calling the tool with it)."""
    cassette = tmp / f"{name}.db"
    up = Proc(UPSTREAM, tmp, f"upstream-{name}")
    try:
        rec = Proc([*MCPREC, "record", "--target", up.url, "--listen", "127.0.0.1:0", "-c",
                    str(cassette), "-s", name], tmp, f"record-{name}", from_stderr=True)
        try:
            for text in texts:
                client_session(rec.url, text)
        finally:
            rec.stop()
    finally:
        up.stop()
    return cassette


def check_cassette(path: Path, sessions: int, files: list[Path] | None = None) -> None:
    """``sessions`` sessions of one tools/call each in ``path`` (or in the ``files`` of a
    rotated recording, each session whole in one of them)."""
    got = calls = 0
    for one in files or [path]:
        conn = sqlite3.connect(f"file:{one}?mode=ro", uri=True)
        try:
            got += conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
            calls += conn.execute("SELECT count(*) FROM messages WHERE method = 'tools/call' "
                                  "AND kind = 'request'").fetchone()[0]
        finally:
            conn.close()
    if got != sessions or calls != sessions:
        raise BenchError(f"{path.name}: {got} sessions, {calls} tools/call recorded; "
                         f"expected {sessions} of each")


def time_choice(cassette: Path, texts: list[str], runs: int = 200) -> float:
    """Median ms of one client's choice among the cassette's sessions (initialize, then the
    tools/call of one of them), in this process, as the replay server makes it."""
    sys.path.insert(0, str(ROOT))
    from mcprec.cassette import Cassette
    from mcprec.replay import choose
    from mcprec.replay.playback import candidates

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "soak", "version": "1"}}}
    times = []
    with Cassette.open(cassette) as c:
        found = candidates(c, None)
        shared = choose.shared_candidates(c, found, None) \
            if hasattr(choose, "shared_candidates") else None  # a tree from before
        for i in range(runs):
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": texts[i % len(texts)]}}}
            t = time.perf_counter()
            choice = choose.SessionChoice(c, found, None, **(
                {"shared": shared} if shared is not None else {}))
            choice.match(init)
            choice.match(call)
            times.append(time.perf_counter() - t)
            if choice.remaining != 1:
                raise BenchError(f"the choice left {choice.remaining} candidates, not 1")
    return statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--proxy", type=int, default=3000, help="sessions through the proxy")
    ap.add_argument("--replay-one", type=int, default=5000,
                    help="clients against replay -s NAME of one session")
    ap.add_argument("--replay-many", type=int, default=2000,
                    help="clients against replay of the many-session cassette")
    ap.add_argument("--candidates", type=int, default=300,
                    help="recorded sessions in the many-session cassette")
    ap.add_argument("--rotate-size", metavar="SIZE",
                    help="proxy phase: record --target --rotate-size SIZE (e.g. 1M)")
    ap.add_argument("--full", action="store_true",
                    help="the issue's sizes: 100,000 proxy sessions, 100,000 and 10,000 clients")
    ap.add_argument("--only", choices=("proxy", "one", "many"), action="append",
                    help="run this phase only (repeatable)")
    args = ap.parse_args()
    if args.full:
        args.proxy, args.replay_one, args.replay_many = 100_000, 100_000, 10_000
    phases = args.only or ["proxy", "one", "many"]
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-soak-http-"))
    results: dict[str, Any] = {}
    try:
        if "proxy" in phases:
            print(f"proxy: {args.proxy:,} sessions through record --target", flush=True)
            up = Proc(UPSTREAM, tmp, "upstream")
            cassette = tmp / "proxy.db"
            try:
                rec = Proc([*MCPREC, "record", "--target", up.url, "--listen", "127.0.0.1:0",
                            "-c", str(cassette), "-s", "soak",
                            *(["--rotate-size", args.rotate_size] if args.rotate_size else [])],
                           tmp, "record", from_stderr=True)
                try:
                    results["proxy"] = soak(rec, args.proxy, ["hello"], True, "proxy")
                finally:
                    rec.stop()
            finally:
                up.stop()
            files = sorted(tmp.glob("proxy-*.db")) if args.rotate_size else None
            check_cassette(cassette, args.proxy, files)
            if files:
                print(f"  proxy: {len(files)} files rotated past {args.rotate_size}", flush=True)
            for f in files or [cassette]:
                f.unlink()
        if "one" in phases:
            one = record_cassette(tmp, "one", ["hello"])
            print(f"replay -s one: {args.replay_one:,} clients", flush=True)
            srv = Proc([*MCPREC, "replay", str(one), "-s", "one", "--http", "--listen",
                        "127.0.0.1:0"], tmp, "replay-one")
            try:
                results["one"] = soak(srv, args.replay_one, ["hello"], False, "replay one")
            finally:
                code = srv.stop()
            if code != 0:
                raise BenchError(f"replay -s one exited {code}")
        if "many" in phases:
            texts = [f"client-{i}" for i in range(args.candidates)]
            t = time.perf_counter()
            many = record_cassette(tmp, "many", texts)
            check_cassette(many, args.candidates)
            print(f"replay of {args.candidates} sessions: {args.replay_many:,} clients "
                  f"(cassette recorded in {time.perf_counter() - t:.1f} s)", flush=True)
            choice_ms = time_choice(many, texts)
            print(f"  choice among {args.candidates} sessions (initialize + tools/call), "
                  f"in-process: median {choice_ms:.3f} ms", flush=True)
            srv = Proc([*MCPREC, "replay", str(many), "--http", "--listen", "127.0.0.1:0"],
                       tmp, "replay-many")
            shuffled = texts[:]
            random.Random(1).shuffle(shuffled)
            try:
                results["many"] = soak(srv, args.replay_many, shuffled, False, "replay many")
            finally:
                code = srv.stop()
            results["many"]["choice_ms"] = choice_ms
            if code != 0:
                raise BenchError(f"replay of many exited {code}")
    except BenchError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    print("summary: " + orjson.dumps(results).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
