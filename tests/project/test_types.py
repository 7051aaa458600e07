"""The package type-checks: mypy over mcprec/ is clean (the settings are in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from support.helpers import REPO


def test_mypy_is_clean() -> None:
    """mypy finds no errors in mcprec/."""
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
