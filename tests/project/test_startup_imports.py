"""What the click-free replay path imports before its first answer (issue 11: start-up).

Each of these was measured as milliseconds of every replay's start-up (``python -X importtime``):
typing ~3-5 ms, logging 5-10 ms, jsonpath and normalize 2.2-2.7 ms together, orjson (with the
dataclasses it imports) 15-19 ms, json ~2 ms. A module on the lean path that imports one of them
again at import time fails here."""

from __future__ import annotations

import subprocess
import sys

from support.helpers import REPO

NOT_ON_THE_LEAN_PATH = ("typing", "logging", "asyncio", "click", "mcprec.jsonpath",
                        "mcprec.normalize", "orjson", "dataclasses", "json")


def test_the_lean_replay_path_imports_none_of_them() -> None:
    code = ("import sys, mcprec._entry, mcprec.replay, mcprec.replay.playback, "
            "mcprec.replay.lean, mcprec.cassette.store, mcprec.matching, mcprec.wire\n"
            f"print(sorted(set({NOT_ON_THE_LEAN_PATH!r}) & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_recorder_process_imports_no_event_loop() -> None:
    """The recorder process starts as the tap does, and the tap buffers until it first reads:
    asyncio (with ssl) and subprocess serve the tap's end of the module only."""
    code = ("import sys, mcprec.record.child\n"
            "print(sorted({'asyncio', 'ssl', 'subprocess', 'click'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_start_up_discipline_stays_on_the_start_up_paths() -> None:
    """``TYPE_CHECKING = False`` (typing kept out of run time) is for the modules the lean
    replay path and the recorder process import, and the lazily exporting package roots:
    elsewhere, ordinary imports (docs/architecture.md#start-up)."""
    code = ("import sys, mcprec._entry, mcprec.replay, mcprec.replay.playback, mcprec.replay.lean, "
            "mcprec.cassette.store, mcprec.cassette.sets, mcprec.matching, mcprec.wire, "
            "mcprec.config, mcprec.record.child, mcprec.redact.manifest\n"
            "print(' '.join(m for m in sys.modules if m.startswith('mcprec')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO, check=True)
    on_the_paths = set(done.stdout.split()) | {"mcprec", "mcprec.redact", "mcprec.record",
                                                "mcprec.record.process"}
    used = set()
    for path in (REPO / "mcprec").rglob("*.py"):
        if "\nTYPE_CHECKING = False\n" in path.read_text():
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            used.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert sorted(used - on_the_paths) == []
