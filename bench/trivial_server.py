"""A trivial live MCP-style server, written the way a small Python stdio server usually is:
asyncio streams, the standard library's json, one answer per request line. The baseline for
``bench_replay.py`` ("replay must answer at least 0.6x as fast as a trivial live server").

For every request it answers with a result echoing the request's params; notifications get no
answer. Exits on stdin EOF.
"""

from __future__ import annotations

import asyncio
import json
import sys


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    while line := await reader.readline():
        msg = json.loads(line)
        if "id" in msg and "method" in msg:
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": msg.get("params")}
            writer.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
            await writer.drain()


if __name__ == "__main__":
    asyncio.run(main())
