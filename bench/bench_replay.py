"""Benchmark: how fast does ``mcprec replay`` answer, against a live server, in one run?

    .venv/bin/python bench/bench_replay.py [--rounds N] [--requests N] [--json]

Three measurements, each alternating its configurations over several rounds (medians; the
targets use the median of each round's own ratio, which drift between rounds disturbs less):

  throughput   a pipelined stream of small requests (32 in flight) answered by
               (a) bench/trivial_server.py, a trivial live server written the usual way
                   (asyncio streams + json), the baseline of the target;
               (b) bench/echo_server.py, a raw-fd echo loop, shown for scale;
               (c) ``mcprec replay`` of a cassette holding those exchanges;
               target: replay >= 0.6x the trivial live server's requests/s.
  scaling      the same load replayed from a cassette of ~1,000 messages and one of ~100,000
               (the same requests, plus 99,000 others): look-ups are indexed and lazy, so the
               big cassette must answer within 1.2x the time of the small one.
  start-up     time from launching ``mcprec replay`` to its answer to ``initialize`` (the
               client's first request; the cassettes begin with it), against
               ``python -c "import sqlite3"`` (process start alone); target <= 1.5x. Shown
               beside it: ``python -c "import sqlite3, orjson"``, the floor of any start-up
               that parses JSON with orjson. The first tools/call answer after it is shown too
               (it reads the first window of recorded traffic).

mcprec's modules are byte-compiled first, as an install leaves them (this workplace sets
PYTHONDONTWRITEBYTECODE, which would otherwise have every start-up compile the sources).

The requests are varied (each tools/call has its own arguments), so every answer is a real
indexed look-up, not a repeat. Every answer is checked (id and result). Stdlib + orjson only;
a benchmark, not a test: exit 1 only when a correctness check fails.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# the mcprec that writes the cassettes: this tree, or the --baseline tree for its own cassette
# (each replays a cassette of its own format)
sys.path.insert(0, os.environ.get("MCPREC_BENCH_SOURCE") or str(REPO))

from mcprec import wire  # noqa: E402
try:  # a tree from before the record package (MCPREC_BENCH_SOURCE) had it in cassette
    from mcprec.record.writer import open_session_writer  # noqa: E402
except ImportError:
    from mcprec.cassette import open_session_writer  # type: ignore[attr-defined,no-redef]  # noqa: E402,E501

WINDOW = 32


def request(i: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": f"message {i}",
                                                                  "n": i}}})


def answer(i: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "result": {
        "name": "echo", "arguments": {"text": f"message {i}", "n": i}}})


INITIALIZE = orjson.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}})
INITIALIZED = orjson.dumps({"jsonrpc": "2.0", "id": "init", "result": {
    "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
    "serverInfo": {"name": "echo", "version": "1"}}})


def check(msg: dict[str, object], i: int) -> bool:
    result = msg.get("result")
    return isinstance(result, dict) and result.get("arguments", {}).get("n") == i


def make_cassette(path: Path, n: int, extra: int) -> None:
    """A session with the n benchmark exchanges (as the echo server answers them), plus
    ``extra`` other exchanges so that the cassette is bigger."""
    w = open_session_writer(path, "bench", transport="stdio", target=["echo"])
    w.message(wire.CLIENT_TO_SERVER, INITIALIZE, 0)
    w.message(wire.SERVER_TO_CLIENT, INITIALIZED, 500)
    t = 1000
    for i in range(n):
        w.message(wire.CLIENT_TO_SERVER, request(i), t)
        w.message(wire.SERVER_TO_CLIENT, answer(i), t + 1000)
        t += 2000
    for j in range(extra):
        i = 10_000_000 + j
        w.message(wire.CLIENT_TO_SERVER, request(i), t)
        w.message(wire.SERVER_TO_CLIENT, answer(i), t + 1000)
        t += 2000
    w.close()


def drive(argv: list[str], n: int, env: dict[str, str] | None = None,
          cwd: str | Path | None = None) -> tuple[float, float, float]:
    """Initialize (as a client does: its answer first), then pipeline n requests (WINDOW in
    flight); return (requests/s, seconds to the initialize answer, seconds to the first
    tools/call answer), both from the spawn."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                            env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    os.write(wfd, INITIALIZE + b"\n")
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(rfd, 1 << 16)
        if not chunk:
            raise SystemExit(f"{argv[0]} closed its stdout before answering initialize")
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    if orjson.loads(line).get("id") != "init" or b'"result"' not in line:
        raise SystemExit(f"wrong answer to initialize: {line[:200]!r}")
    initialized = time.perf_counter() - started
    os.set_blocking(wfd, False)
    sent = got = 0
    pending = b""
    first = None
    t0 = None
    while got < n:
        while sent - got < WINDOW and sent < n and len(pending) < 1 << 16:
            pending += request(sent) + b"\n"
            sent += 1
        r, w, _ = select.select([rfd], [wfd] if pending else [], [], 10)
        if not r and not w:
            raise SystemExit(f"stalled at {got}/{n}: {' '.join(argv[:4])}")
        if w:
            try:
                k = os.write(wfd, pending)
                pending = pending[k:]
            except BlockingIOError:
                pass
        if r:
            chunk = os.read(rfd, 1 << 20)
            if not chunk:
                raise SystemExit(f"{argv[0]} closed its stdout at {got}/{n}")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = orjson.loads(line)
                i = msg["id"]
                if not check(msg, i):
                    raise SystemExit(f"wrong answer to request {i}: {line[:200]!r}")
                got += 1
                if first is None:
                    first = time.perf_counter() - started
                    t0 = time.perf_counter()
    elapsed = time.perf_counter() - (t0 or started)
    os.set_blocking(wfd, True)
    proc.stdin.close()
    proc.wait(30)
    proc.stdout.close()
    return (n - 1) / elapsed if elapsed > 0 else float("inf"), initialized, first or 0.0


