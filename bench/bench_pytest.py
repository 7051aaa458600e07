"""Benchmark: seconds per test for a pytest module whose 50 tests each talk to an MCP server.

    .venv/bin/python bench/bench_pytest.py [--tests N] [--rounds N]

The same module, run four ways in one temporary project, alternating over rounds (medians):

  live        each test launches bench/trivial_mcp_server.py (standard library only, the
              cheapest real server) with the SDK's ``stdio_client``;
  replay      each test replays its cassette through the pytest plugin (``mcprec_server``:
              ``mcprec replay`` launched by the SDK's ``stdio_client``), recorded once first
              with ``--mcprec-mode=once``;
  in-process  each test replays the same cassette with ``mcprec.testing.replay_streams``
              (no subprocess);
  empty       the same number of tests doing nothing: pytest's own cost, subtracted from the
              others to give the cost per test.

Each test initializes, calls one tool and checks its answer. A benchmark, not a test: exit 1
only when a pytest run fails.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

COMMON = '''
import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = {server!r}


async def call(read, write, i):
    async with ClientSession(read, write) as s:
        await s.initialize()
        result = await s.call_tool("echo", {{"i": i}})
        assert result.content[0].text == '{{"i": %d}}' % i
'''

MODULES = {
    "test_live.py": COMMON + '''

@pytest.mark.parametrize("i", range({n}))
def test_call(i):
    async def main():
        params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
        async with stdio_client(params) as (read, write):
            await call(read, write, i)
    anyio.run(main)
''',
    "test_replay.py": COMMON + '''

@pytest.mark.parametrize("i", range({n}))
@pytest.mark.mcprec(server=SERVER)
def test_call(i, mcprec_server):
    async def main():
        async with stdio_client(mcprec_server.params) as (read, write):
            await call(read, write, i)
    anyio.run(main)
''',
    "test_inprocess.py": COMMON + '''
from pathlib import Path

from mcprec.testing import replay_streams

CASSETTES = Path(__file__).parent / "cassettes" / "test_replay"


@pytest.mark.parametrize("i", range({n}))
def test_call(i):
    async def main():
        async with replay_streams(CASSETTES / f"test_call-{{i}}.db") as (read, write):
            await call(read, write, i)
    anyio.run(main)
''',
    "test_empty.py": '''
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_call(i):
    pass
''',
}

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
          "no:hypothesispytest", "-W", "ignore::DeprecationWarning"]


def run(project: Path, module: str, *extra: str) -> float:
    t = time.perf_counter()
    out = subprocess.run([*PYTEST, module, *extra], cwd=project, capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    elapsed = time.perf_counter() - t
    if out.returncode != 0:
        sys.stderr.write(out.stdout.decode()[-3000:] + out.stderr.decode()[-2000:])
        raise SystemExit(f"pytest {module} failed ({out.returncode})")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    compileall.compile_dir(str(REPO / "mcprec"), quiet=1)
    server = [sys.executable, str(HERE / "trivial_mcp_server.py")]
    with tempfile.TemporaryDirectory(prefix="mcprec-bench-pytest-") as tmp:
        project = Path(tmp)
        for name, text in MODULES.items():
            (project / name).write_text(text.format(server=server, n=args.tests))
        run(project, "test_replay.py", "--mcprec-mode=once")  # record the cassettes
        times: dict[str, list[float]] = {"live": [], "replay": [], "inprocess": [], "empty": []}
        order = list(times)
        for r in range(args.rounds):
            for name in order[r % 4:] + order[:r % 4]:
                times[name].append(run(project, f"test_{name}.py"))
    med = {k: statistics.median(v) for k, v in times.items()}
    per = {k: (v - med["empty"]) / args.tests for k, v in med.items() if k != "empty"}
    print(f"{args.tests} tests a module, {args.rounds} rounds, medians "
          f"(pytest's own cost, {med['empty']:.2f} s a run, subtracted):")
    print(f"  live (trivial stdio server)   {per['live'] * 1000:7.1f} ms a test")
    print(f"  replay (plugin, subprocess)   {per['replay'] * 1000:7.1f} ms a test   "
          f"{per['replay'] / per['live']:.2f}x live")
    print(f"  replay in-process             {per['inprocess'] * 1000:7.1f} ms a test   "
          f"{per['inprocess'] / per['live']:.2f}x live")


if __name__ == "__main__":
    main()
