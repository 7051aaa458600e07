"""The JSON Schemas of every published MCP revision, shipped in ``schemas/``, and what lint
reads out of them: which definition a request, result or notification of a method is checked
against, and which side may send it.

Validation uses jsonschema-rs. Each revision's schema is compiled once per process, as a whole
(``validator_map_for``), the first time a session of that revision is linted: ~30 ms each.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import jsonschema_rs
import orjson

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
"""Every published revision, oldest first."""
HANDSHAKE_VERSIONS = VERSIONS[:4]
"""Revisions that open with ``initialize``; the later ones are stateless."""
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
CLIENT, SERVER = "client", "server"
_MESSAGE = "mcprec-lint-message-"

TS_NUMBERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("CompleteResult", ("completion", "total")),
    ("CreateMessageRequest", ("params", "maxTokens")),
    ("CreateMessageRequestParams", ("maxTokens",)),
    ("Resource", ("size",)),
    ("ResourceLink", ("size",)),
    ("StringSchema", ("minLength",)),
    ("StringSchema", ("maxLength",)),
    ("TitledMultiSelectEnumSchema", ("minItems",)),
    ("TitledMultiSelectEnumSchema", ("maxItems",)),
    ("UntitledMultiSelectEnumSchema", ("minItems",)),
    ("UntitledMultiSelectEnumSchema", ("maxItems",)),
    ("Task", ("pollInterval",)),
    ("TaskMetadata", ("ttl",)),
    ("CacheableResult", ("ttlMs",)),
    ("DiscoverResult", ("ttlMs",)),
    ("ListToolsResult", ("ttlMs",)),
    ("ListPromptsResult", ("ttlMs",)),
    ("ListResourcesResult", ("ttlMs",)),
    ("ListResourceTemplatesResult", ("ttlMs",)),
    ("ReadResourceResult", ("ttlMs",)),
)
"""Where ``schema.json`` says ``integer`` and the normative TypeScript schema says ``number``:
the TypeScript one wins (the JSON was generated with ``--defaultNumberType integer``; the
2026-07-28 changelog says so for ``minimum``/``maximum``/``default``, fixed there). Error codes
stay integers: JSON-RPC defines them so."""


@dataclass(frozen=True)
class Problem:
    """One way a value breaks a schema: where (path steps from the validated value) and why."""

    steps: tuple[str | int, ...]
    message: str


class Spec:
    """One revision's schema, compiled, and its tables of methods."""

    def __init__(self, version: str, schema: dict[str, Any]) -> None:
        self.version = version
        self.key = "$defs" if "$defs" in schema else "definitions"
        self.defs: dict[str, Any] = schema[self.key]
        self._schema = schema
        self._map: Any = None
        self._validators: dict[str, Any] = {}
        self.requests: dict[str, str] = {}
        """Method -> definition of a request."""
        self.notifications: dict[str, str] = {}
        self.senders: dict[str, set[str]] = {}
        """Method -> the sides (``client``, ``server``) that may send it."""
        for side, union in ((CLIENT, "ClientRequest"), (SERVER, "ServerRequest"),
                            (CLIENT, "ClientNotification"), (SERVER, "ServerNotification")):
            for name in self._members(union):
                method = self._method_of(name)
                if method is None:
                    continue
                table = self.requests if union.endswith("Request") else self.notifications
                table[method] = name
                self.senders.setdefault(method, set()).add(side)
        self.batches = "JSONRPCBatchRequest" in self.defs
        new_envelopes = "JSONRPCResultResponse" in self.defs
        self.result_envelope = "JSONRPCResultResponse" if new_envelopes else "JSONRPCResponse"
        self.error_envelope = "JSONRPCErrorResponse" if new_envelopes else "JSONRPCError"
        self._typescript_numbers()
        self._add_message_defs()
        self.task_methods = {m for m, name in self.requests.items()
                             if "task" in self._params_properties(name)}
        """Requests a client or server may augment with ``task`` (their result is then a
        ``CreateTaskResult``)."""
        self.stateless = version not in HANDSHAKE_VERSIONS

    def _typescript_numbers(self) -> None:
        """Apply ``TS_NUMBERS``: those properties take any number, as TypeScript says."""
        for name, steps in TS_NUMBERS:
            node = self.defs.get(name)
            for step in steps:
                props = node.get("properties") if isinstance(node, dict) else None
                node = props.get(step) if isinstance(props, dict) else None
            if isinstance(node, dict) and node.get("type") == "integer":
                node["type"] = "number"

    def _resolve(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            node = self.defs.get(str(node["$ref"]).rsplit("/", 1)[-1])
        return node

    def _params_properties(self, name: str) -> set[str]:
        """The property names a request definition's params may have (in any of its shapes)."""
        request = self.defs.get(name) or {}
        params = self._resolve(((request.get("properties") or {}).get("params")))
        found: set[str] = set()
        todo = [params]
        while todo:
            node = self._resolve(todo.pop())
            if not isinstance(node, dict):
                continue
            found.update((node.get("properties") or {}).keys())
            for key in ("allOf", "anyOf", "oneOf"):
                todo.extend(node.get(key) or ())
        return found

    def _add_message_defs(self) -> None:
        """Definitions of whole messages: the JSON-RPC envelope and the method's own shape in
        one, so that a valid message costs one ``is_valid`` (the older revisions define a
        request without its ``id``, the envelope without the method's params)."""
        def ref(name: str) -> dict[str, str]:
            return {"$ref": f"#/{self.key}/{name}"}

        for name in self.requests.values():
            self.defs[_MESSAGE + name] = {"allOf": [ref("JSONRPCRequest"), ref(name)]}
        for name in self.notifications.values():
            self.defs[_MESSAGE + name] = {"allOf": [ref("JSONRPCNotification"), ref(name)]}
        results = {n for n in self.defs if n.endswith("Result") and not n.startswith(_MESSAGE)}
        for name in results:
            self.defs[_MESSAGE + name] = {"allOf": [
                ref(self.result_envelope), {"properties": {"result": ref(name)}}]}

    def request_def(self, method: str) -> str | None:
        """The definition of a whole request message of ``method``; None if undefined."""
        name = self.requests.get(method)
        return None if name is None else _MESSAGE + name

    def notification_def(self, method: str) -> str | None:
        name = self.notifications.get(method)
        return None if name is None else _MESSAGE + name

    def response_def(self, method: str | None, request_params: Any, result: Any) -> str:
        """The definition of a whole response message answering ``method`` (the bare
        envelope when the request is unknown)."""
        if method is None:
            return self.result_envelope
        return _MESSAGE + self.result_for(method, request_params, result)

    def _members(self, union: str) -> Iterator[str]:
        d = self.defs.get(union) or {}
        if "anyOf" in d:
            for branch in d["anyOf"]:
                yield branch["$ref"].rsplit("/", 1)[-1]
        elif "properties" in d:  # a union of one (2026-07-28's ClientNotification)
            yield union

    def _method_of(self, name: str) -> str | None:
        const = ((self.defs.get(name) or {}).get("properties") or {}).get("method", {})
        value = const.get("const")
        return value if isinstance(value, str) else None

    def result_for(self, method: str, request_params: Any, result: Any) -> str:
        """The definition a result answering ``method`` is checked against."""
        if isinstance(result, dict) and result.get("resultType") == "input_required" \
                and "InputRequiredResult" in self.defs:
            return "InputRequiredResult"
        if isinstance(request_params, dict) and "task" in request_params \
                and method in self.task_methods and "CreateTaskResult" in self.defs:
            return "CreateTaskResult"
        request = self.requests.get(method)
        if request is not None:
            name = request[:-len("Request")] + "Result"
            if name in self.defs:
                return name
            if "EmptyResult" in self.defs:
                return "EmptyResult"
        return "Result"

    # --- validation ---------------------------------------------------------------------------

    def validator(self, name: str) -> Any:
        v = self._validators.get(name)
        if v is None:
            if self._map is None:
                self._map = jsonschema_rs.validator_map_for(self._schema, validate_formats=False)
            v = self._validators[name] = self._map.get(f"#/{self.key}/{name}")
        return v

    def is_valid(self, name: str, value: Any) -> bool:
        return bool(self.validator(name).is_valid(value))

    def problems(self, name: str, value: Any) -> list[Problem]:
        """Why ``value`` breaks definition ``name``: the most specific errors first."""
        return explain(self.validator(name), value)


def explain(validator: Any, value: Any, limit: int = 5) -> list[Problem]:
    """The errors of ``validator`` on ``value``, ``anyOf`` failures resolved into the errors of
    the branch the value was most likely meant to be (see ``_best_branch``)."""
    out: list[Problem] = []
    for error in validator.iter_errors(value):
        for p in _resolve(error):
            if p not in out:
                out.append(p)
        if len(out) >= limit:
            break
    return out[:limit]


def _resolve(error: Any) -> list[Problem]:
    kind = error.kind
    if kind.name in ("anyOf", "oneOfNotValid"):
        branch = _best_branch(kind.context)
        if branch:
            return [p for e in branch for p in _resolve(e)]
    return [Problem(tuple(error.instance_path), _message(error))]


def _best_branch(branches: Any) -> list[Any]:
    """The branch whose discriminator (a ``const`` such as ``type: "text"``) matched, with the
    fewest errors; empty when every branch failed on its discriminator."""
    fits = [b for b in branches if not any(e.kind.name == "const" for e in b)]
    return min(fits, key=len) if fits else []


def _message(error: Any) -> str:
    kind = error.kind
    name = kind.name
    at = error.instance_path
    if name == "required":
        return f"required property {_short(kind.property)} is missing"
    if name == "additionalProperties":
        return f"property {', '.join(_short(p) for p in kind.unexpected)} is not allowed here"
    if name == "type":
        return f"{_short(error.instance)} is not of type {' or '.join(kind.types)}"
    if name == "const":
        return f"{_short(error.instance)} where {_short(kind.expected_value)} is required"
    if name == "enum":
        return f"{_short(error.instance)} is not one of {_short(kind.options)}"
    if name in ("anyOf", "oneOfNotValid"):
        what = at[-1] if at else "the value"
        return f"{_short(error.instance)} matches none of the shapes allowed for {what}"
    return _clip(error.message)


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return _clip(text, limit)


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


@functools.lru_cache(maxsize=None)
def spec(version: str) -> Spec | None:
    """The compiled schema of ``version``, or None for a revision mcprec does not ship."""
    if version not in VERSIONS:
        return None
    text = resources.files(__package__).joinpath("schemas").joinpath(f"{version}.json").read_bytes()
    return Spec(version, orjson.loads(text))


@functools.lru_cache(maxsize=64)
def closest_known(version: str | None, handshake: bool = True) -> str:
    """The revision to check a session of ``version`` against: itself when published, else
    the latest one published on or before it (versions are dates; among the handshake
    revisions for a session that opened with ``initialize``), else the oldest."""
    if version in VERSIONS:
        return version
    if version is None:
        return LATEST_HANDSHAKE
    candidates = HANDSHAKE_VERSIONS if handshake else VERSIONS
    earlier = [v for v in candidates if v <= version]
    return earlier[-1] if earlier else VERSIONS[0]


def is_stateless(version: Any) -> bool:
    """Whether ``version`` is a published revision without ``initialize``."""
    return version in VERSIONS and version not in HANDSHAKE_VERSIONS


def compile_user_schema(schema: Any) -> Any:
    """A validator for a schema a peer sent (a tool's inputSchema or outputSchema); raises
    ``ValueError`` when it is not a usable JSON Schema. Nothing is fetched: a remote ``$ref``
    is an error."""
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=False, retriever=_no_fetch)
    except Exception as e:  # jsonschema-rs raises its ValidationError for a bad schema
        raise ValueError(first_line(str(e))) from None


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri} not followed")


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
