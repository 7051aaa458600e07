"""Benchmark: how fast `mcprec view` opens a 50,000-message session.

    .venv/bin/python bench/bench_view.py [--messages N] [--rounds N] [--keep DIR] [--no-browser]

Builds a cassette with the cassette writer: one session of ``--messages`` messages (a
handshake, tools/list, then tools/call requests and answers, progress and log notifications on
some calls, a stderr line now and then). Then, for each round, starts a fresh `mcprec view`
process (so nothing is cached) and measures:

- **open (browser)**: headless Chromium (Debian's, through Playwright) loads the page on the
  session's timeline; the time from the navigation until the first rows are on screen. This
  is the number of issue 14's target: under 1 s.
- **open (API)**: the same two calls the page makes, with httpx: the session and the first
  page of 200 entries (read from the session's head while its outline is built in the
  background); **outline (API)**: until the session says how many entries it has in all.
- **page**: one page of 200 entries at a random place (the scrollbar dragged anywhere).
- **message**: one message's detail; **search**: a text found nowhere (a scan of everything).

Exits 1 only when a check fails (the timeline must hold every top-level entry).
"""

from __future__ import annotations

import argparse
import os
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

TARGET_S = 1.0
C2S, S2C = "client_to_server", "server_to_client"
CHROMIUM = os.environ.get("MCPREC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def build(path: Path, messages: int, name: str = "big") -> int:
    """A session of about ``messages`` messages; returns the number of top-level entries."""
    rng = random.Random(7)
    w = open_session_writer(path, name, transport="stdio", target=["bench-server"])
    t, rid, count, entries = 0, 0, 0, 0

    def send(direction: str, obj: dict[str, Any], dt_us: float) -> None:
        nonlocal t, count
        t += int(dt_us * 1000)
        w.message(direction, orjson.dumps(obj), t)
        count += 1

    def call(method: str, params: Any, result: Any, latency_us: float, notes: int = 0) -> None:
        nonlocal rid, entries
        rid += 1
        send(C2S, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, 200)
        for i in range(notes):
            send(S2C, {"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": rid, "progress": i + 1, "total": notes}},
                 latency_us / (notes + 1))
        send(S2C, {"jsonrpc": "2.0", "id": rid, "result": result}, latency_us / (notes + 1))
        entries += 1

    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}},
         {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
          "serverInfo": {"name": "bench-server", "version": "1.0"}}, 900)
    send(C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"}, 20)
    entries += 1
    tools = [f"tool_{i:02d}" for i in range(20)]
    call("tools/list", {}, {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                      for n in tools]}, 400)
    while count < messages - 4:
        tool = rng.choice(tools)
        args = {"city": rng.choice(["Paris", "Oslo", "Lima", "Kyoto"]), "n": rng.randrange(99)}
        text = f"{tool}: {args['city']} is {rng.randrange(30)} C"
        notes = 3 if rng.random() < 0.1 else 0
        call("tools/call", {"name": tool, "arguments": args, "_meta": {"progressToken": rid + 1}},
             {"content": [{"type": "text", "text": text}], "isError": False},
             rng.uniform(500, 5000), notes)
        if rng.random() < 0.01:
            w.stderr_line(f"{tool}: cache miss for {args['city']}".encode(), t + 1)
            entries += 1
    w.close(exit_code=0)
    return entries


def start_view(cassette: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, "-m", "mcprec", "view", str(cassette), "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"mcprec view did not start: {url!r}")
    return proc, url.split("#")[0]


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def api_round(cassette: Path, entries: int) -> dict[str, float]:
    import httpx

    proc, base = start_view(cassette)
    out: dict[str, float] = {}
    try:
        with httpx.Client(base_url=base, timeout=60) as c:
            t0 = time.perf_counter()
            s = c.get("/api/sessions/1").json()
            c.get("/api/sessions/1/timeline", params={"start": 0, "count": 200}).raise_for_status()
            out["open (API)"] = time.perf_counter() - t0
            while s["entries"] is None:  # the outline is built in the background meanwhile
                time.sleep(0.005)
                s = c.get("/api/sessions/1").json()
            out["outline (API)"] = time.perf_counter() - t0
            if s["entries"] != entries:
                raise SystemExit(f"FAIL: the timeline holds {s['entries']} entries, not {entries}")
            rng = random.Random(1)
            times = []
            for _ in range(20):
                start = rng.randrange(max(1, entries - 200))
                t0 = time.perf_counter()
                page = c.get("/api/sessions/1/timeline", params={"start": start, "count": 200})
                times.append(time.perf_counter() - t0)
                assert len(page.json()["entries"]) == 200
            out["page"] = statistics.median(times)
            times = []
            for seq in rng.sample(range(s["messages"]), 20):
                t0 = time.perf_counter()
                c.get(f"/api/sessions/1/messages/{seq}").raise_for_status()
                times.append(time.perf_counter() - t0)
            out["message"] = statistics.median(times)
            t0 = time.perf_counter()
            cursor = None
            while True:
                r = c.get("/api/search", params={"q": "no such text anywhere",
                                                 **({"cursor": cursor} if cursor else {})}).json()
                cursor = r["next"]
                if cursor is None:
                    break
            out["search (all)"] = time.perf_counter() - t0
    finally:
        stop(proc)
    return out


def browser_round(cassette: Path, browser: Any) -> float:
    proc, base = start_view(cassette)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 860})
        t0 = time.perf_counter()
        page.goto(base + "#/s/1")
        page.locator(".vlist .row.msg").first.wait_for(timeout=30_000)
        took = time.perf_counter() - t0
        page.close()
        return took
    finally:
        stop(proc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the cassette in this folder and keep it")
    ap.add_argument("--no-browser", action="store_true", help="API numbers only")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-view-"))
    folder.mkdir(parents=True, exist_ok=True)
    cassette = folder / "view.db"
    cassette.unlink(missing_ok=True)
    t0 = time.perf_counter()
    entries = build(cassette, args.messages)
    print(f"built {args.messages} messages ({entries} timeline entries, "
          f"{cassette.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")

    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for k, v in api_round(cassette, entries).items():
            results.setdefault(k, []).append(v)
    use_browser = not args.no_browser and Path(CHROMIUM).exists()
    if use_browser:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            browser_round(cassette, b)  # the browser's own first start is not the view's
            for _ in range(args.rounds):
                results.setdefault("open (browser)", []).append(browser_round(cassette, b))
            b.close()
    else:
        print("no browser: skipping the page load (install chromium and playwright)")

    print(f"\n{'':20} {'median':>10} {'max':>10}   ({args.rounds} rounds, a fresh view each)")
    for k, v in results.items():
        print(f"{k:20} {ms(statistics.median(v)):>10} {ms(max(v)):>10}")
    if use_browser:
        took = statistics.median(results["open (browser)"])
        verdict = "PASS" if took < TARGET_S else "FAIL"
        print(f"\n{verdict}: a {args.messages}-message session opens in {took * 1000:.0f} ms "
              f"(target < {TARGET_S * 1000:.0f} ms)")
    if not args.keep:
        for f in folder.glob("view.db*"):
            f.unlink()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
