"""Soak: a million messages through ``mcprec record`` with memory flat.

    .venv/bin/python bench/bench_soak.py [--messages N] [--window W] [--durable]

The client pipelines N requests (~200 B, W in flight) through
``python -m mcprec record -- bench/echo_server.py``; the echo server answers each, so 2N
messages cross the tap. mcprec's resident memory is sampled from /proc every 0.25 s. At the
end the cassette must hold all 2N messages. Prints throughput and the RSS profile: memory is
flat when the last samples are no higher than the early ones (plus a small allowance).

Stdlib + orjson only; a benchmark, not a test (exit 1 only when a correctness check fails).
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RECORDER_MODULES = (b"mcprec.record.child", b"mcprec.cassette.recorder_process",
                    b"mcprec.cassette.process")
"""The recorder process's module, by its names old and new (--baseline trees)."""

HERE = Path(__file__).resolve().parent


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def recorder_pid(pid: int) -> int | None:
    """mcprec's recorder process (the child running mcprec.record.child, or its older names
    in trees from before the renames)."""
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                cmd = f.read()
            if any(name in cmd for name in RECORDER_MODULES):
                return child
        except OSError:
            continue
    return None


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run(n: int, window: int, durable: bool) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-soak-"))
    cassette = tmp / "soak.db"
    argv = [sys.executable, "-m", "mcprec", "record", "-c", str(cassette), "-s", "soak"]
    if durable:
        argv.append("--durable")
    argv += ["--", sys.executable, str(HERE / "echo_server.py")]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    samples: list[tuple[float, int, int]] = []  # (t, messages answered, rss KiB: tap+recorder)
    answered = 0
    done = threading.Event()

    def sample() -> None:
        t0 = time.monotonic()
        rec: int | None = None
        while not done.is_set():
            r = rss_kib(proc.pid)
            rec = rec or recorder_pid(proc.pid)
            r2 = rss_kib(rec) if rec else 0
            if r is not None:
                samples.append((time.monotonic() - t0, answered, r + (r2 or 0)))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    pad = "x" * 120
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    os.set_blocking(wfd, False)
    sent = 0
    pending = b""
    buf = b""
    start = time.monotonic()
    while answered < n:
        while sent - answered < window and sent < n and len(pending) < 1 << 16:
            pending += (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo",'
                        b'"arguments":{"text":"%s"}}}\n' % (sent, pad.encode()))
            sent += 1
        wlist = [wfd] if pending else []
        r, w, _ = select.select([rfd], wlist, [], 5.0)
        if not r and not w:
            print("stalled: no progress for 5 s", file=sys.stderr)
            return 1
        if w:
            try:
                k = os.write(wfd, pending)
                pending = pending[k:]
            except BlockingIOError:
                pass
        if r:
            chunk = os.read(rfd, 1 << 20)
            if not chunk:
                print("mcprec closed its stdout early", file=sys.stderr)
                return 1
            buf += chunk
            answered += buf.count(b"\n")
            buf = buf[buf.rfind(b"\n") + 1:]
    elapsed = time.monotonic() - start
    os.set_blocking(wfd, True)
    proc.stdin.close()
    t_eof = time.monotonic()
    proc.wait(60)
    exit_s = time.monotonic() - t_eof
    done.set()
    sampler.join()
    from mcprec.cassette import open_cassette  # waits while the recorder finishes the session

    with open_cassette(cassette) as c:
        stored = c.connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    size_mb = sum(p.stat().st_size for p in tmp.iterdir()) / 1e6
    print(f"messages through the tap: {2 * n:,} ({n:,} requests, window {window}"
          f"{', durable' if durable else ''})")
    print(f"throughput: {2 * n / elapsed:,.0f} messages/s over {elapsed:.1f} s; exit after EOF "
          f"{exit_s * 1000:.0f} ms; cassette {size_mb:.0f} MB")
    ok = stored == 2 * n
    print(f"cassette holds {stored:,} messages: {'OK' if ok else 'MISSING MESSAGES'}")
    if samples:
        k = max(1, len(samples) // 10)
        early = max(s[2] for s in samples[:k])
        late = max(s[2] for s in samples[-k:])
        peak = max(s[2] for s in samples)
        print("RSS of mcprec + its recorder process (MiB) at 10% steps: " + ", ".join(
            f"{samples[min(len(samples) - 1, i * len(samples) // 10)][2] / 1024:.0f}"
            for i in range(11)))
        # flat: bounded by the recorder's buffer high water, not growing with the message count
        flat = late <= early * 1.25 + 8 * 1024
        print(f"peak RSS {peak / 1024:.1f} MiB; early {early / 1024:.1f} MiB, late "
              f"{late / 1024:.1f} MiB: {'FLAT (PASS)' if flat else 'GROWING (FAIL)'}")
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    return 0 if ok else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=500_000,
                    help="requests to send (each answered: twice as many messages)")
    ap.add_argument("--window", type=int, default=64, help="requests in flight")
    ap.add_argument("--durable", action="store_true", help="record with --durable")
    args = ap.parse_args()
    sys.exit(run(args.messages, args.window, args.durable))


if __name__ == "__main__":
    main()
