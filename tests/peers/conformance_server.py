"""An MCP server with the tools, resources and prompts that the official conformance suite
(``@modelcontextprotocol/conformance``, ``server`` mode) expects, on the Python SDK's low-level
``Server`` over Streamable HTTP: a peer for tests/replay/test_conformance.py.

The suite's own reference server (``everything-server.ts`` in its repository) is not published
in any package, so this one is written here, from the requirements the suite states (its
``SERVER_REQUIREMENTS.md`` and the description of each scenario). The live run of the suite
judges it: the tests count only what passed live.

Run: ``python tests/peers/conformance_server.py [--port N]``. It binds 127.0.0.1 (port 0 by
default: a free port) and, once it accepts connections, prints its endpoint URL as the first line
on stdout. Events are kept in memory (SSE event ids, priming events, ``retry``), so a stream
the server closes mid-call can be resumed with ``Last-Event-ID`` (scenario server-sse-polling).

Deterministic: no timers. ``test://watched-resource`` "changes" once, right when it is
subscribed to (one ``notifications/resources/updated`` on the subscribe request's stream).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import socket
import struct
import warnings
import weakref
import zlib
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning

from http_server import MemoryEventStore  # tests/peers is this script's sys.path[0]

# logging, sampling and progress are deprecated in the 2026-07-28 revision, in use in 2025-11-25
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LOGGER = "mcprec-conformance-peer"
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def _png_1x1_red() -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _wav_silence() -> str:
    rate, samples = 8000, 80  # 10 ms of 8-bit mono silence
    data = b"\x80" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(body)) + body).decode()


PNG = _png_1x1_red()
WAV = _wav_silence()

# --- catalogue --------------------------------------------------------------------------------

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGS)


def _one_string(name: str, description: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string", "description": description}},
            "required": [name]}


TOOLS = [
    _tool("test_simple_text", "Returns simple text content"),
    _tool("test_image_content", "Returns image content (a 1x1 PNG)"),
    _tool("test_audio_content", "Returns audio content (a short WAV)"),
    _tool("test_embedded_resource", "Returns an embedded resource"),
    _tool("test_multiple_content_types", "Returns text, image and resource content"),
    _tool("test_tool_with_logging", "Logs three messages while it runs"),
    _tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100"),
    _tool("test_error_handling", "Always fails (isError result)"),
    _tool("test_sampling", "Asks the client's model (sampling)",
          _one_string("prompt", "The prompt to send to the model")),
    _tool("test_elicitation", "Asks the user for input (elicitation)",
          _one_string("message", "The message to show the user")),
    _tool("test_elicitation_sep1034_defaults", "Elicitation whose fields have defaults"),
    _tool("test_elicitation_sep1330_enums", "Elicitation with the five kinds of enum"),
    _tool("test_reconnection", "Closes its SSE stream mid-call; the result comes on resumption"),
    _tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    }),
]

STATIC_TEXT = "This is the content of the static text resource."
WATCHED_TEXT = "Watched resource content"
RESOURCES = [
    types.Resource(uri="test://static-text", name="Static Text Resource",
                   description="A static text resource for testing", mime_type="text/plain"),
    types.Resource(uri="test://static-binary", name="Static Binary Resource",
                   description="A static binary resource (image) for testing",
                   mime_type="image/png"),
    types.Resource(uri="test://watched-resource", name="Watched Resource",
                   description="A resource that can be subscribed to", mime_type="text/plain"),
]
TEMPLATES = [
    types.ResourceTemplate(uri_template="test://template/{id}/data", name="Resource Template",
                           description="A resource template with parameter substitution",
                           mime_type="application/json"),
]
TEMPLATE_URI = re.compile(r"^test://template/([^/]+)/data$")

PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(name="test_prompt_with_arguments", description="A prompt with required arguments",
                 arguments=[types.PromptArgument(name="arg1", description="First test argument",
                                                 required=True),
                            types.PromptArgument(name="arg2", description="Second test argument",
                                                 required=True)]),
    types.Prompt(name="test_prompt_with_embedded_resource",
                 description="A prompt that embeds a resource",
                 arguments=[types.PromptArgument(name="resourceUri",
                                                 description="URI of the resource to embed",
                                                 required=True)]),
    types.Prompt(name="test_prompt_with_image", description="A prompt with image content"),
]

COMPLETIONS = {"arg1": ["paris", "park", "party", "test", "testing"],
               "arg2": ["alpha", "beta", "gamma"]}

# --- per-session state (keyed by the SDK's session object) ---------------------------------

_log_level: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


async def _log(ctx: Any, level: str, data: str) -> None:
    wanted = _log_level.get(ctx.session, "debug")
    if LEVELS.index(level) >= LEVELS.index(wanted):
        await ctx.session.send_log_message(level=level, data=data, logger=LOGGER,
                                           related_request_id=ctx.request_id)


def _progress_token(ctx: Any, params: Any) -> Any:
    for meta in (getattr(params, "meta", None), getattr(ctx, "meta", None)):
        if meta:
            token = meta.get("progress_token", meta.get("progressToken"))
            if token is not None:
                return token
    return None


# --- handlers ---------------------------------------------------------------------------------


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    content: list[Any]
    if name == "test_simple_text":
        content = [_text("This is a simple text response for testing.")]
    elif name == "test_image_content":
        content = [types.ImageContent(type="image", data=PNG, mime_type="image/png")]
    elif name == "test_audio_content":
        content = [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
    elif name == "test_embedded_resource":
        content = [types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain",
            text="This is an embedded resource content."))]
    elif name == "test_multiple_content_types":
        content = [
            _text("Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                uri="test://mixed-content-resource", mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")))),
        ]
    elif name == "test_tool_with_logging":
        await _log(ctx, "info", "Tool execution started")
        await anyio.sleep(0.05)
        await _log(ctx, "info", "Tool processing data")
        await anyio.sleep(0.05)
        await _log(ctx, "info", "Tool execution completed")
        content = [_text("Tool with logging executed successfully")]
    elif name == "test_tool_with_progress":
        token = _progress_token(ctx, params)
        for i, step in enumerate((0, 50, 100)):
            if i:
                await anyio.sleep(0.05)
            if token is not None:
                await ctx.session.send_progress_notification(
                    token, step, 100, related_request_id=ctx.request_id)
        content = [_text("Tool with progress executed successfully")]
    elif name == "test_error_handling":
        return types.CallToolResult(
            content=[_text("This tool intentionally returns an error for testing")], is_error=True)
    elif name == "test_sampling":
        result = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=_text(str(args.get("prompt", ""))))],
            max_tokens=100, related_request_id=ctx.request_id)
        answer = result.content.text if isinstance(result.content, types.TextContent) else "?"
        content = [_text(f"LLM response: {answer}")]
    elif name == "test_elicitation":
        result = await ctx.session.elicit_form(str(args.get("message", "")), {
            "type": "object",
            "properties": {"username": {"type": "string", "description": "User's response"},
                           "email": {"type": "string", "description": "User's email address"}},
            "required": ["username", "email"],
        }, related_request_id=ctx.request_id)
        content = [_text(f"User response: action={result.action}, "
                         f"content={json.dumps(result.content, sort_keys=True)}")]
    elif name == "test_elicitation_sep1034_defaults":
        result = await ctx.session.elicit_form("Please review these values", {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"],
                           "default": "active"},
                "verified": {"type": "boolean", "default": True},
            },
        }, related_request_id=ctx.request_id)
        content = [_text(f"Elicitation completed: action={result.action}, "
                         f"content={json.dumps(result.content, sort_keys=True)}")]
    elif name == "test_elicitation_sep1330_enums":
        def titled(values: list[tuple[str, str]]) -> list[dict[str, str]]:
            return [{"const": c, "title": t} for c, t in values]

        result = await ctx.session.elicit_form("Please choose", {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": titled(
                    [("value1", "First Option"), ("value2", "Second Option"),
                     ("value3", "Third Option")])},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                               "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {
                    "type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled(
                    [("value1", "First Choice"), ("value2", "Second Choice"),
                     ("value3", "Third Choice")])}},
            },
        }, related_request_id=ctx.request_id)
        content = [_text(f"Elicitation completed: action={result.action}, "
                         f"content={json.dumps(result.content, sort_keys=True)}")]
    elif name == "test_reconnection":
        await anyio.sleep(0.05)
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        content = [_text("Reconnection test completed")]
    elif name == "json_schema_2020_12_tool":
        content = [_text(f"Hello {args.get('name', 'nobody')}")]
    else:
        return types.CallToolResult(content=[_text(f"Unknown tool: {name}")], is_error=True)
    return types.CallToolResult(content=content)


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    contents: Any
    if uri == "test://static-text":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=WATCHED_TEXT)
    elif m := TEMPLATE_URI.match(uri):
        ident = m.group(1)
        text = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"},
                          separators=(",", ":"))
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
    else:
        from mcp.shared.exceptions import MCPError

        raise MCPError(code=-32002, message=f"Resource not found: {uri}")
    return types.ReadResourceResult(contents=[contents])


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    await ctx.session.send_notification(
        types.ResourceUpdatedNotification(
            params=types.ResourceUpdatedNotificationParams(uri=str(params.uri))),
        related_request_id=ctx.request_id)
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    name, args = params.name, params.arguments or {}
    user: Literal["user"] = "user"
    if name == "test_simple_prompt":
        messages = [types.PromptMessage(role=user, content=_text("This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
        messages = [types.PromptMessage(role=user, content=_text(text))]
    elif name == "test_prompt_with_embedded_resource":
        resource = types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri=args.get("resourceUri", "test://example-resource"), mime_type="text/plain",
            text="Embedded resource content for testing."))
        messages = [types.PromptMessage(role=user, content=resource),
                    types.PromptMessage(role=user,
                                        content=_text("Please process the embedded resource above."))]
    elif name == "test_prompt_with_image":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        messages = [types.PromptMessage(role=user, content=image),
                    types.PromptMessage(role=user, content=_text("Please analyze the image above."))]
    else:
        from mcp.shared.exceptions import MCPError

        raise MCPError(code=-32602, message=f"Unknown prompt: {name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    prefix = params.argument.value
    values = [v for v in COMPLETIONS.get(params.argument.name, []) if v.startswith(prefix)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values),
                                                            has_more=False))


async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    _log_level[ctx.session] = params.level
    return types.EmptyResult()


server = Server(
    name="mcprec-conformance-peer", version="1.0.0",
    on_list_tools=list_tools, on_call_tool=call_tool,
    on_list_resources=list_resources, on_list_resource_templates=list_templates,
    on_read_resource=read_resource, on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
    on_list_prompts=list_prompts, on_get_prompt=get_prompt,
    on_completion=complete, on_set_logging_level=set_level,
)


async def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    app = server.streamable_http_app(host="127.0.0.1", event_store=MemoryEventStore(),
                                     retry_interval=100)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=1)
    srv = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(srv.serve(sockets=[sock]))
    while not srv.started and not task.done():
        await asyncio.sleep(0.01)
    if srv.started:
        print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
