"""CI-facing diff: severity tiers, `--fail-on`, `--surface-only` and `--format github`, on
recordings of a real clock-stamping server (tests/peers/clock_server.py) and its variants."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.helpers import PEERS, ClientRun, dump, record_scenario, run_mcprec
from mcprec.diff import diff
from mcprec.diff.model import Change
from mcprec.diff.report import annotation, escape_data, escape_property
from mcprec.diff.severity import classify

CLOCK = [sys.executable, str(PEERS / "clock_server.py")]
NORMALIZE = ["--normalize", "timestamps,uuids", "--normalize", "order=ORD-[0-9]+"]
ANNOTATION = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


async def scenario(s: Any, run: ClientRun) -> None:
    """The catalog, then each tool once (lookup with fixed arguments)."""
    run.results["tools"] = [dump(t) for t in (await s.list_tools()).tools]
    run.results["now"] = dump(await s.call_tool("now", {}))
    run.results["order"] = dump(await s.call_tool("create_order", {"item": "tea"}))
    run.results["lookup"] = dump(await s.call_tool(
        "lookup", {"id": "123e4567-e89b-12d3-a456-426614174000", "at": "2026-12-03T10:00:00Z"}))


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """ci.db: r1, r2 (v1 twice), v2 (warnings only), v3 (breaking), v4 (a tool added)."""
    cas = tmp_path_factory.mktemp("ci") / "ci.db"
    for name, variant in (("r1", "v1"), ("r2", "v1"), ("v2", "v2"), ("v3", "v3"), ("v4", "v4")):
        record_scenario(cas, name, CLOCK, scenario, env={"MCPREC_TEST_CLOCK_VARIANT": variant})
    return SimpleNamespace(cassette=cas, ref=lambda s: f"{cas}:{s}")


def parse_annotations(stdout: str) -> list[dict[str, Any]]:
    """The workflow commands in ``stdout``, properties and message unescaped."""
    def unescape(text: str) -> str:
        return (text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":")
                .replace("%2C", ",").replace("%25", "%"))

    out = []
    for line in stdout.splitlines():
        m = ANNOTATION.match(line)
        if m is None:
            continue
        props = dict(p.split("=", 1) for p in (m.group(2) or "").split(",") if p)
        out.append({"level": m.group(1), **{k: unescape(v) for k, v in props.items()},
                    "message": unescape(m.group(3))})
    return out


# --- severities -------------------------------------------------------------------------------


def test_descriptions_are_warnings_and_titles_compatible() -> None:
    """A description change is a warning; a title change is compatible; breaking stays."""
    assert classify(Change("tool", "t", "description_changed", "", False)).severity == "warning"
    assert classify(Change("tool", "t", "title_changed", "", False)).severity == "compatible"
    assert classify(Change("tool", "t", "removed", "", True)).severity == "breaking"
    schema = Change("tool", "t", "input_description_changed", "", False,
                    {"description": "a"}, {"description": "b"})
    assert classify(schema).severity == "warning"
    title = Change("tool", "t", "input_description_changed", "", False, {"title": "a"},
                   {"title": "b"})
    assert classify(title).severity == "compatible"


def test_v2_has_warnings_only(clock: SimpleNamespace) -> None:
    """v2: lookup's description and create_order's status are warnings, nothing breaks."""
    result = diff(clock.ref("r1"), clock.ref("v2"), normalize=NORMALIZE[1::2])
    assert result.counts == {"breaking": 0, "warning": 2, "compatible": 0}, result.to_text()
    assert result.severity == "warning"
    assert "WARNING   lookup: description changed" in result.to_text()


def test_v3_is_breaking(clock: SimpleNamespace) -> None:
    """v3: a required input added, and the call now fails: both breaking."""
    result = diff(clock.ref("r1"), clock.ref("v3"), normalize=NORMALIZE[1::2])
    assert [c.kind for c in result.breaking] == ["required_input_added"]
    (call,) = [e for e in result.exchanges if e.severity == "breaking"]
    assert call.error == "appeared" and call.method == "tools/call"
    assert result.counts["breaking"] == 2


# --- --fail-on ----------------------------------------------------------------------------------


@pytest.mark.parametrize("b, fail_on, code", [
    ("r2", None, 0), ("r2", "breaking", 0),
    ("v4", None, 1), ("v4", "any", 1), ("v4", "warning", 0), ("v4", "breaking", 0),
    ("v2", None, 1), ("v2", "warning", 1), ("v2", "breaking", 0),
    ("v3", "breaking", 1), ("v3", "warning", 1), ("v3", "any", 1),
])
def test_fail_on_exit_codes(clock: SimpleNamespace, b: str, fail_on: str | None,
                            code: int) -> None:
    """Default (any) as before; warning ignores compatible changes; breaking only breaking."""
    args = ["--fail-on", fail_on] if fail_on else []
    out = run_mcprec("diff", clock.ref("r1"), clock.ref(b), *NORMALIZE, *args)
    assert out.returncode == code, out.stdout.decode() + out.stderr.decode()


def test_fail_on_from_the_config(clock: SimpleNamespace, tmp_path: Path) -> None:
    """[diff] fail-on = "breaking" lets warnings pass; the command line wins over it."""
    (tmp_path / "mcprec.toml").write_text('[diff]\nfail-on = "breaking"\n'
                                          'normalize = ["timestamps", "uuids", "o"]\n'
                                          '[diff.normalizers]\no = "ORD-[0-9]+"\n')
    assert run_mcprec("diff", clock.ref("r1"), clock.ref("v2"), cwd=tmp_path).returncode == 0
    assert run_mcprec("diff", clock.ref("r1"), clock.ref("v2"), "--fail-on", "warning",
                      cwd=tmp_path).returncode == 1


@pytest.mark.parametrize("args, config, message", [
    (["--fail-on", "warnings"], "", "Invalid value for '--fail-on'"),
    ([], '[diff]\nfail-on = "all"\n', "fail-on must be one of breaking, warning, any"),
    ([], "[diff]\nsurface-only = 1\n", "surface-only must be true or false"),
])
def test_bad_gate_input_is_one_line(clock: SimpleNamespace, tmp_path: Path, args: list[str],
                                    config: str, message: str) -> None:
    """A bad --fail-on or config value: one line on stderr, exit 2."""
    if config:
        (tmp_path / "mcprec.toml").write_text(config)
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("r2"), *args, cwd=tmp_path)
    err = out.stderr.decode()
    assert out.returncode == 2 and message in err and len(err.strip().splitlines()) == 1, err


# --- --surface-only -----------------------------------------------------------------------------


def test_surface_only_ignores_call_results(clock: SimpleNamespace) -> None:
    """Without normalizers r1 and r2 differ in their answers; their surface is equal."""
    assert not diff(clock.ref("r1"), clock.ref("r2")).equal
    result = diff(clock.ref("r1"), clock.ref("r2"), surface_only=True)
    assert result.equal and result.exchanges == [] and result.latency == []
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("r2"), "--surface-only")
    assert out.returncode == 0
    text = out.stdout.decode()
    assert "Exchanges: not compared (--surface-only)" in text and "Latency" not in text


def test_surface_only_still_sees_the_catalog(clock: SimpleNamespace) -> None:
    """v2 against r1, surface only: the description change alone; v3's new input breaks."""
    result = diff(clock.ref("r1"), clock.ref("v2"), surface_only=True)
    assert [(c.name, c.kind) for c in result.summary.changes] == [("lookup",
                                                                   "description_changed")]
    assert result.counts == {"breaking": 0, "warning": 1, "compatible": 0}
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("v3"), "--surface-only", "--format",
                     "json")
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["surface_only"] and data["exchanges"] == []
    assert data["counts"] == {"breaking": 1, "warning": 0, "compatible": 0}


