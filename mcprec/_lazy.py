"""orjson, imported where it is first used rather than where it is named.

Importing orjson imports dataclasses, inspect, ast, dis, uuid and json with it: 15-19 ms, half of
a replay's start-up to its first answer, which needs no JSON parser when the client sends
``initialize`` as it was recorded (matched by its bytes). Modules on replay's path name orjson
through this module; everything else imports it as usual.

Not ``importlib.util.LazyLoader``: that puts a module that loads on first touch into
``sys.modules`` for every importer, and on Python 3.11 a second thread touching it while it
loads can see it half-filled. Here the real module is imported normally (under the import lock)
and copied into a stand-in that only the modules naming it hold.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import orjson as orjson
else:
    _Module = type(sys)

    class _Deferred(_Module):
        """A module that imports its namesake at the first attribute asked of it."""

        def __getattr__(self, attr: str):
            real = __import__(self.__name__)
            self.__dict__.update(vars(real))
            self.__class__ = _Module  # from now on, a plain module: nothing left to intercept
            return getattr(real, attr)

    orjson = _Deferred("orjson")
