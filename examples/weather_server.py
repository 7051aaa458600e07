"""The bundled example: a small weather MCP server built on the official Python SDK.

    python examples/weather_server.py            # release 1
    python examples/weather_server.py --v2       # release 2, for `mcprec diff` / `mcprec verify`

Release 2 changes on purpose: the forecast text, a removed tool (``alerts``), a new required
parameter (``forecast.units``), a reworded description, and a slower ``report`` tool.
"""

from __future__ import annotations

import sys
import warnings

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import SamplingMessage, TextContent

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # sampling/logging in 2026

V2 = "--v2" in sys.argv[1:]
CITIES = {"paris": (18, "sunny"), "oslo": (4, "snow"), "lima": (22, "cloudy")}

server = MCPServer(
    name="weather",
    version="2.0.0" if V2 else "1.0.0",
    instructions="Forecasts for a few cities. Try forecast(city='Paris').",
)


def _lookup(city: str) -> tuple[int, str]:
    found = CITIES.get(city.lower())
    if found is None:
        raise ValueError(f"unknown city {city!r}; known: {', '.join(sorted(CITIES))}")
    return found


if V2:

    @server.tool(description="Tomorrow's forecast for a city, in the units you ask for.")
    def forecast(city: str, units: str) -> str:
        temp, sky = _lookup(city)
        if units == "F":
            return f"{city.title()}: {sky}, {temp * 9 // 5 + 32} °F"
        return f"{city.title()}: {sky}, {temp} °C"

else:

    @server.tool(description="Tomorrow's forecast for a city.")
    def forecast(city: str) -> str:
        temp, sky = _lookup(city)
        return f"{city.title()}: {sky}, {temp} °C"

    @server.tool(description="Weather alerts for a city.")
    def alerts(city: str) -> list[str]:
        _lookup(city)
        return ["storm warning"] if city.lower() == "oslo" else []


@server.tool(description="Compile a report on all cities, with progress." if not V2 else
             "Compile a detailed report on all cities, with progress.")
async def report(ctx: Context) -> str:
    lines = []
    for i, (city, (temp, sky)) in enumerate(sorted(CITIES.items()), 1):
        await anyio.sleep(0.05 if V2 else 0.01)
        await ctx.report_progress(i, len(CITIES), f"{city} done")
        await ctx.info(f"report: added {city}")
        lines.append(f"{city.title()}: {sky}, {temp} °C")
    return "\n".join(lines)


@server.tool(description="Ask the client's model for a packing tip (uses sampling).")
async def packing_tip(city: str, ctx: Context) -> str:
    temp, sky = _lookup(city)
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(
            type="text", text=f"One packing tip for {city}: {sky}, {temp} °C."))],
        max_tokens=50,
    )
    content = result.content
    return content.text if isinstance(content, TextContent) else str(content)


@server.resource("weather://cities", name="cities", mime_type="application/json")
def cities() -> str:
    import json

    return json.dumps(sorted(CITIES))


@server.resource("weather://city/{name}", name="city", mime_type="text/plain")
def city(name: str) -> str:
    temp, sky = _lookup(name)
    return f"{name.title()}: {sky}, {temp} °C"


@server.prompt(description="Plan a trip around the weather.")
def plan_trip(city: str, days: str = "3") -> str:
    return f"Plan a {days}-day trip to {city}, taking tomorrow's forecast into account."


if __name__ == "__main__":
    server.run("stdio")
