"""The recorder's own cost per small message, in-process: ``Recorder.add`` + ``commit``.

What the recorder process does with each line it reads (redact, classify, pair, key, build the
row, insert it), without the tap, the server or the pipe: 20,000 ``tools/call`` requests and
their results (~200 B each) go through a ``Recorder`` into a real temporary cassette, in batches
as the recorder process commits them, with the redactor ``mcprec record`` uses by default.

Each measurement runs in a fresh process. With ``--baseline DIR`` (a ``git archive`` of an older
commit's ``mcprec`` into DIR) the two trees alternate within each round, so that their ratio is
measured under the same load from the rest of the machine:

    mkdir /tmp/old && git archive <commit> mcprec | tar -x -C /tmp/old
    .venv/bin/python bench/bench_recorder_inproc.py --baseline /tmp/old

Prints µs per message (wall clock and CPU of the process), medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_messages(pairs: int, distinct: bool = False) -> list[tuple[str, bytes]]:
    """Request/result pairs as an MCP client and server write them (~200 B each). The
    requests repeat ~100 match keys; ``distinct``: each has its own, as most sessions'."""
    import orjson

    words = ("the quick brown fox jumps over the lazy dog while the recorder keeps up with "
             "every message it is handed").split()
    out: list[tuple[str, bytes]] = []
    for i in range(pairs):
        text = " ".join(words[(i + k) % len(words)] for k in range(12))
        out.append(("client_to_server", orjson.dumps({
            "jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "search_notes", "arguments": {
                "query": text, "limit": i % 50, **({"page": i} if distinct else {})}},
        })))
        out.append(("server_to_client", orjson.dumps({
            "jsonrpc": "2.0", "id": i, "result": {
                "content": [{"type": "text", "text": f"{i % 7} notes match: {text}"}],
                "isError": False},
        })))
    return out


def child(tree: str, pairs: int, batch: int, redact: bool, distinct: bool) -> dict[str, float]:
    """One measurement, in this process, of the ``mcprec`` found in ``tree``."""
    sys.path.insert(0, tree)
    from mcprec.cassette.store import Cassette
    from mcprec.record.writer import Recorder
    from mcprec.redact import Redactor, Rules

    assert Path(sys.modules["mcprec"].__file__ or "").is_relative_to(tree), "wrong mcprec"
    messages = make_messages(pairs, distinct)
    redactor = Redactor(Rules()) if redact else None
    with tempfile.TemporaryDirectory() as tmp:
        cassette = Cassette.open(Path(tmp) / "bench.mcpr", create=True)
        session = cassette.create_session("bench", transport="stdio", target=["bench"])
        rec = Recorder(cassette.connection, session, redact=redactor)
        t_ns = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for start in range(0, len(messages), batch):
            for direction, raw in messages[start:start + batch]:
                t_ns += 1000
                rec.add(direction, t_ns, raw)
            rec.commit()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        rec.finish()
        assert rec.error is None and rec.count == len(messages), (rec.error, rec.count)
        cassette.close()
    n = len(messages)
    return {"wall_us": wall / n * 1e6, "cpu_us": cpu / n * 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="a directory holding an older mcprec/ to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500, help="messages per commit")
    ap.add_argument("--no-redact", action="store_true", help="record without a redactor")
    ap.add_argument("--distinct", action="store_true",
                    help="every request with a match key of its own (the index of keys then "
                    "grows with the session, as in most sessions)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.pairs, args.batch, not args.no_redact,
                               args.distinct)))
        return 0
    trees = {"current": str(ROOT)}
    if args.baseline:
        trees = {"baseline": str(Path(args.baseline).resolve()), **trees}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for rnd in range(args.rounds):
        names = list(trees)
        if rnd % 2:
            names.reverse()
        for name in names:
            cmd = [sys.executable, __file__, "--child", trees[name], "--pairs", str(args.pairs),
                   "--batch", str(args.batch), *(["--no-redact"] if args.no_redact else []),
                   *(["--distinct"] if args.distinct else [])]
            env = {**os.environ, "PYTHONPATH": ""}
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            runs[name].append(json.loads(out.stdout))
    print(f"{2 * args.pairs:,} messages, {args.batch} a commit, redaction "
          f"{'off' if args.no_redact else 'default'}, "
          f"{'a key per request' if args.distinct else '~100 keys'}, "
          f"medians of {args.rounds} rounds")
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall_us", "cpu_us")}
           for name, rs in runs.items()}
    for name, m in med.items():
        walls = ", ".join(f"{r['wall_us']:.1f}" for r in runs[name])
        print(f"  {name:9} {m['wall_us']:6.2f} µs a message wall, {m['cpu_us']:6.2f} cpu "
              f"(wall each round: {walls})")
    if "baseline" in med:
        b, c = med["baseline"], med["current"]
        ratios = sorted(x["wall_us"] / y["wall_us"]
                        for x, y in zip(runs["baseline"], runs["current"], strict=True))
        print(f"  speed-up  {b['wall_us'] / c['wall_us']:.2f}x wall, "
              f"{b['cpu_us'] / c['cpu_us']:.2f}x cpu (paired per round: "
              f"{', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
