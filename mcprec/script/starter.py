"""``mcprec script --init``: a first scenario for a server, from what the server lists.

mcprec connects as the scenario's client would (same capabilities), reads every page of the
tool, prompt, resource and template lists, and asks the server's own completions for prompt
arguments and template variables when it offers them. Tool arguments come from each input
schema (``default``, ``examples``, ``const``, ``enum``, else a typed placeholder marked
``choose``). Tools that say they are destructive or reach the outside world are written
commented out: a recording should not delete files or depend on the network by surprise.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..naming import endpoint_slug, server_slug
from .client import ScriptedClient, StepFailed
from .examples import Example, array, example, table
from .links import http_server, tapped_server
from .scenario import DEFAULT_PROTOCOL, ClientSettings

MAX_PAGES = 100
MAX_RESOURCES = 5
SAMPLING_TEXT = "A canned answer from mcprec."


def starter_client(cwd: str | None = None) -> ClientSettings:
    """The client a starter scenario declares, and that --init connects as: a server may
    offer tools only to clients with roots, sampling or elicitation."""
    root = Path(cwd or os.getcwd()).resolve().as_uri()
    return ClientSettings(
        roots=[{"uri": root}],
        sampling={"role": "assistant", "content": {"type": "text", "text": SAMPLING_TEXT},
                  "model": "mcprec-script", "stopReason": "endTurn"},
        elicitation={"action": "decline"})


@dataclass
class Catalog:
    """What a server said about itself."""

    init: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    completions: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """(prompt name or uriTemplate, argument) -> the values the server suggested."""


def starter_scenario(server: Sequence[str] = (), *, target: str | None = None,
                     headers: dict[str, str] | None = None, timeout: float = 30.0,
                     filename: str | None = None) -> str:
    """The text of a starter scenario for the stdio ``server`` or the HTTP ``target``;
    ``filename``: where it will be written, for the commands in its opening comment."""
    from ..errors import UsageError

    if bool(server) == bool(target):
        raise UsageError("give the server after `--`, or --target URL (one of them)")
    if server:
        from ..record.api import check_command

        check_command(server)
    client = starter_client()
    catalog = asyncio.run(_probe(list(server), target, client, headers or {}, timeout))
    return render(catalog, client, server=list(server), target=target, filename=filename)


async def _probe(server: list[str], target: str | None, client_settings: ClientSettings,
                 headers: dict[str, str], timeout: float) -> Catalog:
    client = ScriptedClient(client_settings)
    if target is not None:
        async with http_server(target, client, headers):
            return await _read_catalog(client, timeout)
    async with tapped_server(server, client, exit_timeout=1.0):  # nothing to lose: no recording
        return await _read_catalog(client, timeout)


async def _read_catalog(client: ScriptedClient, timeout: float) -> Catalog:
    init = await client.initialize(DEFAULT_PROTOCOL, timeout)
    caps = table(init, "capabilities")
    cat = Catalog(init)
    if "tools" in caps:
        cat.tools = await _every_page(client, "tools/list", "tools", timeout)
    if "prompts" in caps:
        cat.prompts = await _every_page(client, "prompts/list", "prompts", timeout)
    if "resources" in caps:
        cat.resources = await _every_page(client, "resources/list", "resources", timeout)
        try:
            cat.templates = await _every_page(client, "resources/templates/list",
                                              "resourceTemplates", timeout)
        except StepFailed:
            pass  # some servers have no templates method at all
    if "completions" in caps:
        for p in cat.prompts:
            await _complete(client, cat, {"type": "ref/prompt", "name": p.get("name")},
                            str(p.get("name")), [a.get("name") for a in _arguments(p)], timeout)
        for t in cat.templates:
            uri = str(t.get("uriTemplate"))
            await _complete(client, cat, {"type": "ref/resource", "uri": uri}, uri,
                            template_variables(uri), timeout)
    return cat


async def _every_page(client: ScriptedClient, method: str, key: str,
                      timeout: float) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(MAX_PAGES):
        result = await client.request(method, {"cursor": cursor} if cursor else None,
                                      timeout=timeout)
        items += [i for i in result.get(key) or [] if isinstance(i, dict)]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return items


async def _complete(client: ScriptedClient, cat: Catalog, ref: dict[str, Any], owner: str,
                    names: list[Any], timeout: float) -> None:
    """The server's suggestions for each argument, each asked with the ones chosen before."""
    chosen: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str):
            continue
        params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": ""}}
        if chosen:
            params["context"] = {"arguments": dict(chosen)}
        try:
            result = await client.request("completion/complete", params, timeout=timeout)
        except StepFailed:
            continue
        completion = result.get("completion")
        values = completion.get("values") if isinstance(completion, dict) else None
        found = [v for v in values or [] if isinstance(v, str)]
        if found:
            cat.completions[(owner, name)] = found
            chosen[name] = found[0]


