"""What to redact: ``Rules`` (beyond the defaults), and reading them from the configuration."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .patterns import STRATEGIES


@dataclass
class Rules:
    """What to redact, beyond the defaults (which ``defaults=False`` turns off)."""

    paths: Sequence[str] = ()
    """JSON paths into each message, e.g. ``params.arguments.password``; ``*`` is a wildcard."""
    keys: Sequence[str] = ()
    """Extra key names whose values are secrets, anywhere in a message."""
    patterns: Sequence[str] = ()
    """Extra regular expressions; what they match is replaced inside strings."""
    defaults: bool = True
    """The ``credentials`` pack: secret headers, known secret formats, secret-named keys."""
    env: bool = True
    """Also redact the values of this process's secret-named environment variables."""
    extra_values: Sequence[str] = field(default_factory=list)
    packs: Sequence[str] = ()
    """Bundled packs besides ``credentials``: ``pii``, ``paths``."""
    user_packs: Sequence[Any] = ()
    """``mcprec.redact.packs.UserPack`` objects, read from their TOML files."""
    strategy: str | None = None
    """``replace`` (None: the same), ``hash`` or ``mask``: for every rule that names none,
    except the credentials rules and secret values, which always replace."""
    env_names: Sequence[str] = ()
    """Environment variables whose values are redacted, whatever their names."""

    def to_dict(self) -> dict[str, Any]:
        """Everything, user packs' text included, for a process of mcprec's own (the
        recorder); ``manifest`` is what a cassette keeps."""
        return {"paths": list(self.paths), "keys": list(self.keys),
                "patterns": list(self.patterns), "defaults": self.defaults, "env": self.env,
                "extra_values": list(self.extra_values), "packs": list(self.packs),
                "user_packs": [p.to_dict() for p in self.user_packs],
                "strategy": self.strategy, "env_names": list(self.env_names)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rules:
        packs: list[Any] = []
        if d.get("user_packs"):
            from .packs import UserPack

            packs = [UserPack.from_dict(p) for p in d["user_packs"]]
        return cls(paths=tuple(d.get("paths", ())), keys=tuple(d.get("keys", ())),
                   patterns=tuple(d.get("patterns", ())), defaults=bool(d.get("defaults", True)),
                   env=bool(d.get("env", True)), extra_values=list(d.get("extra_values", ())),
                   packs=tuple(d.get("packs", ())), user_packs=tuple(packs),
                   strategy=d.get("strategy"), env_names=tuple(d.get("env_names", ())))

    def merged(self, other: Rules) -> Rules:
        def union(a: Sequence[Any], b: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        users = {(p.file, p.sha256): p for p in (*self.user_packs, *other.user_packs)}
        return Rules(
            paths=union(self.paths, other.paths), keys=union(self.keys, other.keys),
            patterns=union(self.patterns, other.patterns),
            defaults=self.defaults and other.defaults,
            env=self.env and other.env, extra_values=[*self.extra_values, *other.extra_values],
            packs=union(self.packs, other.packs), user_packs=tuple(users.values()),
            strategy=other.strategy or self.strategy,
            env_names=union(self.env_names, other.env_names),
        )

    @property
    def pack_names(self) -> list[str]:
        """Every pack in use, bundled and user ones: ``credentials``, ``pii``, ``crm`` ..."""
        return [*(["credentials"] if self.defaults else []), *self.packs,
                *(p.name for p in self.user_packs)]

    @property
    def adds_to_defaults(self) -> bool:
        """Whether these rules do more than the defaults (``Rules()``) do."""
        return bool(self.paths or self.keys or self.patterns or self.extra_values or self.packs
                    or self.user_packs or self.env_names or self.strategy not in (None, "replace")
                    or not self.defaults or not self.env)

    def manifest(self, *, salt: str | None = None) -> dict[str, Any]:
        """What a cassette keeps of these rules, per session: packs, rules, the SHA-256 of each
        user pack's file (not its text), never a secret value nor the salt (``salt`` says only
        where it comes from: ``cassette`` or ``env``)."""
        return {"version": 1, "packs": self.pack_names,
                "user_packs": [{"name": p.name, "file": p.file, "sha256": p.sha256}
                               for p in self.user_packs],
                "strategy": self.strategy or "replace", "paths": list(self.paths),
                "keys": list(self.keys), "patterns": list(self.patterns), "env": self.env,
                "env_names": list(self.env_names), "salt": salt}


REDACT_KEYS = ("paths", "keys", "patterns", "defaults", "env", "packs", "strategy", "env_names")


def rules_from_config(path: str | os.PathLike[str] | None = None,
                      cwd: str | os.PathLike[str] = ".") -> Rules:
    """Rules from ``[redact]`` in ./mcprec.toml and ``[tool.mcprec.redact]`` in ./pyproject.toml
    (lists add up; ``defaults`` / ``env`` turned off by either file stay off)."""
    rules = Rules()
    from ..config import mentions, sections, string_list

    if path is None and not mentions(b"redact", cwd=cwd):
        return rules  # no file here says a word of redaction: no TOML to parse (~10 ms)
    from ..errors import UsageError

    for p, table in sections("redact", path, cwd):
        unknown = sorted(set(table) - set(REDACT_KEYS))
        if unknown:
            raise UsageError(f"config file {p}: unknown redact setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(REDACT_KEYS)}")
        for flag in ("defaults", "env"):
            if flag in table and not isinstance(table[flag], bool):
                raise UsageError(f"config file {p}: {flag} must be true or false")
        strategy = table.get("strategy")
        if strategy is not None and strategy not in STRATEGIES:
            raise UsageError(f"config file {p}: strategy must be one of {', '.join(STRATEGIES)}")
        bundled, files = split_packs(string_list(table, "packs", p), base=p.parent)
        rules = rules.merged(Rules(
            paths=tuple(string_list(table, "paths", p)), keys=tuple(string_list(table, "keys", p)),
            patterns=tuple(string_list(table, "patterns", p)),
            defaults=table.get("defaults", True), env=table.get("env", True),
            packs=bundled, user_packs=files, strategy=strategy,
            env_names=tuple(string_list(table, "env_names", p))))
    return rules


def split_packs(names: Sequence[str], base: str | os.PathLike[str] | None = None
                ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """``--redact-pack`` values: bundled pack names, and user packs read from their TOML
    files (a value holding a path separator or ending in ``.toml``; relative to ``base``)."""
    bundled: list[str] = []
    files: list[Any] = []
    for name in names:
        if "/" in name or os.sep in name or name.endswith(".toml"):
            from .packs import load_pack

            path = name if base is None or os.path.isabs(name) else os.path.join(base, name)
            files.append(load_pack(os.path.normpath(path) if base is not None else path))
        else:
            if name not in ("credentials", "pii", "paths"):
                from ..errors import UsageError

                raise UsageError(f"unknown redaction pack {name!r}; bundled: credentials, pii, "
                                 "paths (a user pack is a TOML file: ./name.toml)")
            if name != "credentials":
                bundled.append(name)
    return tuple(bundled), tuple(files)
