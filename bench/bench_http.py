"""Benchmark: what do `mcprec record --target` (the recording HTTP proxy) and `mcprec replay --http`
cost, against talking to an MCP server over Streamable HTTP directly?

    .venv/bin/python bench/bench_http.py [--rounds N] [--quick] [--json] [--no-sdk]

Configurations, each in fresh processes per measurement, alternated within every round (the
order rotates from round to round so that drift and warm-up hit all of them alike), each with
JSON and with SSE responses:

  direct   client <-> upstream
  record   client <-> python -m mcprec record --target <upstream> (fresh cassette) <-> upstream
  replay   client <-> python -m mcprec replay --http, serving a session recorded beforehand
           through the proxy from that upstream (in the same response mode); no upstream

Upstreams: ``fast`` is bench/http_upstream.py (raw uvloop + httptools, echoes each request:
tens of thousands of requests/s); ``stdlib`` is bench/http_stdlib_upstream.py, a standard-library
HTTP echo server (the issue's reference direct server, "~5,800 round trips/s here"); ``sdk`` is
tests/peers/http_server.py, an MCPServer on the official Python SDK calling its ``echo`` tool
(what a real Python MCP server costs).

Loads, on HTTP/1.1 keep-alive connections, each connection its own MCP session (initialize +
notifications/initialized, then tools/call echo requests with a ~120 B text, one at a time):

  load   8 connections at once (--connections), a few thousand requests each: requests/s, p50
  ping   1 connection, 1 request at a time (unloaded): p50 latency, "added p50" vs direct

Every response is checked (status 200, the request's id and the echoed text). After each record
measurement the proxy is stopped with SIGINT; it must exit 0, the upstream must have received
exactly the POSTs the client sent (its count), and the cassette must hold one complete session
per connection with every request and every answer.

The client is one process per connection group (--client-procs) running raw asyncio protocols on
uvloop with httptools: a few µs per request. Its CPU share of the wall time is printed; on a
2-CPU machine every configuration shares the CPUs with it, so compare ratios, not absolutes.

uvloop + httptools + orjson (mcprec's own dependencies). A benchmark, not a test: it prints
numbers and PASS/FAIL against targets, and exits 1 only when a correctness check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httptools
import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable
FAST = [PY, str(BENCH / "http_upstream.py")]
STDLIB = [PY, str(BENCH / "http_stdlib_upstream.py")]
SDK = [PY, str(ROOT / "tests" / "peers" / "http_server.py")]
MCPREC = [PY, "-m", "mcprec"]

CONFIGS = ("direct", "record", "replay")
MODES = ("json", "sse")
PAYLOAD = b"The quick brown fox jumps over the lazy dog; " * 3  # ~135 B of text to echo
WARMUP = 50           # requests per connection before the timed part (untimed)
RECORDED = 50         # tools/call requests in the session replay serves (then the last repeats)
STARTUP_S = 30.0

TARGETS = {
    "record_ratio": 0.7,      # record throughput >= 0.7x direct (fast upstream)
    "record_added_p50": 300.0,  # record unloaded p50 - direct p50 <= 300 µs
    "replay_ratio": 1.0,      # replay throughput >= 1.0x direct
}


class BenchError(Exception):
    """A correctness failure: the numbers of this run mean nothing."""


# --- requests ---------------------------------------------------------------------------------

INIT_BODY = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench-http", "version": "1.0.0"}}})
INITIALIZED_BODY = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
CALL_HEAD = b'{"jsonrpc":"2.0","id":'
CALL_TAIL = (b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"'
             + PAYLOAD + b'"}}}')


def call_body(i: int) -> bytes:
    return CALL_HEAD + b"%d" % i + CALL_TAIL


def http_request(host: bytes, path: bytes, sid: bytes | None, body: bytes) -> bytes:
    return b"".join((
        b"POST ", path, b" HTTP/1.1\r\nhost: ", host,
        b"\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\n",
        (b"mcp-session-id: " + sid + b"\r\nmcp-protocol-version: 2025-11-25\r\n") if sid else b"",
        b"content-length: ", b"%d" % len(body), b"\r\n\r\n", body,
    ))


# --- the client: raw asyncio protocols on uvloop, httptools to parse ------------------------------


class Conn(asyncio.Protocol):
    """One keep-alive connection, one MCP session, one request at a time."""

    def __init__(self, host: bytes, path: bytes) -> None:
        self.host, self.path = host, path
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.sid: bytes | None = None
        self.body: list[bytes] = []
        self.headers: dict[bytes, bytes] = {}
        self.done: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None
        self.send_ts: list[int] = []
        self.recv_ts: list[int] = []
        self.posts = 0
        self._n = 0
        self._i = 0
        self._first = 0
        self._stop_at = 0.0
        self._expect_call = True

    # protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(BenchError(f"bad HTTP from the server: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(BenchError(f"connection lost: {exc!r}"))

    def on_message_begin(self) -> None:
        self.body = []
        self.headers = {}

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        t = time.perf_counter_ns()
        status = self.parser.get_status_code()
        body = b"".join(self.body)
        if self._expect_call:
            i = self._first + self._i
            if status != 200 or (b'"id":%d' % i) not in body or PAYLOAD not in body:
                self._fail(BenchError(f"bad answer to request {i}: {status} {body[:600]!r}"))
                return
            self.recv_ts.append(t)
            self._i += 1
            if self._i < self._n and (not self._stop_at or time.monotonic() < self._stop_at):
                self._send_call()
            else:
                self._finish()
        else:
            self._reply = (status, body)
            self._finish()

    # driving
    def _fail(self, e: BaseException) -> None:
        self.lost = self.lost or e
        if self.done is not None and not self.done.done():
            self.done.set_exception(e)

    def _finish(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _send_call(self) -> None:
        assert self.transport is not None
        data = http_request(self.host, self.path, self.sid, call_body(self._first + self._i))
        self.send_ts.append(time.perf_counter_ns())
        self.posts += 1
        self.transport.write(data)

    async def request(self, body: bytes) -> tuple[int, bytes]:
        """One request outside the timed loop (initialize, initialized)."""
        assert self.transport is not None
        self._expect_call = False
        self.done = asyncio.get_running_loop().create_future()
        self.posts += 1
        self.transport.write(http_request(self.host, self.path, self.sid, body))
        await self.done
        return self._reply

    async def calls(self, first: int, n: int, stop_at: float = 0.0, keep: bool = True) -> None:
        """``n`` tools/call requests with ids ``first``..., one at a time, all checked."""
        self._expect_call = True
        self._first, self._n, self._i, self._stop_at = first, n, 0, stop_at
        if not keep:
            mark = len(self.send_ts)
        self.done = asyncio.get_running_loop().create_future()
        self._send_call()
        await self.done
        if not keep:
            del self.send_ts[mark:], self.recv_ts[mark:]

    async def start(self) -> None:
        """initialize (keeping the session id), initialized, and the untimed warm-up."""
        status, body = await self.request(INIT_BODY)
        if status != 200 or b'"id":0' not in body:
            raise BenchError(f"initialize failed: {status} {body[:300]!r}")
        self.sid = self.headers.get(b"mcp-session-id")
        status, body = await self.request(INITIALIZED_BODY)
        if status != 202:
            raise BenchError(f"notifications/initialized: {status} {body[:200]!r}")
        await self.calls(1_000_000, WARMUP, keep=False)


def _client_proc(url: str, conns: int, requests: int, max_seconds: float, pipe: Any,
                 go: Any) -> None:
    """A client process: open ``conns`` sessions, wait for ``go``, run, send back timings."""
    import uvloop

    async def main() -> dict[str, Any]:
        m = re.match(r"http://([^/]+)(/.*)$", url)
        assert m
        host, path = m.group(1).encode(), m.group(2).encode()
        h, p = m.group(1).rsplit(":", 1)
        loop = asyncio.get_running_loop()
        cs: list[Conn] = []
        for _ in range(conns):
            _, c = await loop.create_connection(lambda: Conn(host, path), h, int(p))
            cs.append(c)
        await asyncio.gather(*(c.start() for c in cs))
        pipe.send("ready")
        await loop.run_in_executor(None, go.wait)
        cpu0 = _cpu()
        t0 = time.monotonic()
        stop_at = t0 + max_seconds
        await asyncio.gather(*(c.calls(1, requests, stop_at) for c in cs))
        wall = time.monotonic() - t0
        cpu = _cpu() - cpu0
        for c in cs:
            assert c.transport is not None
            c.transport.close()
        return {"send": [c.send_ts for c in cs], "recv": [c.recv_ts for c in cs],
                "posts": sum(c.posts for c in cs), "cpu": cpu, "wall": wall}

    try:
        pipe.send(uvloop.run(main()))
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        pipe.send(f"error: {e!r}")
    finally:
        pipe.close()


HZ = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds all CPUs have spent busy since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / HZ  # all but idle and iowait


def ours() -> float:
    """CPU seconds of this process and of every process it has spawned and reaped."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class LoadResult:
    throughput: float
    p50_us: float
    p99_us: float
    completed: int
    posts: int
    client_busy: float  # client CPU / wall, summed over client processes