def _arguments(prompt: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in prompt.get("arguments") or [] if isinstance(a, dict)]


_TEMPLATE_VAR = re.compile(r"\{[+#./;?&]?([^}]+)\}")


def template_variables(uri_template: str) -> list[str]:
    """The variable names of an RFC 6570 URI template, in order."""
    names: list[str] = []
    for group in _TEMPLATE_VAR.findall(uri_template):
        for part in group.split(","):
            name = part.rstrip("*").split(":")[0].strip()
            if name and name not in names:
                names.append(name)
    return names


# --- the file -----------------------------------------------------------------------------------


def render(cat: Catalog, client: ClientSettings, *, server: list[str], target: str | None,
           filename: str | None = None) -> str:
    info = table(cat.init, "serverInfo")
    label = " ".join(str(info[k]) for k in ("name", "version") if info.get(k)) or "this server"
    slug = _slug(info, server, target)
    where = f"--target {target}" if target else "-- " + " ".join(_shell(a) for a in server)
    out = [
        f"# A starter scenario for {label}, written by `mcprec script --init`.",
        "# It lists the server's tools, prompts and resources and uses each once. A value",
        "# marked \"choose\" is a placeholder: put a real one there. Steps left commented out",
        "# need a look first. Record it, then check each new build against the recording:",
        "#",
        f"#   mcprec record --script {_shell(filename or slug + '.toml')} -c cassettes/{slug}.db",
        f"#   mcprec verify cassettes/{slug}.db {where}",
        "#",
        "# The format: docs/golden-cassettes.md in mcprec's documentation.",
        "",
        f"name = {toml_value(slug)}",
        f"protocol = {toml_value(cat.init.get('protocolVersion') or DEFAULT_PROTOCOL)}",
        "",
        "[server]",
        f"url = {toml_value(target)}" if target else f"command = {toml_value(server)}",
        "",
        "[client]",
        _commented(f"roots = {toml_value([r['uri'] for r in client.roots or []])}",
                   "answers roots/list"),
        _commented(f"sampling = {{ text = {toml_value(SAMPLING_TEXT)} }}",
                   "answers sampling/createMessage"),
        _commented("elicitation = { action = \"decline\" }",
                   "answers elicitation/create: accept, decline or cancel"),
    ]
    lists = [("tools/list", cat.tools), ("prompts/list", cat.prompts),
             ("resources/list", cat.resources), ("resources/templates/list", cat.templates)]
    caps = table(cat.init, "capabilities")
    out += ["", "# What the server offers: diff and verify compare these lists."]
    for method, _ in lists:
        if method.split("/")[0] in caps:
            out += ["", "[[steps]]", f"method = {toml_value(method)}"]
    if cat.tools:
        out += ["", "# --- tools"]
        for tool in cat.tools:
            out += _tool_step(tool)
    if cat.prompts:
        out += ["", "# --- prompts"]
        for prompt in cat.prompts:
            out += _prompt_step(prompt, cat)
    if cat.resources or cat.templates:
        out += ["", "# --- resources"]
        for resource in cat.resources[:MAX_RESOURCES]:
            out += ["", "[[steps]]", _commented(f"resource = {toml_value(resource.get('uri'))}",
                                                _describe(resource))]
        if len(cat.resources) > MAX_RESOURCES:
            more = len(cat.resources) - MAX_RESOURCES
            out += ["", f"# ... and {more} more resource{'s' if more != 1 else ''}: add steps "
                        "for those that matter"]
        for template in cat.templates:
            out += _template_step(template, cat)
    return "\n".join(out) + "\n"


