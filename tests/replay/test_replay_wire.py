"""`mcprec replay` on the wire: a raw JSON-RPC client writes lines the SDK client would never
write (reordered keys, string ids, pipelined requests, garbage) and reads what comes back."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.replay_helpers import replay_cmd


class RawClient:
    """`mcprec replay` with pipes: send JSON-RPC lines, receive parsed ones (with a timeout)."""

    def __init__(self, cassette: Path, *options: str) -> None:
        self.proc = subprocess.Popen(replay_cmd(cassette, *options), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 10) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def recv_until(self, rid: Any, timeout: float = 10) -> list[Any]:
        """Everything received up to and including the response with id ``rid``."""
        got = []
        while True:
            got.append(self.recv(timeout))
            if got[-1].get("id") == rid and "method" not in got[-1]:
                return got

    def nothing_within(self, seconds: float) -> bool:
        try:
            self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def initialize(self, rid: Any = "init") -> Any:
        self.send({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "raw", "version": "0"}}})
        answer = self.recv()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self, timeout: float = 10) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        err = self.proc.stderr.read().decode()
        self.proc.stderr.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code, err


@pytest.fixture
def client(sdk_recordings: SimpleNamespace) -> Any:
    clients: list[RawClient] = []

    def start(*options: str) -> RawClient:
        clients.append(RawClient(sdk_recordings.main.cassette, *options))
        return clients[-1]

    yield start
    for c in clients:
        if c.proc.poll() is None:
            c.proc.kill()
            c.close()


def call(rid: Any, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, **extra}}


def test_initialize_answered_with_the_clients_id(sdk_recordings: SimpleNamespace,
                                                 client: Any) -> None:
    """A string id the recording never used comes back unchanged on the recorded result."""
    answer = client().initialize(rid="my-init-7")
    assert answer["id"] == "my-init-7"
    assert answer["result"] == sdk_recordings.main.live.results["initialize"]


def test_key_order_and_meta_do_not_affect_matching(sdk_recordings: SimpleNamespace,
                                                  client: Any) -> None:
    """Params with keys in another order and an extra _meta match the recorded add call."""
    c = client()
    c.initialize()
    reordered = {"jsonrpc": "2.0", "params": {"_meta": {"trace": "xyz"},
                                              "arguments": {"b": 3, "a": 2}, "name": "add"},
                 "method": "tools/call", "id": 41}
    c.send(reordered)
    answer = c.recv()
    assert answer["id"] == 41
    assert answer["result"] == sdk_recordings.main.live.results["add"]


def test_pipelined_requests_each_get_their_own_answer(sdk_recordings: SimpleNamespace,
                                                      client: Any) -> None:
    """Requests sent without waiting are all answered, each under its own id."""
    c = client()
    c.initialize()
    c.send(call("a", "add", {"a": 2, "b": 3}))
    c.send(call("b", "echo", {"text": "hello"}))
    c.send({"jsonrpc": "2.0", "id": "c", "method": "ping"})
    answers = {a["id"]: a for a in (c.recv(), c.recv(), c.recv())}
    live = sdk_recordings.main.live.results
    assert answers["a"]["result"] == live["add"]
    assert answers["b"]["result"] == live["echo"]
    assert answers["c"]["result"] == {}


def test_progress_carries_the_clients_token(client: Any) -> None:
    """Progress notifications name the token this client sent, then the response follows."""
    c = client()
    c.initialize()
    c.send(call(5, "slow", {"steps": 4, "delay_ms": 150}, _meta={"progressToken": "tok-9"}))
    got = c.recv_until(5)
    progress = [m for m in got if m.get("method") == "notifications/progress"]
    assert [p["params"]["progressToken"] for p in progress] == ["tok-9"] * 4
    assert got[-1]["id"] == 5 and "result" in got[-1]


def test_sampling_request_gets_a_fresh_id_and_waits_for_the_answer(
        sdk_recordings: SimpleNamespace, client: Any) -> None:
    """The server's sampling request gets a new id; the tool answers only after the client does."""
    c = client()
    c.initialize()
    c.send(call(7, "ask_model", {"question": "why?"}))
    request = c.recv()
    assert request["method"] == "sampling/createMessage"
    assert request["params"] == sdk_recordings.main.live.sampling[0]
    assert c.nothing_within(0.5)  # no answer to the tool call while sampling is pending
    c.send({"jsonrpc": "2.0", "id": request["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "because"}, "model": "m"}})
    answer = c.recv()
    assert answer["id"] == 7
    assert answer["result"] == sdk_recordings.main.live.results["ask_model"]


def test_concurrent_sampling_requests_get_distinct_ids(client: Any) -> None:
    """Two tool calls in flight, each asking the client's model: two different request ids."""
    c = client()
    c.initialize()
    c.send(call(1, "ask_model", {"question": "why?"}))
    c.send(call(2, "ask_model", {"question": "why?"}))
    first, second = c.recv(), c.recv()
    assert first["method"] == second["method"] == "sampling/createMessage"
    assert first["id"] != second["id"]


def test_not_json_gets_a_parse_error_and_replay_goes_on(sdk_recordings: SimpleNamespace,
                                                       client: Any) -> None:
    """A line that is not JSON gets -32700; the next request is answered normally."""
    c = client()
    c.initialize()
    c.send(b"this is not json")
    assert c.recv()["error"]["code"] == -32700
    c.send(call(3, "add", {"a": 2, "b": 3}))
    assert c.recv()["result"] == sdk_recordings.main.live.results["add"]


@pytest.mark.parametrize("rid", [b"true", b"null", b"{}", b"[1]", b"1.5"])
def test_a_request_whose_id_mcp_does_not_allow_gets_invalid_request(
        sdk_recordings: SimpleNamespace, client: Any, rid: bytes) -> None:
    """MCP's ids are strings or integers: anything else gets -32600 with a null id (it was
    answered as a request), and replay goes on."""
    c = client()
    c.initialize()
    c.send(b'{"jsonrpc":"2.0","id":' + rid + b',"method":"ping"}')
    answer = c.recv()
    assert answer["id"] is None and answer["error"]["code"] == -32600, answer
    c.send(b'{"jsonrpc":"2.0","id":1e1,"method":"ping"}')  # an integer, as JSON Schema counts
    assert c.recv() == {"jsonrpc": "2.0", "id": 10, "result": {}}
    c.send(call(3, "add", {"a": 2, "b": 3}))
    assert c.recv()["result"] == sdk_recordings.main.live.results["add"]


def test_replay_exits_when_the_client_closes_stdin(client: Any) -> None:
    """Closing stdin ends the replay promptly with exit code 0."""
    c = client()
    c.initialize()
    start = time.monotonic()
    code, err = c.close()
    assert code == 0, err
    assert time.monotonic() - start < 5


def test_requests_piped_before_eof_are_all_answered(sdk_recordings: SimpleNamespace) -> None:
    """Requests followed at once by end of input (a shell pipe) still all get their answers."""
    from support.helpers import run_mcprec

    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(2, "add", {"a": 2, "b": 3}),
        call(3, "slow", {"steps": 4, "delay_ms": 150}, _meta={"progressToken": 3}),
    ]
    result = run_mcprec("replay", str(sdk_recordings.main.cassette), "--timing", "0.5",
                        input=b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert {a["id"] for a in answers if "id" in a} == {1, 2, 3}
    assert sum(a.get("method") == "notifications/progress" for a in answers) == 4
