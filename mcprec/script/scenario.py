"""Scenario files: a scripted MCP client session, written in TOML.

    name = "golden"                     # the session's name (default: the file's stem)
    [client]
    roots = ["file:///home/me/project"] # answers roots/list
    [[steps]]
    tool = "weather"                    # tools/call
    arguments = { city = "Paris" }

Loading checks everything a run would trip over later (unknown keys, a step doing two things,
bad durations, unset variables), so a bad file fails at once, in one line naming the file, the
line where it can be found, and the step.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError

DEFAULT_PROTOCOL = "2025-11-25"
DEFAULT_TIMEOUT_S = 30.0

TOP_KEYS = ("name", "description", "protocol", "timeout", "tags", "client", "server", "steps")
CLIENT_KEYS = ("name", "version", "roots", "sampling", "elicitation", "capabilities")
SERVER_KEYS = ("command", "url", "env", "cwd", "headers")
SAMPLING_KEYS = ("text", "model", "stop_reason", "result")
ELICITATION_ACTIONS = ("accept", "decline", "cancel")

# what a step does (exactly one of these) and what else each kind of step may say
ACTIONS = ("method", "tool", "prompt", "resource", "notify", "sleep")
_REQUEST_OPTIONS = ("expect", "progress", "cancel_after", "timeout", "wait")
ALLOWED = {
    "method": ("params", *_REQUEST_OPTIONS),
    "tool": ("arguments", *_REQUEST_OPTIONS),
    "prompt": ("arguments", *_REQUEST_OPTIONS),
    "resource": _REQUEST_OPTIONS,
    "notify": ("params",),
    "sleep": (),
}
STEP_KEYS = (*ACTIONS, "params", "arguments", *_REQUEST_OPTIONS)


class ScenarioError(UsageError):
    """A scenario file cannot be read or makes no sense; the message names file, line, step."""


@dataclass(frozen=True)
class Step:
    """One thing the scripted client does: a request, a notification or a pause."""

    number: int
    kind: str
    """``request``, ``notify`` or ``sleep``."""
    label: str
    """What the step does, for messages: ``tools/call weather``, ``sleep 200ms``."""
    method: str = ""
    params: dict[str, Any] | None = None
    expect: str = "result"
    """``result`` (an error fails the run) or ``error``."""
    progress: bool = False
    cancel_after: float | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    wait: bool = True
    seconds: float = 0.0
    line: int | None = None

    def describe(self) -> str:
        return f"step {self.number} ({self.label})"


@dataclass(frozen=True)
class ClientSettings:
    """Who the scripted client says it is, and how it answers the server's requests."""

    name: str = "mcprec"
    version: str = ""
    roots: list[dict[str, Any]] | None = None
    """None: no roots capability (roots/list is answered with an error)."""
    sampling: dict[str, Any] | None = None
    """The result of every sampling/createMessage; None: no sampling capability."""
    elicitation: dict[str, Any] | None = None
    """``{"action": ..., "content": ...}``; None: no elicitation capability."""
    capabilities: dict[str, Any] = field(default_factory=dict)

    def capabilities_offered(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {}
        return {**caps, **self.capabilities}


@dataclass(frozen=True)
class ServerSettings:
    """The server a scenario is written for (the command line may name another)."""

    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    path: Path
    name: str
    protocol: str = DEFAULT_PROTOCOL
    timeout: float = DEFAULT_TIMEOUT_S
    """How long to wait for initialize, and for each answer unless a step says otherwise."""
    description: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    client: ClientSettings = field(default_factory=ClientSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    steps: list[Step] = field(default_factory=list)


# --- loading ------------------------------------------------------------------------------------


def scenario_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Each path as given, a directory as its ``*.toml`` files in name order."""
    out: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            found = sorted(p.glob("*.toml"))
            if not found:
                raise ScenarioError(f"{p}: no *.toml scenario files in this directory")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise ScenarioError(f"{p}: no such scenario file")
    return out


def load_scenarios(paths: Iterable[str | os.PathLike[str]],
                   environ: Mapping[str, str] | None = None) -> list[Scenario]:
    """Every scenario the paths name (files or directories), each checked; names unique."""
    scenarios = [load_scenario(p, environ) for p in scenario_files(paths)]
    seen: dict[str, Path] = {}
    for s in scenarios:
        if s.name in seen:
            raise ScenarioError(f"{s.path}: the session name {s.name!r} is also the name of "
                                f"{seen[s.name]}; give one of them another `name`")
        seen[s.name] = s.path
    return scenarios


def load_scenario(path: str | os.PathLike[str],
                  environ: Mapping[str, str] | None = None) -> Scenario:
    """Read and check one scenario file; ``${VAR}`` comes from ``environ`` (default: ours)."""
    from ..config import parse_text

    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise ScenarioError(f"cannot read scenario {p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = parse_text(text, p)
    except UsageError as e:
        raise ScenarioError(str(e)) from None
    return _Reader(p, text, os.environ if environ is None else environ).scenario(data)


_VAR = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min)?\s*")
_STEPS_HEADER = re.compile(r"^\s*\[\[\s*steps\s*\]\]")


class _Reader:
    """Checks one parsed file, knowing its text so that errors can name a line."""

    def __init__(self, path: Path, text: str, environ: Mapping[str, str]) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.environ = environ
        headers = [i for i, line in enumerate(self.lines) if _STEPS_HEADER.match(line)]
        self._step_spans = [(a, b) for a, b in zip(headers, [*headers[1:], len(self.lines)])]

    # -- errors

    def fail(self, message: str, *, step: int | None = None, key: str | None = None,
             near: str | None = None) -> ScenarioError:
        """The error, at the line of ``key`` (else of ``near``, the table holding it)."""
        line = self._line_of(key, step)
        if line is None and near is not None:
            line = self._line_of(near, step)
        where = f"{self.path}:{line}" if line else str(self.path)
        return ScenarioError(f"{where}: {f'step {step}: ' if step else ''}{message}")

    def _line_of(self, key: str | None, step: int | None) -> int | None:
        """The line of ``key`` (in that step's ``[[steps]]`` table, or anywhere), 1-based."""
        lo, hi = 0, len(self.lines)
        if step is not None:
            if len(self._step_spans) < step:
                return None  # steps written another way (an inline array): no line to show
            lo, hi = self._step_spans[step - 1]
            if key is None:
                return lo + 1
        if key is None:
            return None
        k = re.escape(key)
        pattern = re.compile(rf"^\s*(\"?{k}\"?\s*=|\[\s*{k}\s*\]|\[\s*steps\.{k}\s*\])")
        for i in range(lo, hi):
            if pattern.match(self.lines[i]):
                return i + 1
        return lo + 1 if step is not None else None

    def unknown(self, keys: Iterable[str], known: tuple[str, ...], what: str,
                step: int | None = None, near: str | None = None) -> None:
        for key in keys:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else \
                    f"; known: {', '.join(known)}"
                raise self.fail(f"unknown key {key!r} {what}{hint}", step=step, key=key,
                                near=near)

    # -- values

    def expand(self, value: Any, where: str, step: int | None = None) -> Any:
        """``${VAR}`` and ``${VAR:-default}`` in every string of ``value``; ``$${`` is ``${``."""
        if isinstance(value, str):
            def sub(m: re.Match[str]) -> str:
                if m.group(1):
                    return m.group(0)[1:]
                name, default = m.group(2), m.group(3)
                got = self.environ.get(name)
                if default is not None:
                    return got if got else default
                if got is None:
                    key = re.sub(r"\[\d+\]$", "", where.rsplit(".", 1)[-1])
                    raise self.fail(f"{where}: ${{{name}}} is not set; export it, or write "
                                    f"${{{name}:-default}}", step=step, key=key)
                return got
            return _VAR.sub(sub, value)
        if isinstance(value, list):
            return [self.expand(v, f"{where}[{i}]", step) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.expand(v, f"{where}.{k}" if where else k, step)
                    for k, v in value.items()}
        return value

    def string(self, table: Mapping[str, Any], key: str, where: str, *, step: int | None = None,
               default: str | None = None) -> str | None:
        value = table.get(key, default)
        if value is not None and (not isinstance(value, str) or not value):
            raise self.fail(f"{where}{key} must be a non-empty string", step=step, key=key)
        return value

    def table(self, table: Mapping[str, Any], key: str, where: str, *,
              step: int | None = None) -> dict[str, Any] | None:
        value = table.get(key)
        if value is not None and not isinstance(value, dict):
            raise self.fail(f"{where}{key} must be a table, e.g. {key} = {{ a = 1 }}", step=step,
                            key=key)
        return value

    def strings(self, table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
        value = self.table(table, key, where) or {}
        bad = [k for k, v in value.items() if not isinstance(v, str)]
        if bad:
            raise self.fail(f"{where}{key}.{bad[0]} must be a string", key=bad[0])
        return value

    def duration(self, value: Any, key: str, step: int | None = None) -> float:
        """``"200ms"``, ``"1.5s"``, ``"2m"`` or a number of seconds."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
        m = _DURATION.fullmatch(value) if isinstance(value, str) else None
        if m is None:
            raise self.fail(f"{key} must be a duration such as \"200ms\", \"1.5s\" or \"2m\", "
                            f"got {value!r}", step=step, key=key)
        scale = {"ms": 0.001, "m": 60.0, "min": 60.0}.get(m.group(2) or "s", 1.0)
        return float(m.group(1)) * scale

    # -- the file

    def scenario(self, raw: dict[str, Any]) -> Scenario:
        self.unknown(raw, TOP_KEYS, "at the top level")
        data = self.expand({k: v for k, v in raw.items() if k != "steps"}, "")
        name = self.string(data, "name", "", default=self.path.stem)
        assert name is not None
        protocol = self.string(data, "protocol", "", default=DEFAULT_PROTOCOL)
        assert protocol is not None
        description = data.get("description", "")
        if not isinstance(description, str):
            raise self.fail("description must be a string", key="description")
        timeout = self.duration(data.get("timeout", DEFAULT_TIMEOUT_S), "timeout")
        if timeout <= 0:
            raise self.fail("timeout must be more than 0", key="timeout")
        steps_raw = raw.get("steps", [])
        if not isinstance(steps_raw, list) or not all(isinstance(s, dict) for s in steps_raw):
            raise self.fail("steps must be an array of tables: write each as [[steps]]",
                            key="steps")
        if not steps_raw:
            raise self.fail("no steps: add at least one [[steps]] table (e.g. method = "
                            "\"tools/list\")")
        return Scenario(
            path=self.path, name=name, protocol=protocol, timeout=timeout, description=description,
            tags=self.strings(data, "tags", ""),
            client=self.client(self.table(data, "client", "") or {}),
            server=self.server(self.table(data, "server", "") or {}),
            steps=[self.step(i, s, timeout) for i, s in enumerate(steps_raw, 1)],
        )

    def client(self, t: dict[str, Any]) -> ClientSettings:
        self.unknown(t, CLIENT_KEYS, "in [client]", near="client")
        from .. import __version__

        roots = t.get("roots")
        if roots is not None:
            if not isinstance(roots, list):
                raise self.fail("[client] roots must be a list of URIs", key="roots")
            roots = [self.root(r) for r in roots]
        caps = self.table(t, "capabilities", "[client] ") or {}
        return ClientSettings(
            name=self.string(t, "name", "[client] ", default="mcprec") or "mcprec",
            version=self.string(t, "version", "[client] ", default=__version__) or __version__,
            roots=roots, sampling=self.sampling(t.get("sampling")),
            elicitation=self.elicitation(t.get("elicitation")), capabilities=caps)

    def root(self, r: Any) -> dict[str, Any]:
        if isinstance(r, str):
            r = {"uri": r}
        if not isinstance(r, dict) or not isinstance(r.get("uri"), str) or \
                set(r) - {"uri", "name"}:
            raise self.fail("[client] roots: each root is a URI, or { uri = \"...\", name = "
                            "\"...\" }", key="roots")
        if not r["uri"].startswith("file://"):
            raise self.fail(f"[client] roots: {r['uri']!r} is not a file:// URI", key="roots")
        return dict(r)

    def sampling(self, s: Any) -> dict[str, Any] | None:
        if s is None:
            return None
        if isinstance(s, str):
            s = {"text": s}
        if not isinstance(s, dict):
            raise self.fail("[client] sampling must be a table, e.g. { text = \"a reply\" }",
                            key="sampling")
        self.unknown(s, SAMPLING_KEYS, "in [client] sampling", near="sampling")
        if "result" in s:
            if len(s) > 1 or not isinstance(s["result"], dict):
                raise self.fail("[client] sampling: give either result = { ... } (the whole "
                                "answer) or text / model / stop_reason", key="sampling")
            return dict(s["result"])
        for key in ("text", "model", "stop_reason"):
            if key in s and not isinstance(s[key], str):
                raise self.fail(f"[client] sampling.{key} must be a string", key="sampling")
        return {"role": "assistant", "content": {"type": "text", "text": s.get("text", "")},
                "model": s.get("model", "mcprec-script"),
                "stopReason": s.get("stop_reason", "endTurn")}

    def elicitation(self, e: Any) -> dict[str, Any] | None:
        if e is None:
            return None
        if isinstance(e, str):
            e = {"action": e}
        if not isinstance(e, dict):
            raise self.fail("[client] elicitation must be a table, e.g. { action = \"decline\" }",
                            key="elicitation")
        self.unknown(e, ("action", "content"), "in [client] elicitation", near="elicitation")
        action = e.get("action", "accept")
        if action not in ELICITATION_ACTIONS:
            raise self.fail(f"[client] elicitation.action must be one of "
                            f"{', '.join(ELICITATION_ACTIONS)}, got {action!r}", key="elicitation")
        content = e.get("content")
        if content is not None and (action != "accept" or not isinstance(content, dict)):
            raise self.fail("[client] elicitation.content is a table, and only with action = "
                            "\"accept\"", key="elicitation")
        return {"action": action, **({"content": content} if content is not None else {})}

    def server(self, t: dict[str, Any]) -> ServerSettings:
        self.unknown(t, SERVER_KEYS, "in [server]", near="server")
        command = t.get("command")
        if isinstance(command, str):
            command = shlex.split(command)
        if command is not None and (not isinstance(command, list) or not command
                                    or not all(isinstance(a, str) for a in command)):
            raise self.fail("[server] command must be a list of strings, e.g. [\"python\", "
                            "\"server.py\"]", key="command")
        url = self.string(t, "url", "[server] ")
        if url is not None and (urlsplit(url).scheme not in ("http", "https")
                                or not urlsplit(url).netloc):
            raise self.fail(f"[server] url must be an http(s) URL, got {url!r}", key="url")
        if command and url:
            raise self.fail("[server] gives both command and url; a scenario names one server",
                            key="url")
        cwd = self.string(t, "cwd", "[server] ")
        if cwd is not None:
            cwd = str((self.path.parent / cwd).resolve())  # relative to the scenario file
        return ServerSettings(command=command, url=url, env=self.strings(t, "env", "[server] "),
                              cwd=cwd, headers=self.strings(t, "headers", "[server] "))

    def step(self, n: int, raw: dict[str, Any], default_timeout: float) -> Step:
        self.unknown(raw, STEP_KEYS, "in a step", step=n)
        actions = [a for a in ACTIONS if a in raw]
        if not actions:
            raise self.fail(f"a step needs one of {', '.join(ACTIONS)}", step=n)
        if len(actions) > 1:
            raise self.fail(f"both {actions[0]!r} and {actions[1]!r}: a step does one thing "
                            "(make two steps)", step=n, key=actions[1])
        action = actions[0]
        for key in raw:
            if key not in ACTIONS and key not in ALLOWED[action]:
                owners = [a for a in ACTIONS if key in ALLOWED[a]]
                raise self.fail(f"{key!r} does not go with {action!r} (only with "
                                f"{' or '.join(owners)})", step=n, key=key)
        s = self.expand(raw, "", n)
        line = self._line_of(None, n)
        if action == "sleep":
            seconds = self.duration(s["sleep"], "sleep", n)
            return Step(n, "sleep", f"sleep {s['sleep']}", seconds=seconds, line=line)
        target = self.string(s, action, "", step=n)
        assert target is not None
        params = self.table(s, "params", "", step=n)
        arguments = self.table(s, "arguments", "", step=n)
        if action == "notify":
            return Step(n, "notify", target, method=target, params=params, line=line)
        if action == "method":
            if target == "initialize":
                raise self.fail("mcprec sends initialize itself: set `protocol` and [client] "
                                "instead", step=n, key="method")
            method, label = target, target
        elif action == "tool":
            method, label = "tools/call", f"tools/call {target}"
            params = {"name": target, "arguments": arguments or {}}
        elif action == "prompt":
            bad = [k for k, v in (arguments or {}).items() if not isinstance(v, str)]
            if bad:
                raise self.fail(f"prompt arguments are strings: arguments.{bad[0]} is not",
                                step=n, key=bad[0])
            method, label = "prompts/get", f"prompts/get {target}"
            params = {"name": target, **({"arguments": arguments} if arguments else {})}
        else:
            method, label = "resources/read", f"resources/read {target}"
            params = {"uri": target}
        return self.request(n, s, method, label, params, default_timeout, line)

    def request(self, n: int, s: dict[str, Any], method: str, label: str,
                params: dict[str, Any] | None, default_timeout: float, line: int | None) -> Step:
        expect = s.get("expect", "result")
        if expect not in ("result", "error"):
            raise self.fail(f"expect must be \"result\" or \"error\", got {expect!r}", step=n,
                            key="expect")
        for flag in ("progress", "wait"):
            if not isinstance(s.get(flag, True), bool):
                raise self.fail(f"{flag} must be true or false", step=n, key=flag)
        cancel = s.get("cancel_after")
        cancel_after = None if cancel is None else self.duration(cancel, "cancel_after", n)
        if cancel_after is not None and ("expect" in s or "wait" in s):
            raise self.fail("a cancelled request gets no answer: cancel_after goes without "
                            "expect and wait", step=n, key="cancel_after")
        timeout = self.duration(s.get("timeout", default_timeout), "timeout", n)
        if timeout <= 0:
            raise self.fail("timeout must be more than 0", step=n, key="timeout")
        return Step(n, "request", label, method=method, params=params, expect=expect,
                    progress=s.get("progress", False), cancel_after=cancel_after,
                    timeout=timeout, wait=s.get("wait", True), line=line)


__all__ = ["DEFAULT_PROTOCOL", "ClientSettings", "Scenario", "ScenarioError", "ServerSettings",
           "Step", "load_scenario", "load_scenarios", "scenario_files"]
