"""The bundled example client: drives a weather server and prints what it saw, as JSON.

    python examples/weather_client.py -- COMMAND [ARGS...]

COMMAND is the server to launch: the real one, ``mcprec record ... -- <real one>``, or
``mcprec replay CASSETTE``. The output is the same in all three cases; that is the point.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CreateMessageResult, TextContent

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", exclude_unset=True, by_alias=True)


async def run(command: list[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {"log": [], "progress": [], "sampling": []}

    async def on_log(params: Any) -> None:
        seen["log"].append(dump(params))

    async def on_sampling(context: Any, params: Any) -> CreateMessageResult:
        seen["sampling"].append(dump(params))
        return CreateMessageResult(role="assistant", model="example-model",
                                   content=TextContent(type="text", text="Bring an umbrella."))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen["progress"].append([progress, total, message])

    params = StdioServerParameters(command=command[0], args=command[1:],
                                   env=get_default_environment())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log,
                                 sampling_callback=on_sampling) as session:
            init = await session.initialize()
            out: dict[str, Any] = {"server": dump(init.server_info)}
            out["tools"] = [dump(t) for t in (await session.list_tools()).tools]
            out["forecast"] = dump(await session.call_tool("forecast", {"city": "Paris"}))
            out["forecast_again"] = dump(await session.call_tool("forecast", {"city": "Oslo"}))
            out["report"] = dump(await session.call_tool(
                "report", {}, progress_callback=on_progress))
            out["packing_tip"] = dump(await session.call_tool("packing_tip", {"city": "Lima"}))
            out["resources"] = [dump(r) for r in (await session.list_resources()).resources]
            out["cities"] = dump(await session.read_resource("weather://cities"))
            out["prompt"] = dump(await session.get_prompt("plan_trip", {"city": "Oslo"}))
    out.update(seen)
    return out


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: weather_client.py -- SERVER_COMMAND [ARGS...]")
    print(json.dumps(asyncio.run(run(args)), indent=2, sort_keys=True, ensure_ascii=False))


if __name__ == "__main__":
    main()
