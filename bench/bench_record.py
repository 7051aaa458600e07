"""Benchmark: what does putting ``mcprec record`` in front of a stdio MCP server cost?

    .venv/bin/python bench/bench_record.py [--rounds N] [--quick] [--json]
                                           [--configs A,B] [--max-seconds S]

Five configurations, each in a fresh process per measurement, alternated within every round
(the order rotates from round to round so that drift and warm-up hit all of them alike):

  direct           client <-> bench/echo_server.py
  bare             client <-> bench/bare_relay.py (asyncio pipe relay, no recording) <-> echo
  poll             client <-> bench/poll_relay.py (the same on a blocking poll loop) <-> echo
  bare-uv          client <-> bench/bare_relay.py --uvloop (as the tap relays: uvloop, plain pipes) <-> echo
  mcprec           client <-> python -m mcprec record -c <tmp cassette> <-> echo server
  mcprec-noredact  the same with redaction off (mcprec.toml: [redact] defaults/env = false)
  mcprec-pii       the default rules plus the pii pack (mcprec.toml: [redact] packs = ["pii"]);
                   not run unless asked for (--configs mcprec,mcprec-pii)

Loads:

  small    ~200 B requests and responses, 32 in flight (pipelined): throughput and latency;
           20,000 of them: the exit right after is the "exit after a 20k burst"
  large    100 KB requests and responses, 4 in flight: throughput and latency
  prose    the same with 100 KB of English prose and Markdown (the repository's docs/), where
           redaction has more to look at than in the "large" load's letters and digits
  ping     ~200 B, 1 in flight (unloaded ping-pong): p50 latency, "added p50" vs direct
  30mb     one tools/call whose result is a 30 MB base64 image: call latency, exit time
  100mb    the same with 100 MB: call latency, exit time, peak RSS of the tap and the recorder

The big results come from this script itself run as a server (``--blob-server``): an echo
server that answers a call for ``blob`` with ``size`` bytes of base64.

Each load runs in a fresh process tree: 50 ping-pongs warm it up, then the client waits until
its processes have used no CPU for 50 ms (``settle``: mcprec's recorder process may still be
starting), then times the load. The wait changes where the scheduler puts the processes: after
it, a direct client and server share a CPU (the ping load's direct p50 ~9 µs, against ~52 µs
when the load began at once, on two CPUs), which 50 more ping-pongs did not undo.

A load stops sending after --max-seconds (then finishes what is in flight), so that a
pathologically slow configuration cannot stall the run; the table says how many completed.

After each load the client closes the relay's stdin and times how long the process takes to
exit; for mcprec the cassette is then opened with sqlite3 and must hold every message of both
directions, byte for byte, in a session closed as complete. Every response is checked byte for
byte against what the echo server must have sent, so a relay that drops, reorders or alters a
byte fails the benchmark instead of producing a number.

The client is a single-threaded non-blocking poll loop on the child's pipes (raw os.read /
os.write of up to 64 KiB, requests prebuilt and coalesced into one write when the window
allows): ~1 µs per message (~1M req/s against `cat`), far below what any configuration costs.
The table shows its CPU share; other processes' CPU load is measured per round and reported.

Stdlib + orjson only. This is a benchmark, not a test: it prints numbers and PASS/FAIL against
targets, and exits 1 only when a correctness check fails (not when a target is missed).
"""

from __future__ import annotations

import argparse
import base64
import glob
import os
import resource
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable
ECHO = [PY, str(BENCH / "echo_server.py")]
sys.path.insert(0, str(BENCH))
from echo_server import response as echo_response  # noqa: E402

RECORDER_MODULES = (b"mcprec.record.child", b"mcprec.cassette.recorder_process",
                    b"mcprec.cassette.process")
"""The recorder process's module, by its names old and new (--baseline trees)."""

CONFIGS = ("direct", "bare", "bare-uv", "poll", "mcprec", "mcprec-noredact", "mcprec-pii")
DEFAULT_CONFIGS = ("direct", "bare", "poll", "mcprec", "mcprec-noredact")
WARMUP = 50  # ping-pongs before each timed load (process start-up, imports, caches)

TARGETS = {  # issue 18
    "small_ratio": 0.50,      # mcprec small-message throughput >= 0.5x direct
    "added_p50_us": 40.0,     # mcprec unloaded p50 - direct p50 <= 40 µs
    "large_ratio": 0.40,      # mcprec 100 KB throughput >= 0.4x direct
    "large_p99_ms": 10.0,     # mcprec 100 KB p99 <= 10 ms
    "exit_ms": 100.0,         # stdin closed -> mcprec exited, after the idle ping-pong
    "burst_exit_ms": 200.0,   # ... right after the 20k small-request burst
    "big_latency_ratio": 1.5,  # a 30 MB result's call latency <= 1.5x direct
    "big_exit_ms": 500.0,     # exit after a 30 MB result <= 0.5 s
    "huge_exit_ms": 2000.0,   # exit after a 100 MB result: within the SDK client's 2 s grace
    "huge_rss_ratio": 1.5,    # the recorder's peak RSS <= 1.5x the 100 MB message
}


