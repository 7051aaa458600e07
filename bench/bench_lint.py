"""Benchmark: ``mcprec lint`` of a 50,000-message session.

    .venv/bin/python bench/bench_lint.py [--messages N] [--rounds N] [--libraries] [--keep DIR]

Builds a cassette with the cassette writer: initialize, tools/list (20 tools, each with an
inputSchema and an outputSchema), then tools/call requests with progress notifications and log
messages on some, results with text and structured content; a few resources/read and
prompts/get. The session is clean, so every message goes the whole way through every rule.

Times ``lint()`` (open, read, every protocol and security rule, the findings) and the CLI end to
end (``python -m mcprec lint CASSETTE --format json``, a fresh process). Target: under 2 s for
50,000 messages. Exits 1 only when the lint of the clean session finds something.

``--libraries`` also times the schema validation alone, message by message against the
definition the schema rule picks, with each of the three JSON Schema libraries that were
candidates (jsonschema-rs, fastjsonschema, jsonschema; each only when installed).
"""

from __future__ import annotations

import argparse
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
from mcprec.lint import LintOptions, lint  # noqa: E402

TARGET_S = 2.0
VERSION = "2025-11-25"
C2S, S2C = "client_to_server", "server_to_client"
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Accra", "Quito", "Perth", "Tunis"]


