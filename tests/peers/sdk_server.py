"""A real MCP server built on the official Python SDK, used as a peer in mcprec's tests.

Run: ``python tests/peers/sdk_server.py`` (stdio). Deterministic: the same calls give the same
bytes, except for the ``counter`` tool, whose result changes on every call on purpose.

Environment:
  MCPREC_TEST_SERVER_VARIANT=v2   a "new release" of this server, for diff tests:
      - ``forecast`` returns a different result
      - ``legacy`` is removed, ``fresh`` is added
      - ``greet`` gains a required parameter ``greeting``
      - ``add`` has a different description
      - ``slow`` waits five times longer per step
      - serverInfo.version is 2.0.0
  MCPREC_TEST_SERVER_PAGE_SIZE=N  page tools/resources/prompts/templates lists, N items a page
      (the SDK has no page size of its own; a middleware slices the lists and sets nextCursor)
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import SamplingMessage, TextContent

# logging and sampling are deprecated in the 2026-07-28 revision, still in use in 2025-11-25
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

VARIANT = os.environ.get("MCPREC_TEST_SERVER_VARIANT", "v1")
V2 = VARIANT == "v2"
PAGE_SIZE = int(os.environ.get("MCPREC_TEST_SERVER_PAGE_SIZE", "0") or 0)
DOC_COUNT = 12  # enough static resources to need several pages

_PAGED_FIELDS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


async def paginate(ctx: Any, call_next: Any) -> Any:
    """Serve list results in pages of PAGE_SIZE; the cursor is the index of the next item."""
    result = await call_next(ctx)
    field = _PAGED_FIELDS.get(ctx.method)
    if not PAGE_SIZE or field is None or result is None:
        return result
    if not isinstance(result, dict):  # a model: page its wire form
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    cursor = (ctx.params or {}).get("cursor")
    start = int(cursor) if cursor else 0
    end = start + PAGE_SIZE
    paged = {**result, field: result[field][start:end]}
    if end < len(result[field]):
        paged["nextCursor"] = str(end)
    return paged


server = MCPServer(
    name="mcprec-test-server",
    version=os.environ.get("MCPREC_TEST_SERVER_VERSION") or ("2.0.0" if V2 else "1.0.0"),
    instructions="A deterministic server for mcprec's tests.",
    middleware=[paginate],
)

# --- tools ------------------------------------------------------------------------------------


@server.tool(
    description="Add two integers and return the sum." if V2 else "Add two integers."
)
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


_calls = {"counter": 0}


@server.tool(description="Count the calls: each identical call returns the next number.")
def counter() -> str:
    _calls["counter"] += 1
    return f"call {_calls['counter']}"


@server.tool(description="Tomorrow's weather for a city.")
def forecast(city: str) -> str:
    return f"{city}: {'rain, 12 C' if V2 else 'sunny, 21 C'}"


if V2:

    @server.tool(description="Greet someone.")
    def greet(name: str, greeting: str) -> str:
        return f"{greeting}, {name}!"

    @server.tool(description="A tool that only v2 has.")
    def fresh() -> str:
        return "new in v2"

else:

    @server.tool(description="Greet someone.")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @server.tool(description="A tool that only v1 has.")
    def legacy() -> str:
        return "old in v1"


@server.tool(description="Work in steps, reporting progress and logging each step.")
async def slow(ctx: Context, steps: int = 3, delay_ms: int = 20) -> str:
    delay = delay_ms / 1000 * (5 if V2 else 1)
    for i in range(1, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
        await ctx.info(f"slow: finished step {i}")
    return f"done after {steps} steps"


@server.tool(description="Ask the client's model a question (sampling) and return its answer.")
async def ask_model(question: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50,
        system_prompt="Answer briefly.",
    )
    content = result.content
    text = content.text if isinstance(content, TextContent) else repr(content)
    return f"model {result.model} said: {text}"


@server.tool(description="Return a payload of exactly `size` bytes of text.")
def payload(size: int) -> str:
    pattern = "0123456789abcdefghijklmnopqrstuvwxyz"
    return (pattern * (size // len(pattern) + 1))[:size]


@server.tool(description="Write a line to stderr and return.")
def complain(text: str) -> str:
    print(f"complaint: {text}", file=sys.stderr, flush=True)
    return "noted"


# --- resources --------------------------------------------------------------------------------


@server.resource("test://static/hello", name="hello", mime_type="text/plain",
                 description="A fixed greeting.")
def hello() -> str:
    return "Hello from the test server."


@server.resource("test://static/config", name="config", mime_type="application/json")
def config() -> dict[str, Any]:
    return {"variant": VARIANT, "features": ["tools", "resources", "prompts"]}


def _doc(i: int) -> None:
    @server.resource(f"test://docs/{i:02d}", name=f"doc-{i:02d}", mime_type="text/plain")
    def doc() -> str:
        return f"document number {i}"


for _i in range(DOC_COUNT):
    _doc(_i)


@server.resource("test://items/{item_id}", name="item", mime_type="text/plain",
                 description="An item by id.")
def item(item_id: str) -> str:
    return f"item {item_id}"


@server.resource("test://users/{user}/notes/{note}", name="note", mime_type="text/plain")
def note(user: str, note: str) -> str:
    return f"note {note} of {user}"


# --- prompts ----------------------------------------------------------------------------------


@server.prompt(description="Ask for a code review.")
def review(code: str) -> str:
    return f"Please review this code:\n\n{code}"


@server.prompt(description="A friendly opener.")
def opener(name: str, mood: str = "cheerful") -> str:
    return f"Say hello to {name} in a {mood} way."


if __name__ == "__main__":
    print(f"mcprec test server {VARIANT} starting", file=sys.stderr, flush=True)
    server.run("stdio")
