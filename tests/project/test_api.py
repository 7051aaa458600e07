"""The public Python API is pinned: ``mcprec.__all__`` is the documented list, every name in it
imports, and importing ``mcprec`` alone loads none of it."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys

import mcprec

PUBLIC = [
    "__version__",
    "Cassette", "Session", "Message", "open_cassette",
    "record_stdio", "record_http",
    "replay_stdio", "replay_http", "ReplaySettings", "MatchOptions",
    "diff_sessions", "assert_no_breaking_changes", "run_verification",
    "Redactor", "Rules",
    "McprecError", "CassetteError", "NoMatchError",
]


def test_all_is_the_pinned_list() -> None:
    """Adding or removing a public name is a decision this test makes visible."""
    assert sorted(mcprec.__all__) == sorted(PUBLIC)
    assert len(set(mcprec.__all__)) == len(mcprec.__all__)


def test_docstring_lists_exactly_the_public_names() -> None:
    """The package docstring, the documented list, names each public name once."""
    documented = re.findall(r"``(\w+)``", (mcprec.__doc__ or "").split("public surface", 1)[1])
    assert sorted(n for n in documented if n != "__all__") == sorted(mcprec.__all__)


def test_every_public_name_imports_from_where_it_lives() -> None:
    """Each name resolves (lazily) to the object of the module that defines it."""
    for name in mcprec.__all__:
        value = getattr(mcprec, name)
        if name != "__version__":
            home = mcprec._EXPORTS[name]
            assert getattr(sys.modules[home], name) is value
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__.startswith("mcprec.")


def test_type_checkers_see_the_same_names() -> None:
    """The imports under TYPE_CHECKING (what mypy and editors see) match the lazy table."""
    tree = ast.parse(inspect.getsource(mcprec))
    (block,) = [n for n in tree.body if isinstance(n, ast.If)
                and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    seen = {alias.name: f"mcprec{'.' + node.module if node.module else ''}"
            for node in block.body if isinstance(node, ast.ImportFrom) and node.module != "typing"
            for alias in node.names}
    assert seen == mcprec._EXPORTS


def test_star_import_works_and_import_alone_loads_nothing() -> None:
    """`from mcprec import *` gives every name; `import mcprec` loads no submodule."""
    code = (
        "import sys, mcprec\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('mcprec.'))\n"
        "assert not loaded, loaded\n"
        "from mcprec import *\n"
        "missing = [n for n in mcprec.__all__ if n not in globals()]\n"
        "assert not missing, missing\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
