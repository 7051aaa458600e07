"""Tool rules: calls against the tool's inputSchema, results against its outputSchema (both
as listed earlier in the session), and error results shaped as the spec asks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from .. import wire
from .model import rule
from .schemas import compile_user_schema, explain
from .walk import Checker, Item

ARGUMENTS = rule("TOOL001", "tool-arguments", "protocol", "error",
                 "tools/call arguments that break the tool's inputSchema.")
STRUCTURED = rule("TOOL002", "structured-content", "protocol", "error",
                  "structuredContent that breaks the tool's outputSchema.")
MISSING_STRUCTURED = rule("TOOL003", "structured-content-missing", "protocol", "error",
                          "A successful result of a tool with an outputSchema, without "
                          "structuredContent.")
ERROR_SHAPE = rule("TOOL004", "error-result-shape", "protocol", "warning",
                   "A result with isError: true and no content saying what went wrong.")
UNLISTED = rule("TOOL005", "unlisted-tool", "protocol", "info",
                "tools/call of a tool the session's tools/list did not list.")
BAD_SCHEMA = rule("TOOL006", "tool-schema", "protocol", "error",
                  "A listed tool whose inputSchema or outputSchema is not a usable JSON Schema.")


@dataclass
class Tool:
    definition: dict[str, Any]
    seq: int
    path: str
    input: Any = None
    output: Any = None


class ToolsChecker(Checker):
    codes: ClassVar[frozenset[str]] = frozenset({ARGUMENTS, STRUCTURED, MISSING_STRUCTURED,
                                                 ERROR_SHAPE, UNLISTED, BAD_SCHEMA})

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.tools: dict[str, Tool] = {}
        self.listed = False
        self._compiled: dict[bytes, Any] = {}

    def message(self, item: Item) -> None:
        if item.kind == wire.RESPONSE and item.request is not None and not item.answered_before:
            if item.method == "tools/list":
                self._listed(item)
            elif item.method == "tools/call":
                self._result(item)
        elif item.kind == wire.REQUEST and item.method == "tools/call":
            self._call(item)

    def _validator(self, schema: Any) -> Any:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        v = self._compiled.get(key)
        if v is None:
            try:
                v = compile_user_schema(schema)
            except ValueError as e:
                v = str(e)  # why it is not usable
            self._compiled[key] = v
        return v

    def _listed(self, item: Item) -> None:
        tools = item.result.get("tools") if isinstance(item.result, dict) else None
        if not isinstance(tools, list):
            return
        self.listed = True
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                continue
            tool = Tool(t, item.seq, item.path("result", "tools", i))
            for field in ("inputSchema", "outputSchema"):
                schema = t.get(field)
                if schema is None:
                    continue
                v = self._validator(schema)
                if isinstance(v, str):
                    self.ctx.report(BAD_SCHEMA, item, f"tool {t['name']!r}: {field} is not a "
                                    f"usable JSON Schema: {v}",
                                    item.path("result", "tools", i, field))
                    v = None
                setattr(tool, "input" if field == "inputSchema" else "output", v)
            self.tools[t["name"]] = tool

    def _call(self, item: Item) -> None:
        params = item.params if isinstance(item.params, dict) else {}
        name = params.get("name")
        if not isinstance(name, str):
            return
        tool = self.tools.get(name)
        if tool is None:
            if self.listed:
                self.ctx.report(UNLISTED, item, f"tools/call of {name!r}, which tools/list did "
                                "not list", item.path("params", "name"))
            return
        if tool.input is None:
            return
        arguments = params.get("arguments", {})
        if tool.input.is_valid(arguments):
            return
        for p in explain(tool.input, arguments):
            self.ctx.report(ARGUMENTS, item, f"argument of {name!r}: {p.message} (inputSchema "
                            f"listed at seq {tool.seq})",
                            item.path("params", "arguments", *p.steps))

    def _result(self, item: Item) -> None:
        result = item.result
        req = item.request
        if not isinstance(result, dict) or req is None or not isinstance(req.params, dict):
            return
        if result.get("resultType", "complete") != "complete" or "task" in req.params:
            return  # input_required (2026-07-28), or a task's handle (2025-11-25)
        name = req.params.get("name")
        if result.get("isError") is True:
            content = result.get("content")
            if not isinstance(content, list) or not content:
                self.ctx.report(ERROR_SHAPE, item, f"an error result of {name!r} with no "
                                "content to say what went wrong", item.path("result"))
            return
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None or "outputSchema" not in tool.definition:
            return
        if "structuredContent" not in result:
            self.ctx.report(MISSING_STRUCTURED, item, f"{name!r} declares an outputSchema "
                            f"(listed at seq {tool.seq}) but its result has no "
                            "structuredContent", item.path("result"))
            return
        if tool.output is None or tool.output.is_valid(result["structuredContent"]):
            return
        for p in explain(tool.output, result["structuredContent"]):
            self.ctx.report(STRUCTURED, item, f"structuredContent of {name!r}: {p.message} "
                            f"(outputSchema listed at seq {tool.seq})",
                            item.path("result", "structuredContent", *p.steps))
