"""Write the weather session (weather.mcprec.jsonl, `mcprec export` of
examples/typescript/weather.db) in the formats of other MCP recorders, each with that tool's own
models and writers, so that tests/show/test_import_formats.py reads files as those tools write them:

- weather.mcp-cassette.json  mcp-cassette 0.4.0: its ``Cassette``/``Message`` models, ``save()``
- weather.mcp-vcr.yaml       mcp-vcr 0.2.2: its ``TranscriptRecorder`` (YAML)
- weather.vcr                agent-vcr 0.1.0: its ``SessionManager`` and ``VCRRecording.save()``
- weather.inspector.json     the MCP Inspector's History and Server Notifications panes
                             (``{request, response}`` entries as its ``pushHistory`` makes them)

weather.mcp-recorder.json was recorded by mcp-recorder itself (mcp-recorder-scenarios.yml).

Run with a Python that has agent-vcr, pydantic and pyyaml installed, and the unpacked wheels of
mcp-cassette and mcp-vcr (they need Python >= 3.12 to install; the modules used here run on
3.11) on PYTHONPATH:  python tests/data/import/generate.py
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
START = datetime(2026, 12, 6, 2, 14, 0, tzinfo=timezone.utc)


def messages() -> list[tuple[str, dict[str, Any], int]]:
    """(dir c2s/s2c, message, t_ns) of the reference session."""
    out = []
    for line in (HERE / "weather.mcprec.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "m" in rec:
            out.append((rec["m"]["dir"], json.loads(rec["m"]["raw"]), rec["m"]["t_ns"]))
    return out


def mcp_cassette() -> None:
    # its package needs Python 3.12; its models (cassette.py) load alone on 3.11
    found = importlib.util.find_spec("mcp_cassette.cassette".split(".")[0])
    assert found and found.submodule_search_locations
    path = Path(list(found.submodule_search_locations)[0]) / "cassette.py"
    spec = importlib.util.spec_from_file_location("mcp_cassette_models", path)
    assert spec and spec.loader
    models = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = models
    spec.loader.exec_module(models)
    out = []
    for seq, (d, msg, t_ns) in enumerate(messages()):
        kind = ("request" if "method" in msg and "id" in msg else
                "notification" if "method" in msg else "response")
        out.append(models.Message(seq=seq, t_offset_ms=t_ns // 1_000_000,
                                  sender="client" if d == "c2s" else "server", kind=kind,
                                  method=msg.get("method"), msg_id=msg.get("id"),
                                  payload=msg))
    init = next(m for d, m, _ in messages() if d == "s2c" and "serverInfo" in m.get("result", {}))
    cassette = models.Cassette(recorded_at=START, transport="stdio",
                               protocol_version=init["result"]["protocolVersion"],
                               server_info=models.ServerInfo(**init["result"]["serverInfo"]),
                               messages=out)
    cassette.save(HERE / "weather.mcp-cassette.json")


def mcp_vcr() -> None:
    from mcp_vcr.recorder import TranscriptRecorder

    rec = TranscriptRecorder(str(HERE / "weather.mcp-vcr.yaml"),
                             server_command=["python", "examples/weather_server.py"])
    rec.session_id = "5eed0043"
    rec.recorded_at = "2026-12-06T02:14:00Z"
    rec.start_session()
    for d, msg, t_ns in messages():
        rec.write({"t": t_ns // 1_000_000, "dir": d, "payload": msg})
        if d == "s2c" and "serverInfo" in msg.get("result", {}):
            rec.update_lazy_metadata(protocol_version=msg["result"]["protocolVersion"])
        if d == "c2s" and msg.get("method") == "initialize":
            rec.update_lazy_metadata(client_hint=msg["params"]["clientInfo"]["name"])
    rec.close()


def agent_vcr() -> None:
    from agent_vcr.core.format import (JSONRPCNotification, JSONRPCRequest, JSONRPCResponse,
                                       VCRMetadata)
    from agent_vcr.core.session import SessionManager

    msgs = messages()
    manager = SessionManager()
    init_req = next(m for d, m, _ in msgs if m.get("method") == "initialize")
    init_res = next(m for d, m, _ in msgs if d == "s2c" and m.get("id") == init_req["id"])
    manager.start_recording(
        VCRMetadata(version="1.0", recorded_at=START.replace(tzinfo=None), transport="stdio",
                    server_command="python", server_args=["examples/weather_server.py"]),
        JSONRPCRequest(**init_req), JSONRPCResponse(**init_res))
    # as its recorder does: a client request, the server notifications buffered until its
    # answer, the answer; the server's own requests and the client's notifications are dropped
    pending: dict[Any, dict[str, Any]] = {}
    buffered: list[Any] = []
    for d, msg, _ in msgs:
        if msg is init_req or msg is init_res:
            continue
        if d == "c2s" and "method" in msg and "id" in msg:
            pending[msg["id"]] = msg
        elif d == "s2c" and "method" in msg and "id" not in msg:
            buffered.append(JSONRPCNotification(**msg))
        elif d == "s2c" and "id" in msg and "method" not in msg and msg["id"] in pending:
            manager.record_interaction(JSONRPCRequest(**pending.pop(msg["id"])),
                                       JSONRPCResponse(**msg), notifications=buffered)
            buffered = []
    manager.stop_recording().save(str(HERE / "weather.vcr"))


def inspector() -> None:
    """The Inspector's two panes: ``requestHistory`` (``{request, response}``, each a JSON
    string: the request as ``{method, params}`` without id, the response the result, or
    ``{"error": message}``), and ``serverNotifications``."""
    msgs = messages()
    history: list[dict[str, str]] = []
    notifications: list[dict[str, Any]] = []
    answers = {m["id"]: m for d, m, _ in msgs if d == "s2c" and "id" in m and "method" not in m}
    for d, msg, _ in msgs:
        if d == "c2s" and msg.get("method") == "initialize":
            result = answers[msg["id"]]["result"]
            history.append({"request": json.dumps({"method": "initialize"}),
                            "response": json.dumps({"capabilities": result["capabilities"],
                                                    "serverInfo": result["serverInfo"],
                                                    "instructions": result.get("instructions")})})
        elif d == "c2s" and "method" in msg and "id" in msg:
            request = {"method": msg["method"], "params": msg.get("params", {})}
            answer = answers.get(msg["id"], {})
            response = answer.get("result", {"error": answer.get("error", {}).get("message")})
            history.append({"request": json.dumps(request), "response": json.dumps(response)})
        elif d == "s2c" and "method" in msg and "id" not in msg:
            notifications.append(msg)
    (HERE / "weather.inspector.json").write_text(json.dumps(
        {"requestHistory": history, "serverNotifications": notifications}, indent=2) + "\n")


if __name__ == "__main__":
    mcp_cassette()
    mcp_vcr()
    agent_vcr()
    inspector()
