"""Benchmark: ``mcprec diff`` of two 50,000-message sessions.

    .venv/bin/python bench/bench_diff.py [--messages N] [--rounds N] [--keep DIR]

Builds two cassettes with the cassette writer: a handshake, tools/list, then tools/call
requests and responses (20 tools, arguments from a small pool so identical requests repeat,
progress notifications on some calls, text content that holds JSON on others). Session B is
session A with a few planted differences: an extra request at the start (so every JSON-RPC id
in B is shifted by one and no answer is byte-identical to A's), changed results, a request
missing, an error that appeared, a removed tool, a dropped notification, a slower tool.

Times ``diff_sessions`` (open, read, align, compare, build the result), the text and JSON
reports, and the CLI end to end (``python -m mcprec diff A B --format json``, a fresh process).
Checks that the diff finds exactly the planted differences. Target: under 5 s on this machine.
Exits 1 only when a correctness check fails.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcprec.record.writer import open_session_writer  # noqa: E402
from mcprec.diff import DiffResult, diff_sessions  # noqa: E402

TARGET_S = 5.0
C2S, S2C = "client_to_server", "server_to_client"
TOOLS = [f"tool_{i:02d}" for i in range(20)]
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Accra", "Quito", "Perth", "Tunis"]


def tool_def(name: str, *, v2: bool) -> dict[str, Any]:
    props: dict[str, Any] = {"city": {"type": "string"}, "n": {"type": "integer"}}
    required = ["city", "n"]
    if v2 and name == "tool_03":
        props["unit"] = {"type": "string"}  # a new required input: breaking
        required.append("unit")
    return {"name": name, "description": f"The {name} tool.",
            "inputSchema": {"type": "object", "properties": props, "required": required}}


class Script:
    """Writes one session, numbering ids and advancing time."""

    def __init__(self, path: Path, name: str, rng: random.Random) -> None:
        self.w = open_session_writer(path, name, transport="stdio", target=["bench"])
        self.count, self.next_id, self.t_ns, self.rng = 0, 0, 0, rng

    def send(self, direction: str, obj: dict[str, Any], dt_us: float) -> None:
        self.t_ns += int(dt_us * 1000)
        self.w.message(direction, orjson.dumps(obj), self.t_ns)
        self.count += 1

    def request(self, method: str, params: Any, answer: dict[str, Any], latency_us: float,
                during: tuple[dict[str, Any], ...] = ()) -> None:
        rid = self.next_id
        self.next_id += 1
        self.send(C2S, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, 50)
        for note in during:
            self.send(S2C, note, latency_us / (len(during) + 1))
        self.send(S2C, {"jsonrpc": "2.0", "id": rid, **answer}, latency_us / (len(during) + 1))

    def close(self) -> None:
        self.w.close()


def calls(messages: int) -> list[tuple[str, str, int, float]]:
    """(tool, city, n, latency in µs) of every tools/call, the same list for both sessions."""
    rng = random.Random(42)
    return [(rng.choice(TOOLS), rng.choice(CITIES), rng.randrange(50), 2000 + rng.random() * 500)
            for _ in range(messages // 2)]


def build(path: Path, name: str, messages: int, *, v2: bool) -> int:
    """About ``messages`` messages: A exactly; B with the planted differences."""
    s = Script(path, name, random.Random(0))
    server = {"name": "bench-server", "version": "2.0" if v2 else "1.0"}
    s.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "bench", "version": "1"}},
              {"result": {"protocolVersion": "2025-06-18", "serverInfo": server,
                          "capabilities": {"tools": {"listChanged": False}}}}, 800)
    s.send(C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 10)
    if v2:  # an extra request first: shifts every later id in B
        s.request("ping", {}, {"result": {}}, 100)
    tools = [t for t in TOOLS if not (v2 and t == "tool_19")]  # tool_19 removed in B
    s.request("tools/list", {}, {"result": {"tools": [tool_def(t, v2=v2) for t in tools]}}, 400)
    budget = messages - 5  # A: exactly `messages`
    for i, (tool, city, n, latency) in enumerate(calls(messages), 1):
        progress = i % 10 == 0
        budget -= 3 if progress else 2
        if budget < 0:
            break
        if i == 500:
            if v2:
                continue  # request 500 is missing in B
            n = 999  # a request made once: its absence shifts no pairing of identical ones
        params: dict[str, Any] = {"name": tool, "arguments": {"city": city, "n": n}}
        body: Any = {"city": city, "n": n, "temperature": (n * 7) % 35, "tool": tool}
        if v2 and i in (1000, 2000, 3000):
            body["temperature"] += 1  # changed results
        text = orjson.dumps(body).decode() if i % 3 == 0 else f"{tool} says {city} {n}"
        answer: dict[str, Any] = {"result": {"content": [{"type": "text", "text": text}],
                                             "structuredContent": body, "isError": False}}
        if v2 and i == 4000:
            answer = {"error": {"code": -32603, "message": "internal error"}}
        during: tuple[dict[str, Any], ...] = ()
        if progress:
            params["_meta"] = {"progressToken": s.next_id}
            note = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": s.next_id, "progress": 1, "total": 1}}
            during = () if (v2 and i == 5000) else (note,)  # a notification dropped in B
        if v2 and tool == "tool_07":
            latency *= 4  # a slower tool
        s.request("tools/call", params, answer, latency, during)
    while s.count < messages and not v2:
        s.send(S2C, {"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "info", "data": "idle"}}, 5)
    s.close()
    return s.count


def check(r: DiffResult) -> list[str]:
    """What the diff must find, exactly; returns the problems."""
    problems = []
    kinds = sorted((c.category, c.name, c.kind, c.breaking) for c in r.summary.changes)
    want = sorted([("server", "", "server_info_changed", False),
                   ("tool", "tool_03", "required_input_added", True),
                   ("tool", "tool_19", "removed", True)])
    if kinds != want:
        problems.append(f"summary: {kinds}")
    one_sided = sorted((e.status, e.label) for e in r.exchanges if e.status != "changed")
    if len(one_sided) != 2 or one_sided[1] != ("only_b", "ping"):
        problems.append(f"one-sided: {one_sided}")
    changed = [e for e in r.exchanges if e.status == "changed" and e.method == "tools/call"]
    errors = [e for e in changed if e.error == "appeared"]
    dropped = [e for e in changed if e.notifications]
    plain = [e for e in changed if not e.error and not e.notifications]
    if (len(errors), len(dropped), len(plain)) != (1, 1, 3):
        problems.append(f"errors {len(errors)}, dropped notes {len(dropped)}, changed {len(plain)}")
    outside = [e for e in r.exchanges if not e.method]
    if outside != [] and not all(c.method == "notifications/message" for e in outside
                                 for c in e.notifications):
        problems.append(f"outside requests: {outside}")
    if [row.key for row in r.latency_regressions] != ["tools/call tool_07"]:
        problems.append(f"latency: {[row.key for row in r.latency_regressions]}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="Write the cassettes here and keep them.")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    where = args.keep or Path(tmp.name)
    where.mkdir(parents=True, exist_ok=True)
    a, b = where / "a.db", where / "b.db"
    for p in (a, b):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    counts = build(a, "a", args.messages, v2=False), build(b, "b", args.messages, v2=True)
    print(f"built 2 sessions of {counts[0]:,} and {counts[1]:,} messages "
          f"in {time.perf_counter() - t0:.1f} s")

    lib, text_s, json_s, result = [], [], [], None
    for _ in range(args.rounds):
        t = time.perf_counter()
        result = diff_sessions(a, "a", b, "b")
        lib.append(time.perf_counter() - t)
        t = time.perf_counter()
        result.to_text()
        text_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        result.to_json()
        json_s.append(time.perf_counter() - t)
    assert result is not None
    cli = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "mcprec", "diff", f"{a}:a", f"{b}:b",
                               "--format", "json"], capture_output=True, cwd=where)
        cli.append(time.perf_counter() - t)
        if proc.returncode != 1:
            print(f"FAIL: the CLI exited {proc.returncode}: {proc.stderr.decode()}")
            return 1
    problems = check(result)
    med = statistics.median
    print(f"diff_sessions         median {med(lib):.2f} s  (best {min(lib):.2f} s)")
    print(f"  + text report       median {med(text_s) * 1000:.0f} ms")
    print(f"  + JSON report       median {med(json_s) * 1000:.0f} ms")
    print(f"CLI end to end        median {med(cli):.2f} s  (best {min(cli):.2f} s)")
    print(f"findings: {len(result.summary.changes)} summary changes, {len(result.exchanges)} "
          f"exchanges differ, {len(result.latency_regressions)} latency regression(s)")
    verdict = "PASS" if med(cli) < TARGET_S else "MISS"
    print(f"{verdict}: CLI {med(cli):.2f} s vs target {TARGET_S:.0f} s")
    for p in problems:
        print(f"FAIL: {p}")
    tmp.cleanup()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