def run_load(url: str, conns: int, requests: int, procs: int, max_seconds: float) -> LoadResult:
    ctx = mp.get_context("fork")
    procs = max(1, min(procs, conns))
    split = [conns // procs + (1 if k < conns % procs else 0) for k in range(procs)]
    go = ctx.Event()
    children = []
    for n in split:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_client_proc, args=(url, n, requests, max_seconds, child, go))
        proc.start()
        child.close()
        children.append((proc, parent))
    try:
        for proc, pipe in children:
            if not pipe.poll(STARTUP_S):
                raise BenchError("client did not start")
            msg = pipe.recv()
            if msg != "ready":
                raise BenchError(f"client: {msg}")
        go.set()
        outs = []
        for proc, pipe in children:
            if not pipe.poll(max_seconds + 60):
                raise BenchError("client did not finish")
            out = pipe.recv()
            if isinstance(out, str):
                raise BenchError(f"client: {out}")
            outs.append(out)
    finally:
        for proc, _ in children:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
    sends = [s for o in outs for s in o["send"]]
    recvs = [r for o in outs for r in o["recv"]]
    lat = sorted(r - s for ss, rr in zip(sends, recvs) for s, r in zip(ss, rr))
    first = min(ss[0] for ss in sends if ss)
    last = max(rr[-1] for rr in recvs if rr)
    n = len(lat)
    return LoadResult(
        throughput=n / ((last - first) / 1e9), p50_us=percentile(lat, 0.5) / 1e3,
        p99_us=percentile(lat, 0.99) / 1e3, completed=n, posts=sum(o["posts"] for o in outs),
        client_busy=sum(o["cpu"] for o in outs) / max(o["wall"] for o in outs),
    )


