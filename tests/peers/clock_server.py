"""A real MCP server (official Python SDK) that stamps its answers with the clock and fresh ids,
for mcprec's normalizer tests: two runs of the same calls differ only in timestamps, UUIDs and
order numbers, unless a variant changes something real.

Run: ``python tests/peers/clock_server.py`` (stdio).

Environment:
  MCPREC_TEST_CLOCK_VARIANT=v2   a "new release": ``create_order`` answers status "queued"
      instead of "accepted", and ``lookup``'s description changes (models read it).
  MCPREC_TEST_CLOCK_VARIANT=v3   ``lookup`` gains a required input ``region`` (breaking).
  MCPREC_TEST_CLOCK_VARIANT=v4   a tool ``today`` is added (compatible), nothing else changes.
  MCPREC_TEST_CLOCK_DELAY_MS=N   ``lookup`` answers N ms later (a latency regression).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import uuid
from datetime import datetime, timezone

from mcp.server import MCPServer

VARIANT = os.environ.get("MCPREC_TEST_CLOCK_VARIANT", "v1")

server = MCPServer(name="mcprec-clock-server", version="1.0.0",
                   instructions="Stamps every answer with the time and fresh ids.")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


@server.tool(description="The server's time, as ISO-8601 text and epoch numbers.")
def now() -> dict[str, object]:
    t = time.time()
    return {"iso": _now_iso(), "epoch": int(t), "epoch_ms": int(t * 1000), "float": t,
            "http": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(t))}


@server.tool(description="Create an order; it gets a fresh id, number and time.")
def create_order(item: str, quantity: int = 1) -> str:
    status = "queued" if VARIANT == "v2" else "accepted"
    body = {"id": str(uuid.uuid4()), "number": f"ORD-{random.randint(10000, 99999)}",
            "item": item, "quantity": quantity, "status": status, "created": _now_iso()}
    return f"order {body['number']} ({body['id']}) {status} at {body['created']}\n" + json.dumps(
        body)


if VARIANT == "v3":

    @server.tool(description="Look up a record by its id.")
    def lookup(id: str, at: str, region: str) -> str:
        return f"record {id[:4]} in {region}"

else:

    @server.tool(description=("Look up a record by its id (and the time the client asked)."
                              if VARIANT == "v2" else "Look up a record by its id."))
    def lookup(id: str, at: str) -> str:
        """The answer depends on neither the id nor the time: a client sends fresh ones."""
        time.sleep(float(os.environ.get("MCPREC_TEST_CLOCK_DELAY_MS", "0")) / 1000)
        return "record found"


if VARIANT == "v4":

    @server.tool(description="Today's date.")
    def today() -> str:
        return datetime.now(timezone.utc).date().isoformat()


if __name__ == "__main__":
    print(f"mcprec clock server {VARIANT} starting", file=sys.stderr, flush=True)
    server.run("stdio")
