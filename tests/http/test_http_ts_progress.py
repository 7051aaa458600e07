"""The TypeScript SDK client over HTTP gets every progress callback from replay: over legacy
HTTP+SSE an answer goes out apart from the progress written before it (the SDK handles an
answer at once, notifications a tick later), and over Streamable HTTP as each event."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.helpers import PEERS
from support.http_helpers import start_everything, start_proxy, start_replay

from mcprec.cassette import open_cassette

CLIENT = PEERS / "ts_http_progress_client.mjs"


def _progress(kind: str, url: str) -> list[float]:
    out = subprocess.run(["node", str(CLIENT), kind, url], capture_output=True, text=True,
                         timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["text"].startswith("Long running operation completed")
    return list(got["progress"])


@pytest.mark.parametrize("mode", ["sse", "streamableHttp"])
def test_typescript_client_gets_every_progress_from_replay(tmp_path: Path, mode: str) -> None:
    """Recorded through the proxy from server-everything, replayed 3 times: the client gets
    each recorded progress notification (live, at most the one racing the answer is lost)."""
    kind = "sse" if mode == "sse" else "streamable"
    cassette = tmp_path / "ts.db"
    upstream = start_everything(mode)
    try:
        proxy = start_proxy(upstream.url, cassette, "s")
        try:
            live = _progress(kind, proxy.url)
        finally:
            proxy.stop()
    finally:
        upstream.stop()
    with open_cassette(cassette) as c:
        recorded = [m.json["params"]["progress"] for m in c.messages(c.session("s"))
                    if m.method == "notifications/progress"]
    assert len(recorded) == 5 and live == recorded[:len(live)] and len(live) >= 4
    replay = start_replay(cassette, "s")
    try:
        url = replay.url[: -len("/mcp")] + "/sse" if mode == "sse" else replay.url
        for _ in range(3):
            assert _progress(kind, url) == recorded
    finally:
        replay.stop()
