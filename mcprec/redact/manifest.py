"""The redaction manifest: which rules redacted a session, kept in the cassette with it.

Recording stores, per session, the packs and rules that redacted it (each user pack by its file
and the SHA-256 of its bytes, never a secret value nor the salt) in ``session_redaction``, and
the salt of hash pseudonyms in ``redaction_salt`` (or nothing, when ``$MCPREC_REDACT_SALT``
keyed them). Replay, verify, redact and scan read it back, so that live traffic is redacted as
the recording was without repeating a flag. A session without a manifest (recorded before
manifests existed) is handled as before: with the rules given and configured.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from . import Rules

from .patterns import SALT_ENV


def for_recording(redact: Any, cassette: Any) -> tuple[Any, dict[str, Any] | None]:
    """``redact`` keyed by the cassette's salt when a rule pseudonymizes (the salt made now if
    the cassette has none, unless ``$MCPREC_REDACT_SALT`` is set), and the manifest to store
    with the session (None for no redactor, or one that is not a ``Redactor``)."""
    from . import Rules

    rules = getattr(redact, "rules", None)
    if not isinstance(rules, Rules):
        return redact, None
    salt = None
    if getattr(redact, "needs_salt", False):
        if getattr(redact, "_salt", None) is not None:  # keyed already (by the cassette's)
            salt = "cassette"
        elif os.environ.get(SALT_ENV):
            salt = "env"
        else:
            salt = "cassette"
            redact = redact.with_salt(cassette.redaction_salt(create=True))
    return redact, rules.manifest(salt=salt)


def recorder_salt(redact: Any, cassette: Any) -> Any:
    """The recorder process's redactor, keyed as ``for_recording`` keyed the session's."""
    if redact is None or not getattr(redact, "needs_salt", False) or os.environ.get(SALT_ENV):
        return redact
    return redact.with_salt(cassette.redaction_salt(create=True))


def salted_for(redact: Any, path: Any) -> Any:
    """``redact`` keyed by the salt of the cassette at ``path`` (made if it has none), when a
    rule pseudonymizes and neither ``$MCPREC_REDACT_SALT`` nor a salt of its own keys it: for
    what is redacted outside the session's writer (the recording proxy's headers)."""
    if not getattr(redact, "needs_salt", False) or os.environ.get(SALT_ENV) or getattr(
            redact, "_salt", None) is not None:
        return redact
    from ..cassette import Cassette

    with Cassette.open(path, create=True) as c:
        return redact.with_salt(c.redaction_salt(create=True))


def rules_from_manifest(manifest: Mapping[str, Any], *, cassette_path: Any = None,
                        session: str | None = None, given: Iterable[Any] = ()) -> Rules:
    """The rules a manifest names. Each user pack is read again from its file, which must hold
    the very bytes it held then (found as recorded, relative to the working directory, or
    next to the cassette); otherwise a one-line ``UsageError`` naming the file, unless that
    file's current version is among the packs ``given`` on the command line: giving it there
    says to use this version (and ``redact`` then re-redacts the cassette with it)."""
    import hashlib

    from . import Rules
    from .packs import PACKS, parse_pack

    names = [str(p) for p in manifest.get("packs", ())]
    user = []
    of = f" (session {session!r})" if session else ""
    for entry in manifest.get("user_packs", ()):
        file, digest = str(entry.get("file", "")), str(entry.get("sha256", ""))
        candidates = [Path(file)]
        if cassette_path is not None and not os.path.isabs(file):
            candidates.append(Path(cassette_path).parent / file)
        found = None
        differs = None
        for c in candidates:
            try:
                data = c.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == digest:
                found = parse_pack(data.decode("utf-8", "replace"), file, sha256=digest)
                break
            differs = c
        if found is None and differs is not None:
            here = differs.resolve()
            found = next((p for p in given if Path(p.file).resolve() == here), None)
        if found is None:
            if differs is not None:
                raise UsageError(
                    f"redaction pack {differs} differs from the one that redacted the "
                    f"recording{of} (sha256 {digest[:12]}...); restore that version of it, or "
                    f"give it with --redact-pack {differs} to use this one (`mcprec redact "
                    f"CASSETTE --redact-pack {differs}` re-redacts the cassette with it)")
            raise UsageError(f"redaction pack {file} not found; the recording{of} was redacted "
                             "with it: run from the directory holding it")
        user.append(found)
    strategy = manifest.get("strategy")
    return Rules(
        paths=tuple(manifest.get("paths", ())), keys=tuple(manifest.get("keys", ())),
        patterns=tuple(manifest.get("patterns", ())), defaults="credentials" in names,
        env=bool(manifest.get("env", True)), packs=tuple(n for n in names if n in PACKS),
        user_packs=tuple(user), strategy=None if strategy == "replace" else strategy,
        env_names=tuple(manifest.get("env_names", ())))


def _salt(manifests: Iterable[Mapping[str, Any]], cassette: Any) -> bytes | None:
    modes = {m.get("salt") for m in manifests} - {None}
    if "env" in modes and not os.environ.get(SALT_ENV):
        raise UsageError(f"the recording's pseudonyms were keyed by ${SALT_ENV}; set it as "
                         "it was when recording")
    if "cassette" in modes:
        return cassette.redaction_salt()
    return None


def session_redactor(base: Any, cassette: Any, sessions: Iterable[Any], *,
                     salted: bool = True) -> Any:
    """The redactor for live traffic played against (or compared with) ``sessions``: ``base``
    (None: the defaults and the config files) plus the rules of the sessions' manifests, keyed
    by the salt they were recorded with. ``base`` itself when the manifests add nothing to it
    (or there are none: a cassette from before manifests). Without ``salted`` (a scan finds
    values in clear, it makes no pseudonyms), no salt is looked for."""
    sessions = list(sessions)
    read = getattr(cassette, "redaction_manifests", None)
    manifests = read(sessions) if read is not None else {}
    if not any(adds_to_defaults(m) for m in manifests.values()):
        return base  # the defaults alone (or no manifest): nothing to load, as before
    from . import Redactor, Rules

    if base is not None and not isinstance(getattr(base, "rules", None), Rules):
        return base  # a redactor of the caller's own making: theirs to keep
    names = {s.id: s.name for s in sessions}
    rules: Rules | None = None
    for sid, m in manifests.items():
        r = rules_from_manifest(m, cassette_path=cassette.path, session=names.get(sid),
                                given=getattr(getattr(base, "rules", None), "user_packs", ()))
        rules = r if rules is None else rules.merged(r)
    assert rules is not None
    if base is None:
        from . import default_redactor

        base = default_redactor()
    from dataclasses import replace

    salt = _salt(manifests.values(), cassette) if salted else None
    # a manifest says what was applied, not what must not be: rules given or configured here
    # stay on (today's defaults on a session recorded without them, as before manifests)
    merged = replace(base.rules.merged(rules), defaults=base.rules.defaults or rules.defaults,
                     env=base.rules.env or rules.env)
    return Redactor(merged, salt=salt)


def redactor_like(base: Any, cassette: Any, session: Any) -> Any:
    """The redactor that writes new traffic as ``session`` was written (verify's run beside
    it, replay's live traffic appended to it): ``base`` plus its manifest's rules, keyed by
    the same salt; the defaults and the config files when ``base`` is None."""
    found = session_redactor(base, cassette, [session])
    if found is not None:
        return found
    from . import default_redactor

    return default_redactor()


def adds_to_defaults(manifest: Mapping[str, Any]) -> bool:
    """Whether a manifest names more than the default rules (as ``Rules.adds_to_defaults``)."""
    return bool(list(manifest.get("packs", ())) != ["credentials"] or manifest.get("user_packs")
                or manifest.get("paths") or manifest.get("keys") or manifest.get("patterns")
                or manifest.get("env_names") or manifest.get("env") is False
                or manifest.get("strategy", "replace") != "replace")


def describe(manifest: Mapping[str, Any] | None) -> str:
    """One line for ``show``: ``credentials, pii (hash); user pack crm (crm.toml)``."""
    if manifest is None:
        return "none recorded (a cassette from before redaction manifests)"
    packs = ", ".join(manifest.get("packs") or ["no rules"])
    out = f"{packs} ({manifest.get('strategy') or 'replace'})"
    extra = [f"{len(manifest[k])} {k}" for k in ("paths", "keys", "patterns", "env_names")
             if manifest.get(k)]
    if extra:
        out += "; " + ", ".join(extra)
    files = [f"{p.get('name')} from {p.get('file')}" for p in manifest.get("user_packs", ())]
    if files:
        out += "; " + ", ".join(files)
    return out