def percentile(sorted_values: list[int], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[i])


# --- the processes under test -----------------------------------------------------------------


class Proc:
    """A child process; its URL comes from its first stdout line or a line of its stderr."""

    def __init__(self, argv: list[str], tmp: Path, name: str,
                 url_from_stderr: re.Pattern[str] | None = None) -> None:
        self.name = name
        self.err_path = tmp / f"{name}.stderr"
        self.out_path = tmp / f"{name}.stdout"
        with open(self.err_path, "wb") as err, open(self.out_path, "wb") as out:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)
        deadline = time.monotonic() + STARTUP_S
        self.url = ""
        while not self.url:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise BenchError(f"{name} did not start: {self.stderr()[-800:]}")
            if url_from_stderr is not None:
                m = url_from_stderr.search(self.stderr())
                self.url = m.group(1) if m else ""
            else:
                first = self.stdout().split("\n", 1)
                self.url = first[0].strip() if len(first) == 2 else ""
            if not self.url:
                time.sleep(0.01)

    def stdout(self) -> str:
        return self.out_path.read_bytes().decode(errors="replace")

    def stderr(self) -> str:
        return self.err_path.read_bytes().decode(errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BenchError(f"{self.name} did not exit within {timeout} s of SIGINT")
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


RECORDING = re.compile(r"mcprec: recording (\S+) -> ")


def start_upstream(kind: str, mode: str, tmp: Path) -> Proc:
    if kind in ("fast", "stdlib"):
        argv = (FAST if kind == "fast" else STDLIB) + (["--sse"] if mode == "sse" else [])
    else:
        argv = SDK + ([] if mode == "sse" else ["--json-response"])
    return Proc(argv, tmp, f"upstream-{kind}-{mode}")


def start_record(target: str, cassette: Path, tmp: Path) -> Proc:
    return Proc([*MCPREC, "record", "--target", target, "--listen", "127.0.0.1:0", "-c",
                 str(cassette), "-s", "bench"], tmp, "record", url_from_stderr=RECORDING)


def start_replay(cassette: Path, tmp: Path) -> Proc:
    return Proc([*MCPREC, "replay", str(cassette), "-s", "bench", "--http", "--listen",
                 "127.0.0.1:0"], tmp, "replay")


def upstream_count(proc: Proc) -> int | None:
    m = re.search(r"^requests=(\d+)$", proc.stdout(), re.M)
    return int(m.group(1)) if m else None


def verify_cassette(path: Path, sessions: int, posts: int, calls: int) -> None:
    """One complete session per connection; every client message and every answer recorded."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT status, count(*) FROM sessions GROUP BY status").fetchall()
        if rows != [("complete", sessions)]:
            raise BenchError(f"{path.name}: sessions {rows}, expected {sessions} complete")
        got = dict(conn.execute("SELECT direction, count(*) FROM messages GROUP BY direction"))
        # every POST carries one client message; every request but the notification is answered
        want = {"client_to_server": posts, "server_to_client": posts - sessions}
        if got != want:
            raise BenchError(f"{path.name}: messages {got}, expected {want}")
        paired = conn.execute("SELECT count(*) FROM messages WHERE kind = 'response' AND "
                              "reply_to IS NOT NULL").fetchone()[0]
        if paired != posts - sessions:
            raise BenchError(f"{path.name}: {paired} paired responses, expected "
                             f"{posts - sessions}")
    finally:
        conn.close()
    del calls


def record_for_replay(kind: str, mode: str, tmp: Path) -> Path:
    """A session recorded through the proxy: initialize, initialized, RECORDED tools/call."""
    cassette = tmp / f"replay-{kind}-{mode}.db"
    up = start_upstream(kind, mode, tmp)
    try:
        proxy = start_record(up.url, cassette, tmp)
        try:
            import uvloop

            async def once() -> None:
                m = re.match(r"http://([^/]+)(/.*)$", proxy.url)
                assert m
                h, p = m.group(1).rsplit(":", 1)
                loop = asyncio.get_running_loop()
                _, c = await loop.create_connection(
                    lambda: Conn(m.group(1).encode(), m.group(2).encode()), h, int(p))
                status, body = await c.request(INIT_BODY)
                c.sid = c.headers.get(b"mcp-session-id")
                await c.request(INITIALIZED_BODY)
                await c.calls(1, RECORDED)
                assert c.transport is not None
                c.transport.close()

            uvloop.run(once())
        finally:
            if proxy.stop() != 0:
                raise BenchError(f"record exited non-zero: {proxy.stderr()[-500:]}")
    finally:
        up.stop()
    return cassette


# --- one measurement --------------------------------------------------------------------------


@dataclass
class Result:
    upstream: str
    mode: str
    config: str
    round: int
    load: LoadResult
    ping: LoadResult
    extra: dict[str, Any] = field(default_factory=dict)


def run_one(kind: str, mode: str, config: str, rnd: int, tmp: Path, args: argparse.Namespace,
            replay_cassettes: dict[tuple[str, str], Path]) -> Result:
    procs: list[Proc] = []
    cassette = tmp / f"rec-{kind}-{mode}-{rnd}.db"
    up = None
    try:
        if config in ("direct", "record"):
            up = start_upstream(kind, mode, tmp)
            procs.append(up)
        if config == "direct":
            url = up.url  # type: ignore[union-attr]
        elif config == "record":
            front = start_record(up.url, cassette, tmp)  # type: ignore[union-attr]
            procs.append(front)
            url = front.url
        else:
            front = start_replay(replay_cassettes[(kind, mode)], tmp)
            procs.append(front)
            url = front.url
        requests = {"fast": args.requests, "stdlib": args.requests // 3}.get(kind,
                                                                           args.sdk_requests)
        try:
            load = run_load(url, args.connections, requests, args.client_procs, args.max_seconds)
            ping = run_load(url, 1, args.ping, 1, args.max_seconds)
        except BenchError as e:
            logs = "\n".join(f"--- {p.name} stderr:\n{p.stderr()[-3000:]}" for p in procs)
            raise BenchError(f"{kind} {mode} {config}: {e}\n{logs}") from None
        extra: dict[str, Any] = {}
        if config != "direct":
            code = front.stop()
            if code != 0:
                raise BenchError(f"{config} exited with {code}: {front.stderr()[-500:]}")
            if "Traceback" in front.stderr():
                raise BenchError(f"{config} printed a traceback: {front.stderr()[-1500:]}")
        if up is not None:
            up.stop()
            posts = load.posts + ping.posts
            if kind in ("fast", "stdlib"):
                got = upstream_count(up)
                if got != posts:
                    raise BenchError(f"{config}: upstream received {got} POSTs, the client sent "
                                     f"{posts}")
        if config == "record":
            verify_cassette(cassette, args.connections + 1, load.posts + ping.posts,
                            load.completed + ping.completed)
        return Result(kind, mode, config, rnd, load, ping, extra)
    finally:
        for p in procs:
            p.kill()
        for p in glob.glob(f"{cassette}*"):
            os.unlink(p)


# --- the whole run ----------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(results: list[Result]) -> dict[str, Any]:
    by: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        by.setdefault((r.upstream, r.mode, r.config), []).append(r)
    out: dict[str, Any] = {}
    for (kind, mode, config), rs in by.items():
        direct = {r.round: r for r in by.get((kind, mode, "direct"), [])}
        fast_direct = {r.round: r for r in by.get(("fast", mode, "direct"), [])}
        row = {
            "throughput": med([r.load.throughput for r in rs]),
            "p50_us": med([r.load.p50_us for r in rs]),
            "p99_us": med([r.load.p99_us for r in rs]),
            "ping_p50_us": med([r.ping.p50_us for r in rs]),
            "ping_p99_us": med([r.ping.p99_us for r in rs]),
            "completed": med([r.load.completed for r in rs]),
            "client_busy": med([r.load.client_busy for r in rs]),
            "ratio_vs_direct": med([r.load.throughput / direct[r.round].load.throughput
                                    for r in rs if r.round in direct]),
            "added_ping_p50_us": med([r.ping.p50_us - direct[r.round].ping.p50_us
                                      for r in rs if r.round in direct]),
            "added_load_p50_us": med([r.load.p50_us - direct[r.round].load.p50_us
                                      for r in rs if r.round in direct]),
            "ratio_vs_fast_direct": med([r.load.throughput / fast_direct[r.round].load.throughput
                                         for r in rs if r.round in fast_direct]),
            "rounds": [{"round": r.round, "throughput": r.load.throughput,
                        "p50_us": r.load.p50_us, "ping_p50_us": r.ping.p50_us,
                        "client_busy": r.load.client_busy, **r.extra} for r in rs],
        }
        out[f"{kind}/{mode}/{config}"] = row
    return out


def checks(summary: dict[str, Any]) -> list[dict[str, Any]]:
    res = []

    def check(name: str, value: float, op: str, limit: float, unit: str) -> None:
        ok = value >= limit if op == ">=" else value <= limit
        res.append({"target": name, "value": value, "op": op, "limit": limit, "unit": unit,
                    "pass": bool(ok)})

    for kind in ("fast", "stdlib", "sdk"):
        for mode in MODES:
            rec = summary.get(f"{kind}/{mode}/record")
            rep = summary.get(f"{kind}/{mode}/replay")
            if rec:
                check(f"{kind} {mode}: record req/s vs direct", rec["ratio_vs_direct"], ">=",
                      TARGETS["record_ratio"], "x")
                check(f"{kind} {mode}: record added p50 (ping)", rec["added_ping_p50_us"], "<=",
                      TARGETS["record_added_p50"], "µs")
            if rep:
                check(f"{kind} {mode}: replay req/s vs direct", rep["ratio_vs_direct"], ">=",
                      TARGETS["replay_ratio"], "x")
    return res


def print_report(summary: dict[str, Any], cs: list[dict[str, Any]], args: argparse.Namespace,
                 wall: float, foreign: list[float]) -> None:
    print(f"\nmcprec HTTP benchmark: {args.rounds} rounds, {os.cpu_count()} CPUs, Python "
          f"{sys.version.split()[0]}, {wall:.1f} s; load = {args.connections} connections x "
          f"{args.requests} requests (sdk: {args.sdk_requests}), ping = 1 x {args.ping}")
    print("medians over rounds; 'x direct' and '+p50' are medians of per-round comparisons with "
          "the direct run\nof the same upstream and mode in the same round\n")
    head = (f"{'upstream':<8} {'mode':<5} {'config':<7} {'req/s':>8} {'x direct':>8} "
            f"{'p50 µs':>8} {'p99 µs':>8} {'ping p50':>9} {'+ping p50':>9} {'client':>6}")
    print(head)
    print("-" * len(head))
    for key, r in summary.items():
        kind, mode, config = key.split("/")
        added = "" if config == "direct" else f"{r['added_ping_p50_us']:+9.0f}"
        print(f"{kind:<8} {mode:<5} {config:<7} {r['throughput']:8.0f} "
              f"{r['ratio_vs_direct']:8.2f} {r['p50_us']:8.0f} {r['p99_us']:8.0f} "
              f"{r['ping_p50_us']:9.0f} {added:>9} {r['client_busy']:6.0%}")
    print("""
req/s: requests (round trips) per second over all connections; p50/p99: latency under that load;
ping p50: unloaded latency (one connection, one request at a time); +ping p50: minus direct's;
client: CPU of the client processes / wall time (summed; 100% = one CPU)""")
    fmt = " ".join(f"{x:.2f}" for x in foreign)
    print(f"\nother processes' CPU load per round (CPUs; 0.00 = quiet machine): {fmt}")
    if foreign and max(foreign) > 0.1:
        print(f"WARNING: unrelated processes were busy during the run; on a {os.cpu_count()}-CPU "
              "machine that disturbs these numbers: rerun on a quiet machine")
    print("\ntargets:")
    for c in cs:
        print(f"  {'PASS' if c['pass'] else 'FAIL'}  {c['target']:<38} {c['value']:9.2f} "
              f"{c['unit']:<2} (target {c['op']} {c['limit']:g} {c['unit']})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 5; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and requests")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--no-sdk", action="store_true", help="skip the SDK server as upstream")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--client-procs", type=int, default=2,
                    help="client processes sharing the connections (default 2)")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per connection, fast upstream (default 3000; 1000 quick)")
    ap.add_argument("--sdk-requests", type=int, default=None,
                    help="requests per connection, SDK upstream (default 400; 150 quick)")
    ap.add_argument("--ping", type=int, default=None, help="ping requests (default 1000)")
    ap.add_argument("--max-seconds", type=float, default=4.0,
                    help="stop sending new requests of a load after this long")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    args.rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    args.requests = args.requests or (1000 if args.quick else 3000)
    args.sdk_requests = args.sdk_requests or (150 if args.quick else 400)
    args.ping = args.ping or (400 if args.quick else 1000)
    configs = tuple(c for c in CONFIGS if c == "direct" or c in args.configs.split(","))
    modes = tuple(m for m in MODES if m in args.modes.split(","))
    kinds = ("fast", "stdlib") if args.no_sdk else ("fast", "stdlib", "sdk")
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-bench-http-"))
    results: list[Result] = []
    foreign: list[float] = []  # CPUs' worth of other processes' busy time, per round
    t_start = time.monotonic()
    try:
        replay_cassettes = {(k, m): record_for_replay(k, m, tmp)
                            for k in kinds for m in modes if "replay" in configs}
        for rnd in range(args.rounds):
            busy0, ours0, t0 = machine_busy(), ours(), time.monotonic()
            k = rnd % len(configs)
            order = configs[k:] + configs[:k]
            for kind in kinds:
                for mode in modes:
                    for config in order:
                        r = run_one(kind, mode, config, rnd, tmp, args, replay_cassettes)
                        results.append(r)
                        if not args.json:
                            print(f"round {rnd + 1}/{args.rounds} {kind:<4} {mode:<4} "
                                  f"{config:<6} {r.load.throughput:8.0f} req/s  p50 "
                                  f"{r.load.p50_us:7.0f} µs  ping p50 {r.ping.p50_us:6.0f} µs  "
                                  f"client {r.load.client_busy:4.0%}", file=sys.stderr,
                                  flush=True)
            foreign.append(max(0.0, (machine_busy() - busy0) - (ours() - ours0))
                           / (time.monotonic() - t0))
    except BenchError as e:
        print(f"bench_http: CORRECTNESS FAILURE: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - t_start
    summary = summarize(results)
    cs = checks(summary)
    if args.json:
        print(orjson.dumps({"args": vars(args), "wall_s": wall, "cpus": os.cpu_count(),
                            "foreign_cpu_per_round": foreign,
                            "summary": summary, "targets": cs},
                           option=orjson.OPT_INDENT_2).decode())
    else:
        print_report(summary, cs, args, wall, foreign)
    return 0


if __name__ == "__main__":
    sys.exit(main())