# --- --format github ----------------------------------------------------------------------------


def test_escaping_follows_the_workflow_command_rules() -> None:
    """%, CR and LF in messages; also : and , in properties."""
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert annotation("error", "t: x", "m\nn", "c,d.db") == "::error file=c%2Cd.db,title=t%3A x::m%0An"


def test_github_annotations_for_breaking_and_warnings(clock: SimpleNamespace,
                                                      tmp_path: Path) -> None:
    """::error for breaking findings, ::warning for the rest, file= the cassette; then the
    Markdown, which also lands in $GITHUB_STEP_SUMMARY."""
    summary = tmp_path / "summary.md"
    summary.write_text("before\n")
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("v3"), *NORMALIZE, "--format", "github",
                     env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert out.returncode == 1
    stdout = out.stdout.decode()
    found = parse_annotations(stdout)
    assert found and all(a["file"] == str(clock.cassette) for a in found)
    errors = [a for a in found if a["level"] == "error"]
    titles = sorted(a["title"] for a in errors)
    assert titles[0] == "mcprec: breaking change: tool lookup"
    assert titles[1].startswith('mcprec: breaking exchange: tools/call lookup {"id":') and len(
        titles) == 2
    change = next(a for a in errors if a["title"].endswith("tool lookup"))
    assert change["message"].startswith("required input 'region' added (")
    call = next(a for a in errors if "exchange" in a["title"])
    assert "\n" in call["message"] and call["message"].startswith("error appeared: tool error")
    assert [a["level"] for a in found] == sorted(a["level"] for a in found)  # errors first
    markdown = stdout[stdout.index("## "):]
    assert "**BREAKING** tool `lookup`" in markdown
    assert summary.read_text() == "before\n" + markdown + "\n"


def test_github_warnings_only(clock: SimpleNamespace) -> None:
    """v2: no ::error, a ::warning per warning finding; --fail-on breaking exits 0."""
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("v2"), *NORMALIZE, "--format", "github",
                     "--fail-on", "breaking")
    found = parse_annotations(out.stdout.decode())
    assert out.returncode == 0
    assert {a["level"] for a in found} == {"warning"}
    titles = {a["title"] for a in found}
    assert "mcprec: warning change: tool lookup" in titles
    assert any(t.startswith("mcprec: warning exchange: tools/call create_order") for t in titles)


def test_github_equal_prints_no_annotations(clock: SimpleNamespace) -> None:
    """Equal runs: no workflow command at all, only the Markdown verdict."""
    out = run_mcprec("diff", clock.ref("r1"), clock.ref("r2"), *NORMALIZE, "--format", "github")
    assert out.returncode == 0
    assert parse_annotations(out.stdout.decode()) == []
    assert out.stdout.decode().startswith("## ✅ mcprec diff")


def test_github_latency_annotations_only_when_latency_counts(clock: SimpleNamespace) -> None:
    """Flagged latencies are annotated with --fail-on-latency (then they fail), not without."""
    flag_all = ["--latency-threshold", "0.0001", "--latency-min-ms", "0"]
    quiet = run_mcprec("diff", clock.ref("r1"), clock.ref("r2"), *NORMALIZE, *flag_all,
                       "--format", "github")
    assert quiet.returncode == 0 and parse_annotations(quiet.stdout.decode()) == []
    loud = run_mcprec("diff", clock.ref("r1"), clock.ref("r2"), *NORMALIZE, *flag_all,
                      "--format", "github", "--fail-on-latency")
    found = parse_annotations(loud.stdout.decode())
    assert loud.returncode == 1
    assert found and all(a["level"] == "warning" and a["title"].startswith("mcprec: slower: ")
                         for a in found)
