"""Load: many concurrent MCP client sessions through the recording proxy, then against the HTTP
replay server of that recording.

    .venv/bin/python bench/bench_sessions.py [--sessions 50] [--calls 10]

Upstream: tests/peers/http_server.py (an MCPServer from the official SDK, SSE answers). Each
client session is the SDK's own Streamable HTTP client: initialize, then ``calls`` ``add`` tool
calls with arguments of its own, all sessions at once. Checks: every answer is right, the
cassette holds one complete session per client with all its messages, and the replay server
gives every one of them the same answers again with the upstream stopped. Prints wall times.
A benchmark, not a test: exit 1 only when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEER = REPO / "tests" / "peers" / "http_server.py"


def start(argv: list[str], pattern: str, from_stderr: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stream = proc.stderr if from_stderr else proc.stdout
    assert stream is not None
    line = stream.readline().decode()
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        raise SystemExit(f"{argv[:3]} did not start: {line!r}")
    return proc, m.group(0)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)


async def session(url: str, n: int, calls: int) -> list[str]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with streamable_http_client(url) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                out = []
                for i in range(calls):
                    r = await s.call_tool("add", {"a": n, "b": i})
                    out.append(r.content[0].text)  # type: ignore[union-attr]
                return out


async def many(url: str, sessions: int, calls: int, same: bool = False
               ) -> tuple[float, list[list[str]]]:
    t = time.perf_counter()
    results = await asyncio.gather(*(session(url, 0 if same else n, calls)
                                     for n in range(sessions)))
    return time.perf_counter() - t, list(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--calls", type=int, default=10)
    args = ap.parse_args()
    want = [[str(n + i) for i in range(args.calls)] for n in range(args.sessions)]
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-sessions-"))
    cassette = tmp / "load.db"
    upstream, up_url = start([sys.executable, str(PEER)], r"http://\S+")
    proxy, proxy_url = start([sys.executable, "-m", "mcprec", "record", "--target", up_url,
                              "--listen", "127.0.0.1:0", "-c", str(cassette), "-s", "load"],
                             r"http://[\d.]+:\d+\S*", from_stderr=True)
    try:
        direct_s, direct = asyncio.run(many(up_url, args.sessions, args.calls))
        rec_s, recorded = asyncio.run(many(proxy_url, args.sessions, args.calls))
    finally:
        stop(proxy)
        stop(upstream)
    ok = direct == want and recorded == want
    with sqlite3.connect(cassette) as conn:
        rows = conn.execute("SELECT status, count(*) FROM sessions GROUP BY status").fetchall()
        calls = conn.execute("SELECT count(*) FROM messages WHERE method = 'tools/call' "
                             "AND kind = 'response'").fetchone()[0]
    ok = ok and rows == [("complete", args.sessions)] and calls == args.sessions * args.calls
    replay, replay_url = start([sys.executable, "-m", "mcprec", "replay", str(cassette),
                                "-s", "load", "--http", "--listen", "127.0.0.1:0"], r"http://\S+")
    try:
        # every client session replays the recorded session 'load' on its own: all at once
        rep_s, replayed = asyncio.run(many(replay_url, args.sessions, args.calls, same=True))
    finally:
        stop(replay)
    ok = ok and replayed == [want[0]] * args.sessions
    total = args.sessions * (args.calls + 1)
    print(f"{args.sessions} concurrent sessions x ({args.calls} calls + initialize) = {total} "
          "requests each way")
    print(f"  direct to the SDK server   {direct_s:6.2f} s  ({total / direct_s:,.0f} req/s)")
    print(f"  through mcprec record      {rec_s:6.2f} s  ({total / rec_s:,.0f} req/s, "
          f"{rec_s / direct_s:.2f}x the time)")
    print(f"  mcprec replay --http       {rep_s:6.2f} s  ({total / rep_s:,.0f} req/s; one "
          "recorded session replayed to every client at once)")
    print(f"  cassette: sessions {rows}, {calls} tool answers recorded")
    print("checks:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
