"""Replay writes as the recorded server wrote: an answer never shares a write (nor a read) with
the notifications before it, so a TypeScript SDK client sees every progress callback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.helpers import EVERYTHING_DIR, MCPREC, PEERS

TS_CLIENT = PEERS / "ts_progress_client.mjs"


def _client(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(["node", str(TS_CLIENT), *argv], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_typescript_client_gets_every_progress_from_stdio_replay(tmp_path: Path) -> None:
    """Five replays at the default timing give the progress callbacks the live run gave."""
    cassette = tmp_path / "progress.db"
    live = _client([*MCPREC, "record", "-c", str(cassette), "-s", "p", "--", "node",
                    str(EVERYTHING_DIR / "dist" / "index.js"), "stdio"])
    # live, the progress that races the answer may be lost; the recording holds all five
    assert live["progress"] in ([1, 2, 3, 4], [1, 2, 3, 4, 5])
    for _ in range(5):
        replayed = _client([sys.executable, "-m", "mcprec", "replay", str(cassette), "-s", "p"])
        assert replayed == {**live, "progress": [1, 2, 3, 4, 5]}
