"""A raw newline-delimited JSON-RPC client of a subprocess, with timeouts on every read; the
``reap_line_clients`` fixture kills whatever a failing test left running."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from typing import Any

import pytest

_CLIENTS: list[LineClient] = []


@pytest.fixture
def reap_line_clients() -> Any:
    """Whatever a failing test left running is killed, and its pipes closed."""
    yield
    while _CLIENTS:
        _CLIENTS.pop().kill()


class LineClient:
    """A raw newline-delimited JSON-RPC client of a subprocess, with timeouts on every read."""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, **kwargs)
        self._buf = b""
        _CLIENTS.append(self)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.close()

    def send(self, *objs: dict[str, Any]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(b"".join(json.dumps(o).encode() + b"\n" for o in objs))
        self.p.stdin.flush()

    def recv(self, timeout: float = 10.0) -> dict[str, Any] | None:
        """The next message, or None at end of file; fails after ``timeout`` seconds."""
        line = self.recv_raw(timeout)
        return None if line is None else json.loads(line)  # type: ignore[no-any-return]

    def recv_raw(self, timeout: float = 10.0) -> bytes | None:
        """The next line as it came, or None at end of file."""
        assert self.p.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.p.stdout], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"nothing within {timeout} s")
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def quiet(self, seconds: float) -> bool:
        """True if nothing arrives for ``seconds``."""
        try:
            got = self.recv(seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"expected nothing yet, got {got}")

    def close(self, timeout: float = 15.0) -> tuple[int, str]:
        """Close stdin; the exit code and stderr."""
        if self.p.stdin is not None:
            try:
                self.p.stdin.close()
            except BrokenPipeError:
                pass
            self.p.stdin = None  # closed: communicate() must not flush it
        _, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, err.decode()