@dataclass(frozen=True)
class Load:
    name: str
    requests: int
    window: int
    payload: int  # bytes of text in each request's params
    result: int = 0  # > 0: one call for a result of this many bytes of base64 (blob server)
    prose: bool = False  # the text is the repository's docs, not letters and digits


def loads(quick: bool) -> list[Load]:
    big = [Load("30mb", 1, 1, 0, 30_000_000), Load("100mb", 1, 1, 0, 100_000_000)]
    if quick:
        return [Load("small", 5000, 32, 120), Load("large", 120, 4, 100_000),
                Load("prose", 120, 4, 100_000, prose=True), Load("ping", 1000, 1, 120), *big]
    return [Load("small", 20000, 32, 120), Load("large", 400, 4, 100_000),
            Load("prose", 400, 4, 100_000, prose=True), Load("ping", 3000, 1, 120), *big]


# --- the blob server: big results ------------------------------------------------------------

_B64_BLOCK = base64.b64encode(bytes(range(256)) * 12)  # 4 KiB of base64


def blob_data(size: int) -> bytes:
    """``size`` bytes of base64 (an image, as a server would send it)."""
    return (_B64_BLOCK * (size // len(_B64_BLOCK) + 1))[:size]


def blob_response(rid: int, size: int) -> bytes:
    """The blob server's answer to a call for ``size`` bytes, without its newline."""
    return b"".join((b'{"jsonrpc":"2.0","id":', str(rid).encode(),
                     b',"result":{"content":[{"type":"image","data":"', blob_data(size),
                     b'","mimeType":"image/png"}]}}'))


def blob_server() -> None:
    """Answers ``tools/call`` of ``blob`` with ``arguments.size`` bytes of base64, echoes the
    rest (as echo_server.py); one write per answer."""
    rfd, wfd = 0, 1
    partial = b""
    while chunk := os.read(rfd, 1 << 16):
        chunk = partial + chunk
        *lines, partial = chunk.split(b"\n")
        for line in lines:
            msg = orjson.loads(line)
            if msg.get("method") == "tools/call" and msg["params"].get("name") == "blob":
                out = blob_response(msg["id"], msg["params"]["arguments"]["size"]) + b"\n"
            else:
                out = echo_response(line) or b""
            view = memoryview(out)
            while view:
                view = view[os.write(wfd, view):]


class BenchError(Exception):
    """A correctness failure: the numbers of this run mean nothing."""


# --- requests ---------------------------------------------------------------------------------


def make_big(rid: int, size: int) -> tuple[list[bytes], list[bytes]]:
    """One call for a ``size``-byte result, and the exact answer."""
    line = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": {"name": "blob", "arguments": {"size": size}}}) + b"\n"
    return [line], [blob_response(rid, size)]


def make_requests(first_id: int, count: int, payload: int,
                  prose: bool = False) -> tuple[list[bytes], list[bytes]]:
    """``count`` request lines (with newline) and the exact response lines (without newline)."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if prose:
        docs = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
        text = (docs * (payload // len(docs) + 1))[:payload]
    else:
        text = (alphabet * (payload // len(alphabet) + 1))[:payload].decode()
    reqs, exp = [], []
    for i in range(first_id, first_id + count):
        line = orjson.dumps({
            "jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text, "n": i}},
        }) + b"\n"
        reqs.append(line)
        resp = echo_response(line[:-1])
        assert resp is not None
        exp.append(resp[:-1])
    return reqs, exp


# --- the client -------------------------------------------------------------------------------


def drive(wfd: int, rfd: int, reqs: list[bytes], expected: list[bytes], window: int,
          max_seconds: float | None = None,
          timeout: float = 120.0) -> tuple[list[int], list[int]]:
    """Send ``reqs`` keeping ``window`` outstanding; check each response; return timestamps.

    With ``max_seconds``, no new request is sent after that long: the outstanding ones are
    awaited and the timestamps of the completed prefix are returned.
    """
    n = len(reqs)
    stop_sending = None if max_seconds is None else time.monotonic() + max_seconds
    send_ts = [0] * n
    recv_ts = [0] * n
    poller = select.poll()
    poller.register(rfd, select.POLLIN)
    writing = False
    sent = recvd = 0
    out: memoryview | None = None
    partial: list[bytes] = []
    pc = time.perf_counter_ns
    read, write = os.read, os.write
    deadline = time.monotonic() + timeout
    while recvd < n:
        if out is None and sent < n:
            limit = min(n, recvd + window)
            if limit > sent and stop_sending is not None and time.monotonic() > stop_sending:
                n = sent  # time is up: finish what is in flight
                if recvd >= n:
                    break
            elif limit > sent:
                data = reqs[sent] if limit - sent == 1 else b"".join(reqs[sent:limit])
                t = pc()
                for i in range(sent, limit):
                    send_ts[i] = t
                sent = limit
                out = memoryview(data)
        if out is not None:
            try:
                k = write(wfd, out)
            except BlockingIOError:
                k = 0
            out = out[k:] if k < len(out) else None
            if (out is not None) != writing:
                writing = out is not None
                if writing:
                    poller.register(wfd, select.POLLOUT)
                else:
                    poller.unregister(wfd)
        try:
            chunk = read(rfd, 1 << 16)  # a pipe gives at most 64 KiB; more would mmap each time
        except BlockingIOError:
            if not poller.poll(1000) and time.monotonic() > deadline:
                raise BenchError(f"timed out: {recvd}/{n} responses after {timeout:.0f} s")
            continue
        if not chunk:
            raise BenchError(f"EOF from the relay after {recvd}/{n} responses")
        t = pc()
        nl = chunk.find(b"\n")
        if nl < 0:
            partial.append(chunk)
            continue
        if partial:
            partial.append(chunk[:nl])
            line = b"".join(partial)
            partial.clear()
        else:
            line = chunk[:nl]
        while True:
            if recvd >= n:
                raise BenchError("more responses than requests")
            if line != expected[recvd]:
                raise BenchError(
                    f"response {recvd} differs from what the server sent: "
                    f"{line[:80]!r}... != {expected[recvd][:80]!r}..."
                )
            recv_ts[recvd] = t
            recvd += 1
            start = nl + 1
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            line = chunk[start:nl]
        if start < len(chunk):
            partial.append(chunk[start:])
    if partial:
        raise BenchError(f"trailing bytes after the last response: {b''.join(partial)[:80]!r}")
    return send_ts[:n], recv_ts[:n]


# --- CPU accounting (Linux /proc; all of it outside the timed loops) ------------------------------

HZ = os.sysconf("SC_CLK_TCK")


def _stat(path: str) -> list[str] | None:
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()  # fields after the command name
    except (OSError, IndexError):
        return None


def _cpu(fields: list[str]) -> float:
    """CPU seconds of a process from its ``_stat`` fields ([11], [12]: utime, stime in ticks)."""
    return (int(fields[11]) + int(fields[12])) / HZ


SETTLE_QUIET = 0.05
SETTLE_MAX = 3.0


def settle(pid: int) -> float:
    """Wait until process ``pid`` and its children have used no CPU for ``SETTLE_QUIET`` s (at
    most ``SETTLE_MAX``): the seconds waited. After the warm-up's ping-pongs mcprec's recorder
    process may still be starting (Python's start, its imports, the cassette opened: ~60 ms of
    CPU here); a timed load begun then measured that start-up as much as the load, on the small
    load (20,000 requests, ~0.1 s) most of all. Every configuration waits alike."""
    t0 = time.monotonic()
    last = tree_cpu(pid)
    while time.monotonic() - t0 < SETTLE_MAX:
        time.sleep(SETTLE_QUIET)
        now = tree_cpu(pid)
        if now == last:
            break
        last = now
    return time.monotonic() - t0


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` (all threads) and its direct children."""
    total = 0.0
    for path in glob.glob("/proc/[0-9]*/stat"):
        fields = _stat(path)
        if fields and (path == f"/proc/{pid}/stat" or fields[1] == str(pid)):  # [1]: parent
            total += _cpu(fields)
    return total


def machine_busy() -> float:
    """CPU seconds all CPUs have spent busy since boot (for measuring other processes' load)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / HZ  # all but idle and iowait


def own_cpu(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def ours() -> float:
    """Exact CPU seconds of this process and of every process it has spawned and reaped."""
    return own_cpu() + own_cpu(resource.RUSAGE_CHILDREN)


# --- one measurement --------------------------------------------------------------------------


@dataclass
class Result:
    config: str
    load: str
    round: int
    throughput: float           # requests (= round trips) per second
    mb_s: float                 # payload MB/s, both directions
    p50_us: float
    p99_us: float
    exit_ms: float
    cpu_us_per_req: float       # CPU of relay + server during the timed load, per request
    client_busy: float          # the client's CPU / wall time during the timed load
    completed: int              # requests completed (fewer than asked when the time cap hit)
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(sorted_values: list[int], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[i])


NO_REDACTION = "[redact]\ndefaults = false\nenv = false\n"
PII_PACK = '[redact]\npacks = ["pii"]\n'


def command(config: str, cassette: Path, tmp: Path,
            server: list[str] = ECHO) -> tuple[list[str], Path]:
    """The command line of a configuration, and the directory to run it in.

    mcprec reads redaction rules from mcprec.toml / pyproject.toml in its working directory, so
    each mcprec configuration runs in a directory of its own: ``mcprec`` in an empty one (the
    default rules, as a user gets them), ``mcprec-noredact`` in one whose mcprec.toml turns
    redaction off (to tell the cost of recording from the cost of redacting).
    """
    if config == "direct":
        return server, ROOT
    if config == "bare":
        return [PY, str(BENCH / "bare_relay.py"), "--", *server], ROOT
    if config == "bare-uv":
        return [PY, str(BENCH / "bare_relay.py"), "--uvloop", "--", *server], ROOT
    if config == "poll":
        return [PY, str(BENCH / "poll_relay.py"), "--", *server], ROOT
    cwd = tmp / config  # mcprec-before: as mcprec, from the --baseline source tree
    if not cwd.exists():
        cwd.mkdir()
        if config == "mcprec-noredact":
            (cwd / "mcprec.toml").write_text(NO_REDACTION)
        elif config == "mcprec-pii":
            (cwd / "mcprec.toml").write_text(PII_PACK)
    return [PY, "-m", "mcprec", "record", "-c", str(cassette), "-s", "bench", "--", *server], cwd


BLOB_SERVER = [PY, str(Path(__file__).resolve()), "--blob-server"]


def _children(pid: int) -> list[int]:
    out = []
    for path in glob.glob("/proc/[0-9]*/stat"):
        fields = _stat(path)
        if fields and fields[1] == str(pid):
            out.append(int(path.split("/")[2]))
    return out


def _hwm_kb(pid: int) -> int | None:
    """Peak resident memory of a process so far (VmHWM), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakRss:
    """Samples the peak RSS of a relay and of its recorder process (found among its children
    by its command line) until both are gone; the recorder outlives mcprec."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak: dict[str, int] = {}
        self.recorder: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.recorder is None:
                for child in _children(self.pid):
                    try:
                        with open(f"/proc/{child}/cmdline", "rb") as f:
                            cmd = f.read()
                    except OSError:
                        continue
                    # (the older names: --baseline trees from before the renames)
                    if any(name in cmd for name in RECORDER_MODULES):
                        self.recorder = child
            for name, pid in (("relay", self.pid), ("recorder", self.recorder)):
                kb = _hwm_kb(pid) if pid is not None else None
                if kb is not None:
                    self.peak[name] = max(kb, self.peak.get(name, 0))
            self._stop.wait(0.01)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {k: v / 1024 for k, v in self.peak.items()}  # MiB


def wait_recorded(path: Path, timeout: float = 120.0) -> float:
    """Seconds until the cassette's session is complete (the recorder outlives mcprec); then
    waits, uncounted, for the recorder process to exit: its last checkpoint would otherwise
    run during the next configuration's load (on 2 CPUs, ~0.5 CPU of a 100 KB round's)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT status, recorder_pid FROM sessions").fetchone()
        finally:
            conn.close()
        if row is not None and row[0] != "recording":
            took = time.monotonic() - t0
            cpu = 0.0
            while row[1] and time.monotonic() - t0 < timeout:
                f = _stat(f"/proc/{row[1]}/stat")
                if f is None or f[0] == "Z":
                    break
                cpu = _cpu(f)
                time.sleep(0.005)
            RECORDERS_CPU.append(cpu)  # ours, though init reaps it: not "other processes"
            return took
        time.sleep(0.005)
    raise BenchError(f"{path.name}: the session is still being recorded after {timeout:.0f} s")


def run_one(config: str, load: Load, rnd: int, tmp: Path,
            data: dict[str, tuple[list[bytes], list[bytes]]], max_seconds: float) -> Result:
    cassette = tmp / f"{config}-{load.name}-{rnd}.db"
    warm_reqs, warm_exp = data["warmup"]
    reqs, exp = data[load.name]
    errpath = tmp / "stderr.txt"
    argv, cwd = command(config, cassette, tmp, BLOB_SERVER if load.result else ECHO)
    with open(errpath, "wb") as err:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=err, bufsize=0, cwd=cwd, close_fds=True,
            env={**os.environ, "PYTHONPATH": BASELINE[0]} if config == "mcprec-before" else None,
        )
    rss = PeakRss(proc.pid) if load.result else None
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    os.set_blocking(wfd, False)
    os.set_blocking(rfd, False)
    try:
        drive(wfd, rfd, warm_reqs, warm_exp, 1)
        settled = settle(proc.pid)
        cpu0, own0, wall0 = tree_cpu(proc.pid), own_cpu(), time.monotonic()
        send_ts, recv_ts = drive(wfd, rfd, reqs, exp, load.window, max_seconds)
        wall1, own1, cpu1 = time.monotonic(), own_cpu(), tree_cpu(proc.pid)
        # exit time: close its stdin, wait for EOF on its stdout and for the process to exit
        t0 = time.perf_counter_ns()
        proc.stdin.close()
        os.set_blocking(rfd, True)
        tail = b""
        while chunk := os.read(rfd, 1 << 16):
            tail += chunk
        _, status = os.waitpid(proc.pid, 0)
        t1 = time.perf_counter_ns()
        proc.returncode = os.waitstatus_to_exitcode(status)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    extra: dict[str, Any] = {"settle_ms": settled * 1e3}
    if config.startswith("mcprec"):  # the recorder outlives mcprec: until it is done
        extra["recorded_ms"] = (t1 - t0) / 1e6 + wait_recorded(cassette) * 1e3
    if rss is not None:
        extra["rss_mib"] = rss.stop()
    stderr = errpath.read_bytes().decode(errors="replace").strip()
    if tail:
        raise BenchError(f"{config}: unexpected bytes after the last response: {tail[:80]!r}")
    if proc.returncode != 0:
        raise BenchError(f"{config}: exited with {proc.returncode}; stderr: {stderr[-500:]}")
    if stderr:
        extra["stderr"] = stderr[-500:]
    n = len(send_ts)  # fewer than len(reqs) when the time cap stopped the load early
    if n < len(reqs):
        extra["capped"] = True
    reqs, exp = reqs[:n], exp[:n]
    if config.startswith("mcprec"):
        extra["cassette"] = verify_cassette(cassette, warm_reqs + reqs, warm_exp + exp)
    for p in tmp.glob(cassette.name + "*"):
        p.unlink()

    lat = sorted(r - s for s, r in zip(send_ts, recv_ts))
    elapsed = (recv_ts[-1] - send_ts[0]) / 1e9
    payload_bytes = sum(len(r) for r in reqs) + sum(len(e) + 1 for e in exp)
    wall = wall1 - wall0
    return Result(
        config=config, load=load.name, round=rnd,
        throughput=n / elapsed, mb_s=payload_bytes / elapsed / 1e6,
        p50_us=percentile(lat, 0.50) / 1e3, p99_us=percentile(lat, 0.99) / 1e3,
        exit_ms=(t1 - t0) / 1e6, cpu_us_per_req=(cpu1 - cpu0) / n * 1e6,
        client_busy=(own1 - own0) / wall, completed=n, extra=extra,
    )


