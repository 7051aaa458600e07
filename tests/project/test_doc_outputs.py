"""The sample outputs of README.md and docs/quickstart.md are today's: each block marked
`<!-- checked: COMMAND [| as PATH] -->` is compared with what COMMAND prints, run from the
checkout on the golden cassette (`as PATH`: the cassette's path as the text calls it). A line
`...` in the block stands for any lines; every other line must be one of the output's, in
order, and lines not separated by `...` must follow each other."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from support.helpers import MCPREC

ROOT = Path(__file__).resolve().parents[2]
DOCS = {"README.md": 1, "docs/quickstart.md": 2}
"""Each file, and how many checked blocks it has at least."""
MARK = re.compile(r"<!-- checked: (.+?) -->\n")


def checked_blocks(path: Path) -> list[tuple[list[str], list[str]]]:
    """(the marks' commands, the block's lines) of each checked block of ``path``."""
    text = path.read_text()
    out = []
    pos = 0
    while (m := MARK.search(text, pos)) is not None:
        commands = [m.group(1)]
        at = m.end()
        while (more := MARK.match(text, at)) is not None:
            commands.append(more.group(1))
            at = more.end()
        assert text.startswith("```\n", at), f"{path}: a checked mark must precede a ``` block"
        end = text.index("\n```\n", at + 4)
        out.append((commands, text[at + 4:end].split("\n")))
        pos = end
    return out


def output_of(command: str) -> list[str]:
    cmd, _, alias = command.partition(" | as ")
    argv = shlex.split(cmd)
    assert argv[0] == "mcprec", command
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    env.update(NO_COLOR="1", COLUMNS="200")
    r = subprocess.run([*MCPREC, *argv[1:]], capture_output=True, cwd=ROOT, env=env, timeout=60)
    text = r.stdout.decode()
    if alias:
        text = text.replace("cassettes/golden/weather.db", alias.strip())
    return text.splitlines()


def follows(block: list[str], real: list[str]) -> str | None:
    """None when ``block`` matches ``real`` (``...`` lines are gaps); else what does not."""
    at = 0
    gap = True  # a block may start anywhere in the output
    for line in block:
        if line.strip() in ("...", "…"):
            gap = True
            continue
        if gap:
            try:
                at = real.index(line.rstrip(), at) + 1
            except ValueError:
                return f"not in the output (after line {at}): {line!r}"
        else:
            if at >= len(real) or real[at] != line.rstrip():
                return f"expected {line!r} at output line {at + 1}, got {real[at] if at < len(real) else 'the end'!r}"
            at += 1
        gap = False
    return None


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_sample_outputs_are_todays(doc: str) -> None:
    """Every checked block of the file is what its commands print today."""
    blocks = checked_blocks(ROOT / doc)
    assert len(blocks) >= DOCS[doc], f"{doc} should have {DOCS[doc]} checked blocks"
    for commands, lines in blocks:
        real = [line for c in commands for line in output_of(c)]
        problem = follows(lines, real)
        assert problem is None, f"{doc}, the output of {commands}: {problem}\n" + "\n".join(real)


def test_the_check_catches_a_stale_line() -> None:
    """A line the output no longer has, or lines out of order, fail the check."""
    real = ["a", "b", "c", "d"]
    assert follows(["a", "b", "...", "d"], real) is None
    assert follows(["b", "c"], real) is None
    assert follows(["a", "c"], real) is not None
    assert follows(["a", "...", "x"], real) is not None
    assert follows(["d", "...", "a"], real) is not None
