"""The golden cassette, cassettes/golden/weather.db: the bundled example server recorded with
the bundled example client (release 1 as `v1`, release 2 as `v2`), committed so that replay,
view, diff and verify work on a fresh clone. The suite verifies the example server against it
(the golden-cassette pattern of docs/ci.md, on mcprec itself) and keeps it current with the
cassette format: when a test here fails, run `.venv/bin/python scripts/gen_golden.py`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import MCPREC, run_mcprec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "cassettes" / "golden" / "weather.db"
SERVER = [sys.executable, str(ROOT / "examples" / "weather_server.py")]
CLIENT = [sys.executable, str(ROOT / "examples" / "weather_client.py")]
REGENERATE = "regenerate it with `.venv/bin/python scripts/gen_golden.py` and commit it"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A copy of the golden cassette (verify adds its run to the cassette it is given)."""
    copy = tmp_path / "weather.db"
    shutil.copyfile(GOLDEN, copy)
    return copy


def test_golden_is_current() -> None:
    """The committed cassette has today's format and both releases, complete."""
    from mcprec.cassette.schema import FORMAT_VERSION
    from mcprec.cassette import Cassette
    from mcprec.cassette.views import format_version

    assert GOLDEN.exists(), f"{GOLDEN} is missing: {REGENERATE}"
    c = Cassette.open(GOLDEN, read_only=True)
    try:
        assert format_version(c) == FORMAT_VERSION, (
            f"{GOLDEN} has cassette format {format_version(c)}, mcprec writes {FORMAT_VERSION}: "
            f"{REGENERATE}")
        sessions = {s.name: s for s in c.sessions()}
    finally:
        c.close()
    assert sorted(sessions) == ["v1", "v2"], f"{GOLDEN} should hold v1 and v2 only: {REGENERATE}"
    for name, version in (("v1", "1.0.0"), ("v2", "2.0.0")):
        s = sessions[name]
        assert s.status == "complete" and s.server_info["version"] == version
        assert s.target[0] == "python" and not any(str(ROOT) in part for part in s.target)


@pytest.mark.parametrize(("session", "flags"), [("v1", []), ("v2", ["--v2"])])
def test_example_server_verifies(golden: Path, session: str, flags: list[str]) -> None:
    """Each release of the example server behaves as its golden session says (exit 0)."""
    r = run_mcprec("verify", str(golden), "-s", session, "--", *SERVER, *flags, timeout=120)
    assert r.returncode == 0, (r.stdout.decode()[-2000:], r.stderr.decode()[-2000:], REGENERATE)
    assert b"Exchanges: 9 paired (9 same, 0 changed)" in r.stdout


def test_diff_of_the_releases() -> None:
    """diff of the two golden sessions: release 2's changes, with their severities."""
    r = run_mcprec("diff", f"{GOLDEN}:v1", f"{GOLDEN}:v2", "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["counts"] == {"breaking": 4, "warning": 2, "compatible": 1}


def test_replay_and_view_on_a_fresh_clone(tmp_path: Path) -> None:
    """The example client gets release 1's answers from the golden cassette, the server gone;
    `mcprec view --html` makes its page."""
    live = subprocess.run([*CLIENT, "--", *SERVER], capture_output=True, timeout=120)
    replayed = subprocess.run([*CLIENT, "--", *MCPREC, "replay", str(GOLDEN), "-s", "v1"],
                              capture_output=True, timeout=120)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == json.loads(live.stdout)
    out = tmp_path / "weather.html"
    r = run_mcprec("view", str(GOLDEN), "--html", str(out))
    assert r.returncode == 0, r.stderr
    assert "weather" in out.read_text()


def test_the_script_makes_the_same_cassette(tmp_path: Path) -> None:
    """scripts/gen_golden.py, run again, writes what is committed (as `mcprec export` says)."""
    again = tmp_path / "again.db"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_golden.py"), "--out", str(again)],
                   check=True, capture_output=True, timeout=300)
    for name in ("v1", "v2"):
        committed = run_mcprec("export", str(GOLDEN), name).stdout
        made = run_mcprec("export", str(again), name).stdout
        assert made == committed, f"session {name} is not what the script makes today: {REGENERATE}"