def tool(i: int) -> dict[str, Any]:
    return {
        "name": f"tool_{i:02d}", "title": f"Tool {i}",
        "description": f"Look up the weather with method {i}.",
        "inputSchema": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "A city name"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}}},
        "outputSchema": {"type": "object", "required": ["city", "temperature"], "properties": {
            "city": {"type": "string"}, "temperature": {"type": "number"},
            "summary": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    }


def build(path: Path, messages: int) -> int:
    """Write the session; returns the number of messages written."""
    w = open_session_writer(path, "bench", transport="stdio", target=["bench"])
    t, n, rid = 0, 0, 0

    def send(direction: str, obj: dict[str, Any]) -> None:
        nonlocal t, n
        t += 40_000
        w.message(direction, orjson.dumps(obj), t)
        n += 1

    def call(method: str, params: dict[str, Any], result: dict[str, Any],
             during: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
        nonlocal rid
        rid += 1
        send(C2S, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        for note in during:
            send(S2C, note)
        send(S2C, {"jsonrpc": "2.0", "id": rid, "result": result})

    call("initialize", {"protocolVersion": VERSION, "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}},
         {"protocolVersion": VERSION, "serverInfo": {"name": "bench-server", "version": "1"},
          "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "logging": {}}})
    send(C2S, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    call("tools/list", {}, {"tools": [tool(i) for i in range(20)]})
    i = 0
    while n < messages - 4:
        i += 1
        city = CITIES[i % len(CITIES)]
        name = f"tool_{i % 20:02d}"
        if i % 50 == 0:
            call("resources/read", {"uri": f"weather://{city}"},
                 {"contents": [{"uri": f"weather://{city}", "mimeType": "text/plain",
                                "text": f"{city}: report {i}"}]})
            continue
        if i % 75 == 0:
            call("prompts/get", {"name": "forecast", "arguments": {"city": city}},
                 {"messages": [{"role": "user", "content": {"type": "text",
                                                            "text": f"Forecast for {city}"}}]})
            continue
        params: dict[str, Any] = {"name": name, "arguments": {"city": city, "days": 1 + i % 7}}
        during = []
        if i % 4 == 0:
            params["_meta"] = {"progressToken": rid + 1}
            during = [{"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": rid + 1, "progress": k, "total": 2}}
                      for k in (1, 2)]
            during.append({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "logger": "bench",
                                      "data": f"call {i} done"}})
        temp = round(10 + (i % 17) * 0.7, 1)
        call("tools/call", params, {
            "content": [{"type": "text", "text": f"{city}: {temp} C, light wind"}],
            "structuredContent": {"city": city, "temperature": temp, "summary": "light wind"},
            "isError": False})
    w.close()
    return n


def time_lint(path: Path, rounds: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(rounds):
        start = time.perf_counter()
        result = lint([path], options=LintOptions(use_config=False))
        times.append(time.perf_counter() - start)
        found = len(result.findings)
        if found:
            for f in result.findings[:5]:
                print(f"  unexpected finding: seq {f.seq} {f.code} {f.message} at {f.path}")
    return statistics.median(times), found


def time_cli(path: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mcprec", "lint", str(path), "--format",
                           "json"], capture_output=True, cwd=path.parent, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        print(f"  CLI failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


# --- the libraries, on the schema rule's work alone ---------------------------------------------


def workload(path: Path) -> tuple[Any, list[tuple[str, Any]]]:
    """(the revision's Spec, [(definition, message)]) exactly as the schema rule checks them."""
    from mcprec.cassette import open_cassette
    from mcprec.lint.schemas import spec

    s = spec(VERSION)
    assert s is not None
    out, requests = [], {}
    with open_cassette(path) as c:
        for m in c.messages(c.session("bench")):
            obj = m.json
            if m.kind == "request":
                requests[m.rpc_id] = obj
                out.append((s.request_def(m.method), obj))
            elif m.kind == "notification":
                out.append((s.notification_def(m.method), obj))
            elif m.kind == "response":
                req = requests.get(m.rpc_id) or {}
                out.append((s.response_def(req.get("method"), req.get("params"),
                                           obj.get("result")), obj))
    return s, out


def time_libraries(path: Path) -> None:
    s, work = workload(path)
    names = sorted({d for d, _ in work})
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", s.key: s.defs}
    print(f"schema validation alone: {len(work):,} messages, {len(names)} definitions "
          f"({VERSION}); compile = all definitions used, validate = every message")

    def measure(label: str, compile_all: Any) -> None:
        try:
            start = time.perf_counter()
            checks = compile_all()
            compiled = time.perf_counter() - start
            start = time.perf_counter()
            bad = sum(not checks[d](obj) for d, obj in work)
            elapsed = time.perf_counter() - start
        except Exception as e:  # a library that cannot take the schema at all
            print(f"  {label:15s} failed: {type(e).__name__}: {str(e)[:120]}")
            return
        print(f"  {label:15s} compile {compiled * 1000:7.0f} ms   validate {elapsed * 1000:7.0f}"
              f" ms   ({elapsed / len(work) * 1e6:6.1f} µs/message, {bad} invalid)")

    try:
        import jsonschema_rs

        def rs() -> dict[str, Any]:
            m = jsonschema_rs.validator_map_for(schema, validate_formats=False)
            return {d: m.get(f"#/{s.key}/{d}").is_valid for d in names}

        measure("jsonschema-rs", rs)
    except ImportError:
        print("  jsonschema-rs   not installed")
    try:
        import fastjsonschema

        def fast() -> dict[str, Any]:
            out = {}
            for d in names:
                # fastjsonschema knows drafts 4, 6 and 7 only: the 2020-12 schema is given to it
                # as draft 7, which these schemas' keywords allow
                f = fastjsonschema.compile({"$schema": "http://json-schema.org/draft-07/schema#",
                                            s.key: s.defs, "$ref": f"#/{s.key}/{d}"},
                                           formats={k: ".*" for k in ("uri", "byte",
                                                    "uri-template", "date-time", "email")})

                def ok(obj: Any, f: Any = f) -> bool:
                    try:
                        f(obj)
                        return True
                    except fastjsonschema.JsonSchemaException:
                        return False
                out[d] = ok
            return out

        measure("fastjsonschema", fast)
    except ImportError:
        print("  fastjsonschema  not installed")
    try:
        import jsonschema

        def pure() -> dict[str, Any]:
            cls = jsonschema.validators.validator_for(schema)
            return {d: cls({**schema, "$ref": f"#/{s.key}/{d}"}).is_valid for d in names}

        measure("jsonschema", pure)
    except ImportError:
        print("  jsonschema      not installed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--libraries", action="store_true",
                    help="also compare the JSON Schema libraries on the schema rule's work")
    ap.add_argument("--keep", type=Path, help="build the cassette in this directory and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        path = where / "bench-lint.db"
        path.unlink(missing_ok=True)
        start = time.perf_counter()
        n = build(path, args.messages)
        print(f"built {n:,} messages ({path.stat().st_size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - start:.1f} s")
        elapsed, found = time_lint(path, args.rounds)
        verdict = "PASS" if elapsed < TARGET_S * n / 50_000 else "FAIL"
        print(f"lint(): {elapsed:.2f} s (median of {args.rounds}), "
              f"{elapsed / n * 1e6:.1f} µs/message, {found} finding(s)  "
              f"[{verdict}: target {TARGET_S:g} s per 50,000]")
        print(f"mcprec lint --format json (a fresh process): {time_cli(path):.2f} s")
        if args.libraries:
            time_libraries(path)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
