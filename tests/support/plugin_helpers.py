"""Shared by the tests of the pytest plugin, which run pytest in pytester: the inner runs'
options, an inner test that calls a tool through ``mcprec_server``, and a fixture that keeps
this run's $MCPREC_MODE out of the inner runs."""

from __future__ import annotations

import sys
import textwrap

import pytest

from support.helpers import SDK_SERVER

# the hypothesis plugin takes ~1 s to set up in every in-process run, and is not used there
INNER_ARGS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
SDK = [sys.executable, str(SDK_SERVER)]

ADD_TEST = '''
import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client


@pytest.mark.mcprec({marker})
def test_add(mcprec_server):
    async def main():
        async with stdio_client(mcprec_server.params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return (await s.call_tool("add", {{"a": 2, "b": 3}})).structured_content
    assert anyio.run(main) == {{"result": 5}}
{more}'''


def add_test(marker: str, more: str = "") -> str:
    """An inner test module: ``test_add``, marked ``@pytest.mark.mcprec(<marker>)``, calls
    add(2, 3) with the SDK's client through ``mcprec_server``, then runs ``more`` (its body)."""
    return ADD_TEST.format(marker=marker, more=textwrap.indent(textwrap.dedent(more), "    "))


@pytest.fixture(autouse=True)
def no_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs take their mode from what each test gives, not from this run's."""
    monkeypatch.delenv("MCPREC_MODE", raising=False)
