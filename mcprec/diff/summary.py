"""The MCP-aware summary: server facts from initialize, catalogs from the */list answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cassette import Message
from .load import Side
from .model import SEVERITIES, Category, Change, Summary
from .paths import plain
from .severity import classify
from .schema_compat import (
    compare_prompts,
    compare_resources,
    compare_server,
    compare_templates,
    compare_tools,
)

Answer = Callable[[Side, Message], Any]
"""The comparable form of a request's answer (``{"result": ...}`` or ``{"error": ...}``)."""

HANDSHAKES = ("initialize", "server/discover")
CATALOGS: tuple[tuple[str, str, str, Category, Callable[..., list[Change]]], ...] = (
    ("tools/list", "tools", "name", "tool", compare_tools),
    ("resources/list", "resources", "uri", "resource", compare_resources),
    ("resources/templates/list", "resourceTemplates", "uriTemplate", "resource_template",
     compare_templates),
    ("prompts/list", "prompts", "name", "prompt", compare_prompts),
)
SUMMARIZED_METHODS = frozenset({*HANDSHAKES, *(c[0] for c in CATALOGS)})
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def build_summary(a: Side, b: Side, answer: Answer) -> Summary:
    """Server facts and catalog changes; a catalog is compared only when both sides listed it."""
    facts_a, facts_b = server_facts(a, answer), server_facts(b, answer)
    summary = Summary(facts_a, facts_b)
    summary.changes.extend(compare_server(facts_a, facts_b))
    for method, field, key, category, compare in CATALOGS:
        items_a, items_b = catalog(a, answer, method, field, key), catalog(b, answer, method,
                                                                          field, key)
        if items_a is None and items_b is None:
            continue
        if items_a is None or items_b is None:
            only = "B" if items_a is None else "A"
            summary.notes.append(f"{method} was answered only in {only}: "
                                 f"{category.replace('_', ' ')}s not compared")
            continue
        summary.changes.extend(compare(items_a, items_b))
    summary.changes = sorted((classify(c) for c in summary.changes), key=_order)
    return summary


def _order(c: Change) -> tuple[int, int, str, str]:
    rank = ("server", "tool", "resource", "resource_template", "prompt").index(c.category)
    return (rank, SEVERITIES.index(c.severity), c.name, c.kind)


def server_facts(side: Side, answer: Answer) -> dict[str, Any]:
    """protocolVersion, serverInfo, capabilities, instructions: from the handshake's answer
    (ignores applied), else from the session row."""
    s = side.session
    for request in side.requests:
        if request.method in HANDSHAKES:
            result = (answer(side, request) or {}).get("result")
            if isinstance(result, dict):
                facts = _facts(result)
                if facts["serverInfo"] is None:  # server/discover: in the protocol's _meta,
                    # which the comparable form leaves out (reported here, once)
                    facts["serverInfo"] = plain(_meta_server_info(side, request)
                                                or s.server_info)
                return facts
    return {"protocolVersion": s.protocol_version, "serverInfo": s.server_info,
            "capabilities": s.server_capabilities, "instructions": s.instructions}


def _meta_server_info(side: Side, request: Message) -> Any:
    message = side.answers.get(request.seq)
    obj = message.json if message is not None else None
    result = obj.get("result") if isinstance(obj, dict) else None
    meta = result.get("_meta") if isinstance(result, dict) else None
    return meta.get(SERVER_INFO_META) if isinstance(meta, dict) else None


def _facts(result: dict[str, Any]) -> dict[str, Any]:
    info = result.get("serverInfo")
    meta = result.get("_meta")
    if info is None and isinstance(meta, dict):  # server/discover (2026-07-28)
        info = meta.get(SERVER_INFO_META)
    version = result.get("protocolVersion", result.get("supportedVersions"))
    return {"protocolVersion": plain(version), "serverInfo": plain(info),
            "capabilities": plain(result.get("capabilities")),
            "instructions": plain(result.get("instructions"))}


def catalog(side: Side, answer: Answer, method: str, field: str,
            key: str) -> dict[str, Any] | None:
    """The items of every page of every ``method`` answer, by ``key`` (later pages win);
    None when the session has no successful answer to ``method``."""
    items: dict[str, Any] | None = None
    for request in side.requests:
        if request.method != method:
            continue
        result = (answer(side, request) or {}).get("result")
        if not isinstance(result, dict):
            continue
        items = {} if items is None else items
        for item in result.get(field) or ():
            if isinstance(item, dict) and isinstance(item.get(key), str):
                items[item[key]] = plain(item)
    return items
