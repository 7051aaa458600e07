"""Benchmark: does sending spans while recording (``MCPREC_OTLP``) cost recording anything?

    .venv/bin/python bench/bench_otlp.py [--rounds N] [--requests N] [--window N]

``mcprec record -- bench/echo_server.py`` is driven with small requests (~200 B, ``--window``
in flight), in four configurations, alternated within every round:

  plain   no MCPREC_OTLP
  otlp    MCPREC_OTLP at a local receiver that answers 200 at once
  hang    MCPREC_OTLP at a receiver that accepts and never answers
  dead    MCPREC_OTLP at a port nobody listens on

For each: requests per second through the tap, the CPU seconds that `mcprec record` and its
recorder process (the echo server left out) had used when the last answer arrived, and the
time `mcprec record` takes to exit once the client closes its stdin. On a small shared machine
throughput moves with everything else that runs; the CPU seconds are the steadier measure. Every cassette must then hold all the messages, in a session
marked complete, as mcprec reads it (exit 1 otherwise). For ``otlp``, the spans the receiver got are counted
(decoded with opentelemetry-proto). Stdlib + orjson + opentelemetry-proto (the otel extra).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ECHO = REPO / "bench" / "echo_server.py"
CONFIGS = ("plain", "otlp", "hang", "dead")


class Receiver:
    """An OTLP/HTTP endpoint on 127.0.0.1: answers 200 (keeping the bodies), or never."""

    def __init__(self, hang: bool) -> None:
        self.bodies: list[bytes] = []
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hang:
                    outer.stop.wait(60)
                    return
                if self.path == "/v1/traces":
                    outer.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> int:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        return sum(len(ss.spans) for b in self.bodies
                   for rs in ExportTraceServiceRequest.FromString(b).resource_spans
                   for ss in rs.scope_spans)

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its descendants except the echo server."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if len(argv) > 1 and argv[1].endswith(ECHO.name.encode()):
                continue
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def request(i: int) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo",'
            b'"arguments":{"text":"%s"}}}\n' % (i, b"x" * 120))


def run(config: str, url: str | None, n: int, window: int, tmp: Path) -> dict[str, float]:
    cassette = tmp / f"{config}-{time.monotonic_ns()}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    if url:
        env["MCPREC_OTLP"] = url
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcprec", "record", "-c", str(cassette), "-s", "b", "--",
         sys.executable, str(ECHO)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        cwd=tmp,
    )
    assert proc.stdin is not None and proc.stdout is not None
    slots = threading.Semaphore(window)

    def write() -> None:
        assert proc.stdin is not None
        for i in range(n):
            slots.acquire()
            proc.stdin.write(request(i))
            proc.stdin.flush()

    start = time.perf_counter()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    for got, _line in enumerate(proc.stdout, 1):
        slots.release()
        if got == n:
            break
    elapsed = time.perf_counter() - start
    cpu = tree_cpu(proc.pid)
    writer.join()
    proc.stdin.close()
    t0 = time.perf_counter()
    proc.wait(120)
    exit_s = time.perf_counter() - t0
    proc.stdout.close()
    from mcprec.cassette import open_cassette

    with open_cassette(cassette) as c:  # waits for the recorder to finish the session
        session = c.session("b")
        count, status = session.message_count, session.status
    if count != 2 * n or status != "complete":
        raise SystemExit(f"FAIL {config}: cassette has {count} of {2 * n} messages, {status}")
    return {"rps": n / elapsed, "cpu_s": cpu, "exit_s": exit_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--window", type=int, default=32)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {c: [] for c in CONFIGS}
    spans: list[int] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for rnd in range(args.rounds):
            order = CONFIGS[rnd % len(CONFIGS):] + CONFIGS[:rnd % len(CONFIGS)]
            for config in order:
                receiver = Receiver(hang=config == "hang") if config in ("otlp", "hang") \
                    else None
                url = receiver.url if receiver else dead_url() if config == "dead" else None
                try:
                    results[config].append(run(config, url, args.requests, args.window, tmp))
                    if config == "otlp" and receiver is not None:
                        time.sleep(3.5)  # the recorder's last batches (at most CLOSE_TIMEOUT)
                        spans.append(receiver.spans())
                finally:
                    if receiver is not None:
                        receiver.close()
    def med(config: str, key: str) -> float:
        return statistics.median(r[key] for r in results[config])

    print(f"{args.requests} requests of ~200 B, {args.window} in flight, {args.rounds} rounds "
          f"(medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'config':8} {'req/s':>9} {'vs plain':>9} {'CPU s':>7} {'vs plain':>9} {'exit s':>7}")
    for config in CONFIGS:
        rps, cpu = med(config, "rps"), med(config, "cpu_s")
        print(f"{config:8} {rps:9.0f} {rps / med('plain', 'rps') - 1:+9.1%} {cpu:7.2f} "
              f"{cpu / med('plain', 'cpu_s') - 1:+9.1%} {med(config, 'exit_s'):7.2f}")
    if spans:
        print(f"otlp: spans received per run {spans} (one per request, plus the root)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