def startup_baseline(code: str = "import sqlite3") -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also replay the small cassette with mcprec imported from this source "
                         "tree (`replay_before`; e.g. `git archive <commit> mcprec | tar -x -C "
                         "DIR`), for before/after numbers in one run")
    args = ap.parse_args()
    n = args.requests
    import compileall

    compileall.compile_dir(str(REPO / "mcprec"), quiet=1)
    if args.baseline:
        compileall.compile_dir(str(Path(args.baseline) / "mcprec"), quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="mcprec-bench-replay-"))
    small, big = tmp / "small.db", tmp / "big.db"
    make_cassette(small, n, max(0, 500 - n))
    before_small = small
    if args.baseline:  # written by the baseline: it may not read this tree's cassette format
        before_small = tmp / "before-small.db"
        source = str(Path(args.baseline).resolve())
        subprocess.run([sys.executable, __file__, "--make", str(before_small), str(n),
                        str(max(0, 500 - n))], check=True,
                       env={**os.environ, "MCPREC_BENCH_SOURCE": source})
    make_cassette(big, n, 50_000 - n)
    echo = [sys.executable, str(HERE / "echo_server.py")]
    replay = [sys.executable, "-m", "mcprec", "replay"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    trivial = [sys.executable, str(HERE / "trivial_server.py")]
    res: dict[str, list[float]] = {k: [] for k in (
        "live", "raw", "replay_small", "replay_big", "first_small", "first_big", "call_small",
        "call_big", "baseline", "floor", "replay_before", "first_before", "call_before")}
    before_env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())} \
        if args.baseline else env
    for r in range(args.rounds):
        configs = [("live", trivial), ("raw", echo), ("replay_small", [*replay, str(small)]),
                   ("replay_big", [*replay, str(big)])]
        if args.baseline:
            configs.append(("replay_before", [*replay, str(before_small)]))
        k = r % len(configs)
        configs = configs[k:] + configs[:k]
        for name, argv in configs:
            # run in the temporary directory: `python -m` puts the working directory first on
            # sys.path, so from the repository's root every configuration would import its mcprec
            rps, first, call = drive(argv, n, before_env if name == "replay_before" else env,
                                     cwd=tmp)
            res[name].append(rps)
            if name.startswith("replay"):
                res["first_" + name.split("_")[1]].append(first)
                res["call_" + name.split("_")[1]].append(call)
        res["baseline"].append(startup_baseline())
        # what importing orjson alone adds (it imports dataclasses, inspect, uuid, json and
        # datetime itself): the floor of any start-up that parses JSON with it
        res["floor"].append(startup_baseline("import sqlite3, orjson"))
    med = {k: statistics.median(v) for k, v in res.items() if v}

    def paired(a: str, b: str) -> float:
        """The median of the rounds' own ratios: each round runs every configuration once, so
        a machine whose speed drifts from round to round disturbs it less than a ratio of
        medians taken from different rounds."""
        return statistics.median(x / y for x, y in zip(res[a], res[b], strict=True))

    ratio = paired("replay_small", "live")
    scaling = paired("replay_small", "replay_big")  # time ratio big/small
    startup = paired("first_small", "baseline")
    if args.json:
        print(orjson.dumps({"medians": med, "replay_vs_live": ratio, "big_vs_small_time": scaling,
                            "startup_vs_python": startup}).decode())
        return
    print(f"{n} pipelined requests ({WINDOW} in flight), {args.rounds} rounds, medians:")
    print(f"  trivial live server     {med['live']:>10,.0f} req/s   (asyncio + json)")
    print(f"  raw-fd echo loop        {med['raw']:>10,.0f} req/s   (for scale)")
    print(f"  replay, ~{2 * 500:,} msgs     {med['replay_small']:>10,.0f} req/s   "
          f"{ratio:.2f}x live")
    print(f"  replay, ~{2 * 50_000:,} msgs  {med['replay_big']:>10,.0f} req/s")
    if args.baseline:
        print(f"  replay before, ~{2 * 500:,} {med['replay_before']:>10,.0f} req/s   "
              f"{med['replay_before'] / med['live']:.2f}x live; first answer "
              f"{med['first_before'] * 1000:.0f} ms "
              f"({med['first_before'] / med['baseline']:.2f}x), first tools/call "
              f"{med['call_before'] * 1000:.0f} ms")
    print(f"  first answer (initialize): replay {med['first_small'] * 1000:.0f} ms (small), "
          f"{med['first_big'] * 1000:.0f} ms (big); python -c 'import sqlite3' "
          f"{med['baseline'] * 1000:.0f} ms; python -c 'import sqlite3, orjson' "
          f"{med['floor'] * 1000:.0f} ms ({med['floor'] / med['baseline']:.2f}x)")
    print(f"  first tools/call answer (after initialize): {med['call_small'] * 1000:.0f} ms "
          f"(small, {med['call_small'] / med['baseline']:.2f}x), {med['call_big'] * 1000:.0f} ms "
          "(big)")
    print("targets:")
    print(f"  {'PASS' if ratio >= 0.6 else 'FAIL'}  replay >= 0.6x the trivial live server: "
          f"{ratio:.2f}x  ({med['replay_small'] / med['raw']:.2f}x the raw echo loop; ratio of "
          f"medians {med['replay_small'] / med['live']:.2f}x)")
    print(f"  {'PASS' if scaling <= 1.2 else 'FAIL'}  100k-message cassette within 1.2x of "
          f"1k: {scaling:.2f}x  (ratio of medians {med['replay_small'] / med['replay_big']:.2f}x)")
    print(f"  {'PASS' if startup <= 1.5 else 'FAIL'}  first answer (initialize) within 1.5x of "
          f"bare python start-up: {startup:.2f}x  (ratio of medians "
          f"{med['first_small'] / med['baseline']:.2f}x)")
    print("  (ratios: medians of each round's own ratio; every round runs each configuration once)")
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()


if __name__ == "__main__" and sys.argv[1:2] == ["--make"]:  # see --baseline
    make_cassette(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
elif __name__ == "__main__":
    main()