def _slug(info: dict[str, Any], server: list[str], target: str | None) -> str:
    """A name for the session and the files: the server's own name (its last path part), else
    one from its command or URL."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(info.get("name") or "").rsplit("/", 1)[-1])
    name = name.strip("-.")
    if name:
        return name[:48]
    return server_slug(server) if server else endpoint_slug(target or "")


def _tool_step(tool: dict[str, Any]) -> list[str]:
    name = tool.get("name")
    schema = table(tool, "inputSchema")
    props = table(schema, "properties")
    required = array(schema, "required")
    lines = ["[[steps]]", _commented(f"tool = {toml_value(name)}", _describe(tool))]
    args: list[str] = []
    for arg, sub in props.items():
        e = example(sub)
        if arg in required:
            args.append(_argument_line(arg, e, sub))
        elif e.value is not None:
            description = sub.get("description") if isinstance(sub, dict) else None
            args.append(_commented(f"# {toml_key(arg)} = {toml_value(e.value)}", "optional" + (
                f"; {_first_line(description)}" if description else "")))
    if args:
        lines += ["[steps.arguments]", *args]
    why = _hold_back(tool)
    if why:
        return ["", f"# Not run: {why}. Enable it where that is fine.",
                *[f"# {line}" for line in lines]]
    return ["", *lines]


def _hold_back(tool: dict[str, Any]) -> str:
    execution = table(tool, "execution")
    if execution.get("taskSupport") == "required":
        return "the tool runs only as a task (execution.taskSupport), which scripts do not do"
    notes = table(tool, "annotations")
    if notes.get("destructiveHint") is True:
        return "the tool says it may destroy or overwrite data (destructiveHint)"
    if notes.get("openWorldHint") is True:
        return "the tool says it reaches outside the server, e.g. the network (openWorldHint)"
    return ""


def _argument_line(name: str, e: Example, schema: Any) -> str:
    if e.value is None:
        return f"# {toml_key(name)}: the schema allows only null"
    text = f"{toml_key(name)} = {toml_value(e.value)}"
    description = schema.get("description") if isinstance(schema, dict) else None
    if e.placeholder:
        return _commented(text, f"choose: {e.hint}" + (f"; {_first_line(description)}"
                                                       if description else ""))
    note = e.hint if e.source == "enum" else ""
    return _commented(text, note)


def _prompt_step(prompt: dict[str, Any], cat: Catalog) -> list[str]:
    name = str(prompt.get("name"))
    lines = ["", "[[steps]]", _commented(f"prompt = {toml_value(name)}", _describe(prompt))]
    args = []
    unknown = False
    for a in _arguments(prompt):
        arg = str(a.get("name"))
        found = cat.completions.get((name, arg))
        unknown = unknown or (not found and bool(a.get("required")))
        if found:
            line = _commented(f"{toml_key(arg)} = {toml_value(found[0])}",
                              "from the server's completions" + (
                                  f"; or {', '.join(toml_value(v) for v in found[1:4])}"
                                  if len(found) > 1 else ""))
        else:
            line = _commented(f"{toml_key(arg)} = \"example\"", "choose: a string" + (
                f"; {_first_line(a['description'])}" if a.get("description") else ""))
        args.append(line if a.get("required") else _commented("# " + line.split("  #")[0],
                                                               "optional"))
    if args:
        lines += ["[steps.arguments]", *args]
    if unknown:  # a prompt's arguments are bare strings: no schema tells what they accept
        return ["", "# choose: fill in the prompt's arguments, then enable this step",
                *[f"# {line}" for line in lines[1:]]]
    return lines


def _template_step(template: dict[str, Any], cat: Catalog) -> list[str]:
    uri = str(template.get("uriTemplate"))
    values: dict[str, str | None] = {}
    for v in template_variables(uri):
        found = cat.completions.get((uri, v))
        values[v] = found[0] if found else None
    filled = _TEMPLATE_VAR.sub(lambda m: ",".join(
        str(values.get(p.rstrip("*").split(":")[0].strip()) or f"<{p}>")
        for p in m.group(1).split(",")), uri)
    step = ["[[steps]]", _commented(f"resource = {toml_value(filled)}",
                                    f"from the template {uri}")]
    if all(values.values()):
        return ["", *step]
    return ["", "# choose: fill in the template's values, then enable this step",
            *[f"# {line}" for line in step]]


def _describe(item: dict[str, Any]) -> str:
    text = item.get("title") or item.get("description") or item.get("name") or ""
    return _first_line(str(text))


def _first_line(text: Any) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."


def _commented(text: str, comment: str) -> str:
    if not comment:
        return text
    return f"{text:<40}  # {comment}"


def _shell(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


# --- TOML values --------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"',
            "\\": "\\\\"}


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_value(key)


def toml_value(value: Any) -> str:
    """``value`` as a TOML value on one line (an inline table for a dict); JSON's null has no
    TOML form, so a null inside a list or table is left out."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return json.dumps(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or
                                                  ord(ch) == 0x7F else ch) for ch in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = [f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    return toml_value(str(value))
