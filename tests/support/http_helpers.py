"""Helpers for the HTTP tests: real processes on 127.0.0.1 (SDK and Node peers, the recording
proxy, the HTTP replay server), the SDK's HTTP clients, and a tiny raw HTTP upstream for faults.

Every process announces its URL once it accepts connections (first stdout line, or mcprec's
``recording`` line on stderr); its output is drained by a thread so pipes never fill.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.helpers import EVERYTHING_DIR, MCPREC, PEERS, dump

HTTP_SERVER = PEERS / "http_server.py"
LOOPBACK = PEERS / "loopback.cjs"
EVERYTHING_INDEX = EVERYTHING_DIR / "dist" / "index.js"
SECRET_HEADERS = {"Authorization": "Bearer sk-secret123", "Cookie": "a=b"}
RECORDING = re.compile(r"^mcprec: recording (\S+) -> (\S+) into ")
STARTUP_S = 20.0


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    env.update(extra)
    return env


class Proc:
    """A child process whose stdout and stderr are collected line by line in the background."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                 ready: Callable[[str, str], str | None], what: str) -> None:
        """``ready(stream, line)`` returns the URL once a line announces it."""
        self.argv = list(argv)
        self.what = what
        self.popen = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env if env is not None else clean_env())
        self.out: list[str] = []
        self.err: list[str] = []
        self._urls: queue.Queue[str] = queue.Queue()
        self._ready = ready
        self._threads = [threading.Thread(target=self._drain, args=(name,), daemon=True)
                         for name in ("stdout", "stderr")]
        for t in self._threads:
            t.start()
        try:
            self.url = self._urls.get(timeout=STARTUP_S)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"{what} did not start: {self.stderr_text()}") from None

    def _drain(self, name: str) -> None:
        stream = getattr(self.popen, name)
        lines = self.out if name == "stdout" else self.err
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            lines.append(line)
            url = self._ready(name, line)
            if url:
                self._urls.put(url)
        stream.close()

    def stderr_text(self) -> str:
        self.join_output(0.5)
        return "\n".join(self.err)

    def join_output(self, timeout: float = 2.0) -> None:
        for t in self._threads:
            t.join(timeout)

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        m = re.match(r"^(https?://[^/]+)", self.url)
        assert m, self.url
        return m.group(1)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> tuple[int, float]:
        """Send ``sig``; (exit code, seconds it took to exit)."""
        t0 = time.monotonic()
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"{self.what} did not exit within {timeout}s of {sig}")
        took = time.monotonic() - t0
        self.join_output()
        return self.popen.returncode, took

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self.join_output(1.0)


def _first_stdout_url(stream: str, line: str) -> str | None:
    return line if stream == "stdout" and re.match(r"^http://127\.0\.0\.1:\d+", line) else None


def _recording_url(stream: str, line: str) -> str | None:
    m = RECORDING.match(line) if stream == "stderr" else None
    return m.group(1) if m else None


def start_sdk_http(*flags: str, requests_log: Path | None = None) -> Proc:
    """tests/peers/http_server.py on a free port (Streamable HTTP; ``--sse`` for legacy)."""
    argv = [sys.executable, str(HTTP_SERVER), *flags]
    if requests_log is not None:
        argv += ["--requests-log", str(requests_log)]
    return Proc(argv, ready=_first_stdout_url, what="the SDK HTTP peer")


def start_everything(mode: str) -> Proc:
    """server-everything in ``streamableHttp`` or ``sse`` mode, bound to 127.0.0.1, free port."""
    argv = ["node", "--require", str(LOOPBACK), str(EVERYTHING_INDEX), mode]
    path = "/mcp" if mode == "streamableHttp" else "/sse"

    def ready(stream: str, line: str) -> str | None:
        url = _first_stdout_url(stream, line)
        return url + path if url else None

    return Proc(argv, env=clean_env(PORT="0"), ready=ready, what=f"server-everything {mode}")


def start_proxy(target: str, cassette: Path, session: str | None = None,
                extra: Sequence[str] = ()) -> Proc:
    """``mcprec record --target TARGET --listen 127.0.0.1:0``; ``.url`` is the proxy's URL."""
    argv = [*MCPREC, "record", "--target", target, "--listen", "127.0.0.1:0", "-c", str(cassette),
            *(["-s", session] if session else []), *extra]
    return Proc(argv, ready=_recording_url, what="mcprec record --target")


def start_replay(cassette: Path, session: str | None = None, extra: Sequence[str] = ()) -> Proc:
    """``mcprec replay CASSETTE --http --listen 127.0.0.1:0``; ``.url``: its first stdout line."""
    argv = [*MCPREC, "replay", str(cassette), "--http", "--listen", "127.0.0.1:0",
            *(["-s", session] if session else []), *extra]
    return Proc(argv, ready=_first_stdout_url, what="mcprec replay --http")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    import json

    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- the SDK's HTTP clients -------------------------------------------------------------------


