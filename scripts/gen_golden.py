#!/usr/bin/env python3
"""Regenerate the golden cassette, cassettes/golden/weather.db: the bundled example server
(examples/weather_server.py) recorded with the bundled example client, release 1 as session
``v1`` and release 2 (``--v2``) as session ``v2``.

    .venv/bin/python scripts/gen_golden.py            # rewrite cassettes/golden/weather.db
    .venv/bin/python scripts/gen_golden.py --out X.db # write elsewhere (the tests do)

Made deterministic: each session is recorded for real, exported with `mcprec export`, given
fixed times (one message a millisecond, in recorded order, from 2025-01-01T00:00:00Z: so its
latencies mean nothing) and a target relative to
the checkout, and imported into a fresh cassette with `mcprec import`. Run it again whenever
the cassette format changes (tests/project/test_golden.py says so).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "cassettes" / "golden" / "weather.db"
RELEASES = {"v1": [], "v2": ["--v2"]}
STARTED = "2025-01-01T00:00:00Z"
STEP_NS = 1_000_000


def mcprec() -> list[str]:
    return [sys.executable, "-m", "mcprec"]


def normalise(lines: list[bytes], target: list[str]) -> list[bytes]:
    """Fixed times (the n-th event of the session, message or stderr line, at n ms), a fixed
    start and end, a relative target: the same file from every run."""
    recs = [orjson.loads(line) for line in lines]
    # each event its own millisecond, in recorded order (ties: as exported, messages by seq)
    events = sorted((r[k]["t_ns"], i) for i, r in enumerate(recs) for k in ("m", "stderr") if k in r)
    for n, (_, i) in enumerate(events, 1):
        r = recs[i]
        r["m" if "m" in r else "stderr"]["t_ns"] = n * STEP_NS
    end_s = (len(events) + 1) * STEP_NS / 1e9
    for r in recs:
        if "session" in r:
            r["session"].update(started_at=STARTED, target=target,
                                ended_at=f"2025-01-01T00:00:{end_s:09.6f}Z")
    return [orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in recs]


def record(work: Path, name: str, flags: list[str]) -> list[bytes]:
    raw = work / f"{name}.db"
    server = [sys.executable, str(ROOT / "examples" / "weather_server.py"), *flags]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    subprocess.run([sys.executable, str(ROOT / "examples" / "weather_client.py"), "--",
                    *mcprec(), "record", "-c", str(raw), "-s", name, "--", *server],
                   check=True, capture_output=True, env=env, cwd=ROOT, timeout=120)
    dump = subprocess.run([*mcprec(), "export", str(raw), name], check=True,
                          capture_output=True, env=env, timeout=60).stdout
    return normalise(dump.splitlines(), ["python", "examples/weather_server.py", *flags])


def generate(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="mcprec-golden-") as tmp:
        work = Path(tmp)
        for name, flags in RELEASES.items():
            lines = record(work, name, flags)
            dump = work / f"{name}.jsonl"
            dump.write_bytes(b"\n".join(lines) + b"\n")
            fresh = work / "golden.db"
            subprocess.run([*mcprec(), "import", str(dump), str(fresh)], check=True,
                           capture_output=True, timeout=60)
        out.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{out}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(work / "golden.db", out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=GOLDEN, help="where to write the cassette")
    args = ap.parse_args()
    generate(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