def verify_cassette(path: Path, reqs: list[bytes], exp: list[bytes]) -> dict[str, Any]:
    """The cassette must hold every request and response, complete, in order, byte-exact sizes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sessions = conn.execute("SELECT id, status, ended_at FROM sessions").fetchall()
        if len(sessions) != 1 or sessions[0][1] != "complete" or sessions[0][2] is None:
            raise BenchError(f"{path.name}: session not closed as complete: {sessions}")
        rows = dict(((d, (c, s)) for d, c, s in conn.execute(
            "SELECT direction, count(*), sum(size) FROM messages GROUP BY direction")))
        want = {
            "client_to_server": (len(reqs), sum(len(r) - 1 for r in reqs)),
            "server_to_client": (len(exp), sum(len(e) for e in exp)),
        }
        if rows != want:
            raise BenchError(f"{path.name}: cassette holds {rows}, expected {want}")
        total = sum(c for c, _ in want.values())
        seqs = conn.execute("SELECT count(*), min(seq), max(seq) FROM messages").fetchone()
        if seqs != (total, 0, total - 1):
            raise BenchError(f"{path.name}: seq numbers {seqs}, expected (n, 0, n-1), n={total}")
        unpaired = conn.execute(
            "SELECT count(*) FROM messages WHERE kind = 'response' AND reply_to IS NULL"
        ).fetchone()[0]
        if unpaired:
            raise BenchError(f"{path.name}: {unpaired} responses not paired with their request")
        # content: every message of each direction, byte for byte, in order
        for direction, lines in (("client_to_server", [r[:-1] for r in reqs]),
                                 ("server_to_client", exp)):
            got = [bytes(r[0]) for r in conn.execute(
                "SELECT raw FROM messages WHERE direction = ? ORDER BY seq", (direction,))]
            if got != lines:
                bad = next(i for i, (a, b) in enumerate(zip(got, lines)) if a != b)
                raise BenchError(f"{path.name}: {direction} message {bad} differs from the wire")
        return {"messages": total}
    finally:
        conn.close()


# --- the whole run ----------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(results: list[Result], load_list: list[Load],
              configs: tuple[str, ...]) -> dict[str, Any]:
    by: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        by.setdefault((r.load, r.config), []).append(r)
    out: dict[str, Any] = {}
    for load in load_list:
        direct = {r.round: r for r in by.get((load.name, "direct"), [])}
        bare = {r.round: r for r in by.get((load.name, "bare"), [])}
        rows = {}
        for config in configs:
            rs = by.get((load.name, config), [])
            if not rs:
                continue
            ratios = [r.throughput / direct[r.round].throughput for r in rs if r.round in direct]
            added = [r.p50_us - direct[r.round].p50_us for r in rs if r.round in direct]
            # a single call: its latency against direct's (x direct is then latency, not rate)
            lat_ratios = [r.p50_us / direct[r.round].p50_us for r in rs if r.round in direct]
            vs_bare = [(r.throughput / bare[r.round].throughput) if not load.result else
                       (r.p50_us / bare[r.round].p50_us) for r in rs if r.round in bare]
            rss = [r.extra["rss_mib"] for r in rs if "rss_mib" in r.extra]
            recorded = [r.extra["recorded_ms"] for r in rs if "recorded_ms" in r.extra]
            rows[config] = {
                "completed": med([r.completed for r in rs]),
                "capped": any(r.completed < load.requests for r in rs),
                "throughput": med([r.throughput for r in rs]),
                "mb_s": med([r.mb_s for r in rs]),
                "ratio_vs_direct": med(ratios),
                "p50_us": med([r.p50_us for r in rs]),
                "p99_us": med([r.p99_us for r in rs]),
                "added_p50_us": med(added),
                "exit_ms": med([r.exit_ms for r in rs]),
                "exit_ms_max": max(r.exit_ms for r in rs),
                "cpu_us_per_req": med([r.cpu_us_per_req for r in rs]),
                "client_busy": med([r.client_busy for r in rs]),
                "latency_vs_direct": med(lat_ratios),
                "vs_bare": med(vs_bare),
                "relay_rss_mib": med([x.get("relay", 0.0) for x in rss]) if rss else None,
                "recorder_rss_mib": med([x.get("recorder", 0.0) for x in rss]) if rss else None,
                "recorded_ms": med(recorded) if recorded else None,
                "settle_ms": med([r.extra["settle_ms"] for r in rs if "settle_ms" in r.extra]),
                "rounds": [
                    {"round": r.round, "completed": r.completed, "throughput": r.throughput,
                     "p50_us": r.p50_us, "p99_us": r.p99_us, "exit_ms": r.exit_ms,
                     "cpu_us_per_req": r.cpu_us_per_req, "client_busy": r.client_busy, **r.extra}
                    for r in rs
                ],
            }
        out[load.name] = {"requests": load.requests, "window": load.window,
                          "payload": load.payload, "result": load.result, "configs": rows}
    return out


def targets(summary: dict[str, Any], config: str) -> list[dict[str, Any]]:
    m = {name: s["configs"][config] for name, s in summary.items()}
    checks = []  # (load, name, value, op, target, unit), for the loads that were run

    def check(load: str, name: str, value: Any, op: str, target: float, unit: str) -> None:
        if load in m:
            checks.append((name, value(m[load]), op, target, unit))

    check("small", "small msgs throughput vs direct", lambda r: r["ratio_vs_direct"], ">=",
          TARGETS["small_ratio"], "x")
    check("ping", "added p50 latency (ping) vs direct", lambda r: r["added_p50_us"], "<=",
          TARGETS["added_p50_us"], "µs")
    check("large", "100 KB msgs throughput vs direct", lambda r: r["ratio_vs_direct"], ">=",
          TARGETS["large_ratio"], "x")
    check("large", "100 KB msgs p99 latency", lambda r: r["p99_us"] / 1e3, "<=",
          TARGETS["large_p99_ms"], "ms")
    check("ping", "exit time after ping-pong (idle)", lambda r: r["exit_ms"], "<",
          TARGETS["exit_ms"], "ms")
    check("small", "exit time right after the small burst", lambda r: r["exit_ms"], "<=",
          TARGETS["burst_exit_ms"], "ms")
    check("30mb", "30 MB result: call latency vs direct", lambda r: r["latency_vs_direct"],
          "<=", TARGETS["big_latency_ratio"], "x")
    check("30mb", "exit time after a 30 MB result", lambda r: r["exit_ms"], "<=",
          TARGETS["big_exit_ms"], "ms")
    check("100mb", "exit time after a 100 MB result (max)", lambda r: r["exit_ms_max"], "<",
          TARGETS["huge_exit_ms"], "ms")
    check("100mb", "recorder peak RSS / 100 MB message",
          lambda r: (r["recorder_rss_mib"] or 0) * 2**20 / summary["100mb"]["result"], "<=",
          TARGETS["huge_rss_ratio"], "x")
    res = []
    for name, value, op, target, unit in checks:
        ok = {">=": value >= target, "<=": value <= target, "<": value < target}[op]
        res.append({"target": name, "value": value, "op": op, "limit": target, "unit": unit,
                    "pass": bool(ok)})
    return res


def print_report(summary: dict[str, Any], checks: dict[str, list[dict[str, Any]]],
                 rounds: int, wall: float, foreign: list[float], max_seconds: float) -> None:
    print(f"\nmcprec record benchmark: {rounds} rounds, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, {wall:.1f} s")
    print("medians over rounds; x direct and +p50 are medians of per-round comparisons with "
          "the direct run\nof the same round\n")
    head = (f"{'load':<6} {'config':<16} {'done':>6} {'req/s':>8} {'MB/s':>7} {'x direct':>8} "
            f"{'p50 µs':>8} {'p99 µs':>9} {'+p50 µs':>8} {'exit ms':>8} {'cpu µs/req':>10} "
            f"{'client':>6}")
    print(head)
    print("-" * len(head))
    for name, s in summary.items():
        if s["result"]:
            continue
        for config, r in s["configs"].items():
            added = "" if config == "direct" else f"{r['added_p50_us']:+8.1f}"
            done = f"{r['completed']:.0f}{'*' if r['capped'] else ''}"
            print(f"{name:<6} {config:<16} {done:>6} {r['throughput']:8.0f} {r['mb_s']:7.1f} "
                  f"{r['ratio_vs_direct']:8.2f} {r['p50_us']:8.1f} {r['p99_us']:9.1f} "
                  f"{added:>8} {r['exit_ms']:8.1f} {r['cpu_us_per_req']:10.1f} "
                  f"{r['client_busy']:6.0%}")
        print(f"{'':<6} ({s['requests']} requests asked, {s['window']} in flight, "
              f"{s['payload']} B payload; x bare: "
              + ", ".join(f"{c} {r['vs_bare']:.2f}" for c, r in s["configs"].items()
                          if c.startswith("mcprec")) + ")")
    head = (f"\n{'load':<6} {'config':<16} {'call ms':>8} {'x direct':>8} {'x bare':>7} "
            f"{'exit ms':>8} {'exit max':>8} {'recorded ms':>11} {'relay MiB':>9} "
            f"{'recorder MiB':>12}")
    print(head)
    print("-" * len(head))
    for name, s in summary.items():
        if not s["result"]:
            continue
        for config, r in s["configs"].items():
            rec = r["recorded_ms"]
            print(f"{name:<6} {config:<16} {r['p50_us'] / 1e3:8.1f} {r['latency_vs_direct']:8.2f} "
                  f"{r['vs_bare']:7.2f} {r['exit_ms']:8.1f} {r['exit_ms_max']:8.1f} "
                  f"{'' if rec is None else f'{rec:.0f}':>11} {r['relay_rss_mib'] or 0:9.0f} "
                  f"{r['recorder_rss_mib'] or 0:12.0f}")
        print(f"{'':<6} (one call for a {s['result'] / 1e6:g} MB base64 result)")
    print(f"""