@dataclass
class HTTPRun:
    """What an SDK client saw in one session: results, and server-sent events in arrival order."""

    results: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)


Scenario = Callable[[Any, HTTPRun], Awaitable[None]]


async def run_http_session(url: Any, scenario: Scenario, *, transport: str = "streamable",
                           headers: dict[str, str] | None = None, timeout: float = 30) -> HTTPRun:
    """Connect with the SDK (``streamable`` or legacy ``sse``; or ``stdio``, when ``url`` is the
    server's argv), initialize, run ``scenario``.

    The client offers sampling (answering ``you asked: <question>``) and takes log messages;
    progress, log and sampling events go to ``run.events`` in the order they arrive.
    """
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import CreateMessageResult, TextContent

    run = HTTPRun()

    async def on_sampling(context: Any, params: Any) -> Any:
        question = params.messages[-1].content.text
        run.events.append(("sampling", question))
        return CreateMessageResult(role="assistant",
                                   content=TextContent(type="text", text=f"you asked: {question}"),
                                   model="test-model", stop_reason="endTurn")

    async def on_log(params: Any) -> None:
        run.events.append(("log", params.data))

    async def on_message(message: Any) -> None:
        run.notifications.append(repr(message) if isinstance(message, Exception)
                                 else dump(message))

    async def session(read: Any, write: Any) -> None:
        async with ClientSession(read, write, sampling_callback=on_sampling,
                                 logging_callback=on_log, message_handler=on_message) as s:
            run.results["initialize"] = dump(await s.initialize())
            await scenario(s, run)

    with anyio.fail_after(timeout):
        if transport == "stdio":  # ``url`` is then an argv
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            argv = list(url)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=clean_env())
            with open(os.devnull, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    await session(read, write)
        elif transport == "sse":
            async with sse_client(url, headers=headers) as (read, write):
                await session(read, write)
        else:
            async with httpx2.AsyncClient(headers=headers or {},
                                          timeout=httpx2.Timeout(30, read=300)) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    await session(read, write)
    return run


def progress_recorder(run: HTTPRun) -> Callable[..., Awaitable[None]]:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        run.events.append(("progress", progress, total, message))

    return on_progress


# --- scenarios for tests/peers/http_server.py -------------------------------------------------

TRICKY_TEXT = 'héllo ☃ "quoted" \\ back\nslash \U0001f600'


async def sdk_scenario(s: Any, run: HTTPRun) -> None:
    """Every feature of tests/peers/http_server.py once, in a fixed order."""
    r = run.results
    r["tools/list"] = dump(await s.list_tools())
    r["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    r["echo"] = dump(await s.call_tool("echo", {"text": TRICKY_TEXT}))
    r["slow"] = dump(await s.call_tool("slow", {"steps": 3},
                                       progress_callback=progress_recorder(run)))
    r["ask_model"] = dump(await s.call_tool("ask_model", {"question": "why?"}))
    r["chatty"] = dump(await s.call_tool("chatty", {"n": 2}))
    r["count"] = dump(await s.call_tool("count", {}))
    r["ping"] = dump(await s.send_ping())


def client_scenario(i: int) -> Any:
    """A short scenario whose arguments and answers are particular to client ``i``."""

    async def run_it(s: Any, run: HTTPRun) -> None:
        run.results["echo"] = dump(await s.call_tool("echo", {"text": f"client {i}"}))
        run.results["add"] = dump(await s.call_tool("add", {"a": i, "b": 1000}))
        run.results["slow"] = dump(await s.call_tool(
            "slow", {"steps": 2, "delay_ms": 10}, progress_callback=progress_recorder(run)))

    return run_it


EXPECTED_EVENTS = [
    ("progress", 1.0, 3.0, "step 1 of 3"), ("log", "slow: finished step 1"),
    ("progress", 2.0, 3.0, "step 2 of 3"), ("log", "slow: finished step 2"),
    ("progress", 3.0, 3.0, "step 3 of 3"), ("log", "slow: finished step 3"),
    ("sampling", "why?"),
    ("log", "chatty 1 of 2"), ("log", "chatty 2 of 2"),
]


def run_sync(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    import anyio

    return anyio.run(coro_fn)


# --- a tiny raw HTTP/1.1 upstream, for faults the real servers never make --------------------


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class RawUpstream:
    """A thread serving HTTP/1.1 on 127.0.0.1 with a scripted ``handler(request, conn)``, which
    writes whatever bytes it likes to the socket (and may close it mid-response)."""

    def __init__(self, handler: Callable[[RawRequest, socket.socket], None]) -> None:
        self.handler = handler
        self.requests: list[RawRequest] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (line.partition(":") for line in lines[1:])}
                n = int(headers.get("content-length", "0"))
                while len(buf) < n:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                body, buf = buf[:n], buf[n:]
                req = RawRequest(method, path, headers, body)
                self.requests.append(req)
                self.handler(req, conn)
                if conn.fileno() < 0:
                    return
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self._closed = True
        self.sock.close()
