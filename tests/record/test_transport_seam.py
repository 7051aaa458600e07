"""The seam between transports and the cassette: every recording fits ``SessionRecording``."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from mcprec.record.process import ProcessSessionWriter
from mcprec.record.writer import SessionWriter
from mcprec.transports.recording import NullRecording, SessionRecording

METHODS = sorted(name for name, value in vars(SessionRecording).items()
                 if callable(value) and not name.startswith("_"))


def _shape(fn: Any) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", [ProcessSessionWriter, SessionWriter, NullRecording])
@pytest.mark.parametrize("name", METHODS)
def test_recordings_have_the_protocols_methods(cls: type, name: str) -> None:
    """Each recording has every method of the protocol, with the same parameters."""
    assert _shape(getattr(cls, name)) == _shape(getattr(SessionRecording, name))


def test_protocol_covers_both_kinds_of_transport() -> None:
    """The protocol has the stream (stdio) and the message (HTTP) reports, and the end."""
    assert {"chunk", "stream_end", "stderr_chunk", "message", "close", "now"} <= set(METHODS)


def test_null_recording_records_nothing() -> None:
    """A transport run without a cassette reports to a recording that ignores it all."""
    r = NullRecording()
    r.chunk("client_to_server", b"x", r.now())
    r.message("server_to_client", b"{}", http={"exchange": 1})
    r.stream_end("client_to_server")
    r.close(status="complete")
    assert r.now() >= 0