done: requests completed (* = the {max_seconds:g} s cap stopped the load early in some round);
req/s: round trips (request + response) per second; MB/s: both directions; p50/p99: round-trip
latency of each request (with N in flight it includes queueing behind the others);
exit: stdin closed -> process exited (mcprec: the recorder has the rest, and the session is
marked as ended: readers wait for it); recorded: stdin closed -> the session is complete;
x bare: throughput (big results: latency) against the bare relay's in the same round;
relay / recorder MiB: peak RSS (VmHWM) of the relay process and of mcprec's recorder process;
cpu: CPU of the relay and server processes during the load, per request;
client: the benchmark client's CPU / wall time (well under 100% = it is not the bottleneck)""")
    settles = {}
    for s in summary.values():
        for config, r in s["configs"].items():
            settles.setdefault(config, []).append(r["settle_ms"])
    print("\nstart-up: each timed load begins once the configuration's processes have used no "
          f"CPU for {SETTLE_QUIET * 1e3:g} ms after\nthe warm-up; the wait (ms, median of the "
          "loads' medians): " + ", ".join(f"{c} {med(v):.0f}" for c, v in settles.items()))
    fmt = " ".join(f"{x:.2f}" for x in foreign)
    print(f"\nother processes' CPU load per round (CPUs; 0.00 = quiet machine): {fmt}")
    print("load average (1 min) at the start and the end: "
          + " ".join(f"{x:.2f}" for x in LOADAVG))
    if foreign and max(foreign) > 0.1:
        print(f"WARNING: unrelated processes were busy during the run; on a {os.cpu_count()}-CPU "
              "machine that disturbs these numbers: rerun on a quiet machine")
    noisy = sorted({f"{config} ({name})" for name, s in summary.items()
                    for config, r in s["configs"].items()
                    if any("stderr" in x for x in r["rounds"])})
    if noisy:
        print(f"\nNOTE: wrote to stderr (see --json for the text): {', '.join(noisy)}")
    for config, cs in checks.items():
        print(f"\ntargets ({config}):")
        for c in cs:
            print(f"  {'PASS' if c['pass'] else 'FAIL'}  {c['target']:<36} "
                  f"{c['value']:9.2f} {c['unit']:<2} (target {c['op']} {c['limit']:g} {c['unit']})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 5; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and smaller loads")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help=f"comma-separated configurations to run (default: "
                         f"{','.join(DEFAULT_CONFIGS)}; also: {','.join(CONFIGS)}; direct is "
                         "always run)")
    ap.add_argument("--loads", default=None,
                    help="comma-separated loads to run (default: all of small,large,prose,ping,30mb,"
                         "100mb)")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also run `mcprec-before`: mcprec imported from this source tree (e.g. "
                         "`git archive HEAD~3 mcprec | tar -x -C DIR`), for before/after numbers "
                         "in one run")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop sending new requests of a load after this long (default 3; 2 "
                         "with --quick), so that a pathologically slow configuration cannot "
                         "stall the run")
    args = ap.parse_args()
    wanted = {c.strip() for c in args.configs.split(",") if c.strip()}
    unknown = wanted - set(CONFIGS)
    if unknown:
        ap.error(f"unknown configuration(s): {', '.join(sorted(unknown))}")
    configs = tuple(c for c in CONFIGS if c == "direct" or c in wanted)
    if args.baseline:
        BASELINE.append(str(Path(args.baseline).resolve()))
        configs += ("mcprec-before",)
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    max_seconds = args.max_seconds or (2.0 if args.quick else 3.0)
    load_list = loads(args.quick)
    if args.loads:
        names = {x.strip() for x in args.loads.split(",")}
        load_list = [x for x in load_list if x.name in names]
    data = {"warmup": make_requests(10_000_000, WARMUP, 120)}
    for load in load_list:
        data[load.name] = make_big(1, load.result) if load.result else \
            make_requests(1, load.requests, load.payload, load.prose)
    LOADAVG.append(os.getloadavg()[0])
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-bench-"))
    results: list[Result] = []
    foreign: list[float] = []  # CPUs' worth of other processes' busy time, per round
    t_start = time.monotonic()
    try:
        for rnd in range(rounds):
            busy0, ours0, t0 = machine_busy(), ours(), time.monotonic()
            n_rec = len(RECORDERS_CPU)
            k = rnd % len(configs)
            order = configs[k:] + configs[:k]  # rotate, so no configuration always goes first
            for load in load_list:
                for config in order:
                    r = run_one(config, load, rnd, tmp, data, max_seconds)
                    results.append(r)
                    if not args.json:
                        print(f"round {rnd + 1}/{rounds} {load.name:<5} {config:<15} "
                              f"{r.completed:6d} req {r.throughput:9.0f} req/s  "
                              f"p50 {r.p50_us:8.1f} µs  p99 {r.p99_us:9.1f} µs  "
                              f"exit {r.exit_ms:7.1f} ms", file=sys.stderr, flush=True)
            foreign.append(max(0.0, (machine_busy() - busy0) - (ours() - ours0)
                               - sum(RECORDERS_CPU[n_rec:]))
                           / (time.monotonic() - t0))
    except BenchError as e:
        print(f"bench_record: CORRECTNESS FAILURE: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - t_start
    LOADAVG.append(os.getloadavg()[0])
    summary = summarize(results, load_list, configs)
    checks = {c: targets(summary, c) for c in configs if c.startswith("mcprec")}
    if args.json:
        print(orjson.dumps({"rounds": rounds, "quick": args.quick, "wall_s": wall,
                            "cpus": os.cpu_count(), "python": sys.version.split()[0],
                            "max_seconds": max_seconds, "foreign_cpu_per_round": foreign,
                            "loadavg": LOADAVG,
                            "targets": checks, "loads": summary},
                           option=orjson.OPT_INDENT_2).decode())
    else:
        print_report(summary, checks, rounds, wall, foreign, max_seconds)
    return 0


LOADAVG: list[float] = []
RECORDERS_CPU: list[float] = []  # CPU seconds of each recorder process (it outlives mcprec)
BASELINE: list[str] = []


if __name__ == "__main__":
    if sys.argv[1:] == ["--blob-server"]:
        blob_server()
        sys.exit(0)
    sys.exit(main())
