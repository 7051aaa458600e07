"""A WAL-mode cassette where it cannot be written (a read-only mount; a folder its user cannot
write) is read by every command that only reads it, and is left byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.helpers import MCPREC, REPO, copy_cassette

WEATHER = REPO / "examples"
INIT = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's session v1, recorded for real, as a WAL-mode cassette."""
    path = tmp_path_factory.mktemp("weather") / "w.db"
    done = subprocess.run(
        [sys.executable, str(WEATHER / "weather_client.py"), "--", *MCPREC, "record", "-c",
         str(path), "-s", "v1", "--", sys.executable, str(WEATHER / "weather_server.py")],
        capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = path.with_name("copy.db")
    copy_cassette(path, out)
    import sqlite3

    conn = sqlite3.connect(out)
    try:
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    finally:
        conn.close()
    return out


def _run(argv: list[str], user: bool, stdin: bytes | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user else []
    return subprocess.run([*prefix, *MCPREC, *argv], input=stdin, capture_output=True,
                          timeout=timeout, env=env, cwd="/", check=False)


def _every_reader(path: Path, user: bool) -> None:
    c = str(path)
    for argv in (["sessions", c], ["sessions", c, "--json"], ["show", c, "v1"],
                 ["export", c], ["lint", c], ["scan", c], ["diff", f"{c}:v1", f"{c}:v1"],
                 ["view", c, "v1", "--html", "-"]):
        done = _run(argv, user)
        # lint's 1 is its verdict on the example (findings), not trouble
        assert done.returncode in ((0, 1) if argv[0] == "lint" else (0,)), (argv, done.stderr)
        assert done.stdout or argv[0] == "scan", argv
        assert b"Traceback" not in done.stderr
    # replay over stdio: the recorded answer to initialize
    done = _run(["replay", c, "-s", "v1"], user, stdin=INIT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "weather"
    # replay --http: the URL printed, the recorded answer served
    _replay_http(c, user)
    if user:  # the venv's interpreter lies under /root, which the other user cannot list
        return
    # verify: the reference read (copied) from where it lies, the run stored elsewhere
    done = _run(["verify", c, "-s", "v1", "--", sys.executable,
                 str(WEATHER / "weather_server.py")], user, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)


def _replay_http(cassette: str, user: bool) -> None:
    import httpx

    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user else []
    p = subprocess.Popen([*prefix, *MCPREC, "replay", cassette, "-s", "v1", "--http",
                          "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd="/")
    try:
        assert p.stdout is not None
        url = p.stdout.readline().decode().strip()
        assert url.startswith("http://"), p.stderr.read() if p.stderr else url
        r = httpx.post(url, content=INIT.strip(), timeout=10, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        assert r.status_code == 200, r.text
        assert "weather" in r.text
    finally:
        p.terminate()
        p.wait(10)
        for f in (p.stdout, p.stderr):
            if f is not None:
                f.close()


def _digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.iterdir())}


@pytest.fixture
def read_only_mount(weather: Path) -> Iterator[Path]:
    """The cassette on a tmpfs remounted read-only (skipped where mounting is not allowed)."""
    where = Path(tempfile.mkdtemp(prefix="mcprec-ro-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)],
                      capture_output=True, check=False).returncode != 0:
        where.rmdir()
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        shutil.copy(weather, where / "w.db")
        os.chmod(where, 0o755)
        os.chmod(where / "w.db", 0o644)
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where / "w.db"
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(where)], capture_output=True,
                              check=False).returncode == 0:
                break
            time.sleep(0.1)
        where.rmdir()


def test_every_reader_reads_a_cassette_on_a_read_only_mount(read_only_mount: Path) -> None:
    """sessions, show, export, lint, scan, diff, view --html, replay (stdio and --http) and
    verify's reference all read a WAL cassette on a read-only filesystem."""
    before = _digest(read_only_mount)
    _every_reader(read_only_mount, user=False)
    assert _digest(read_only_mount) == before


@pytest.fixture
def read_only_folder(weather: Path) -> Iterator[Path]:
    """The cassette in a folder (0555) its reader, another user than the owner, cannot write."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to read as another user")
    where = Path(tempfile.mkdtemp(prefix="mcprec-rodir-"))
    shutil.copy(weather, where / "w.db")
    os.chmod(where / "w.db", 0o644)
    os.chmod(where, 0o555)
    try:
        yield where / "w.db"
    finally:
        os.chmod(where, 0o755)
        shutil.rmtree(where)


def test_every_reader_reads_a_cassette_in_a_folder_it_cannot_write(
        read_only_folder: Path) -> None:
    """The same readers, run as a user who cannot write the folder (nor the file), read it and
    leave no -wal or -shm beside it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the readers as another user")
    before = _digest(read_only_folder)
    _every_reader(read_only_folder, user=True)
    assert _digest(read_only_folder) == before


def test_a_reader_in_a_writable_folder_leaves_no_wal_behind(weather: Path, tmp_path: Path) -> None:
    """Read-only opening where the folder is writable leaves the folder as it found it."""
    path = tmp_path / "w.db"
    shutil.copy(weather, path)
    for argv in (["sessions", str(path)], ["show", str(path)], ["export", str(path)]):
        assert _run(argv, user=False).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.db"]
