"""What the commands share: one-line errors, the group and server-command classes, the
redaction options, and the parsers of sizes and durations (replay's settings: `ReplaySettings`)."""

from __future__ import annotations

import functools
from typing import Any

import click

from ..errors import McprecError
from ..terminal import safe_lines


class CommandError(click.ClickException):
    """A domain error shown as one line, ``mcprec: <message>``, and its exit status (1 by
    default; 2 for trouble in diff, verify and lint, whose 1 means "different" or "findings")."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click reads it per instance

    def show(self, file: Any = None) -> None:
        click.echo(f"mcprec: {safe_lines(self.format_message())}", err=True)


TROUBLE = 2
"""The exit status of diff, verify and lint when they could not run (1 is their verdict)."""


def trouble(message: str) -> CommandError:
    """A ``CommandError`` with exit status 2 (``TROUBLE``)."""
    return CommandError(message, TROUBLE)


def write_report(text: str, output: str, said: str) -> None:
    """A report on stdout (``output`` ``-``), or into the file ``output`` with one stderr line,
    ``mcprec: <said>; the report is in <output>``."""
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise trouble(f"cannot write {output}: {e.strerror}") from e
    click.echo(f"mcprec: {safe_lines(said)}; the report is in {output}", err=True)


def session_choice(f: Any) -> Any:
    """``-s NAME``, as ``replay`` and ``record`` take a session, besides the command's SESSION
    argument: the command gets one ``session``."""
    @click.option("-s", "--session", "session_opt", metavar="NAME",
                  help="The session (the same as the SESSION argument, as replay and record "
                       "take it).")
    @functools.wraps(f)
    def command(*args: Any, session_opt: str | None = None, session: str | None = None,
                **kwargs: Any) -> Any:
        if session_opt is not None:
            if session is not None and session != session_opt:
                raise click.UsageError(f"two sessions given: {session!r} and -s {session_opt!r}")
            session = session_opt
        return f(*args, session=session, **kwargs)

    return command


def open_file(path: str, mode: str) -> Any:
    """``open(path, mode)`` for a command, or a one-line error naming the file."""
    try:
        return open(path, mode)  # noqa: SIM115 - the caller closes it
    except OSError as e:
        verb = "read" if mode.startswith("r") else "write"
        raise CommandError(f"cannot {verb} {path}: {e.strerror}") from e


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except McprecError as e:
            raise CommandError(str(e), e.exit_code) from e
        except KeyboardInterrupt:
            raise CommandError("interrupted", 130) from None


class _ServerCommand(click.Command):
    """A command whose last argument is a server's command line. The server's own options must
    pass through unparsed, but an option of ours that does not exist, given before the
    server, is a typo: "no such option", not a server called ``--script``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        for param in self.params:
            value = ctx.params.get(param.name or "") if isinstance(param, click.Argument) else None
            first = value[0] if isinstance(value, tuple) and value else value
            if isinstance(first, str) and first.startswith("-") and first != "-":
                import difflib

                name = first.split("=", 1)[0]
                known = [o for p in self.params if isinstance(p, click.Option)
                         for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
                raise click.NoSuchOption(name, possibilities=difflib.get_close_matches(
                    name, known, n=1), ctx=ctx)
        return rest


def _parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {v!r}", param_hint="--tag")
        tags[key] = value
    return tags


CASSETTE_HELP = "Cassette file (SQLite). Default: $MCPREC_CASSETTE or cassettes/<server>.db."


_REDACT_META = "mcprec.redact"


def _redact_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Packs, strategy and env names reach ``_redactor`` through the context, so that the
    commands' signatures stay as they are."""
    ctx.meta.setdefault(_REDACT_META, {})[param.name] = value
    return value


def redaction_options(f: Any) -> Any:
    """--redact-path / --redact-key / --redact-pattern / --redact-pack / --redact-strategy /
    --redact-env / --no-default-redactions, shared by every command that redacts."""
    f = click.option("--no-default-redactions", "no_default_redactions", is_flag=True,
                     expose_value=False, callback=_redact_option,
                     help="Turn the credentials pack (the default rules) off; the packs and "
                          "rules given still apply.")(f)
    f = click.option("--redact-env", "redact_env", multiple=True, metavar="NAME",
                     expose_value=False, callback=_redact_option,
                     help="Also redact the value of the environment variable NAME, whatever "
                          "its name (repeatable; the name is kept in the manifest, the value "
                          "never).")(f)
    f = click.option("--redact-strategy", "redact_strategy",
                     type=click.Choice(["replace", "hash", "mask"]), expose_value=False,
                     callback=_redact_option,
                     help="How rules without a strategy of their own replace what they find: "
                          "replace ([REDACTED]), hash (a stable pseudonym such as "
                          "<email:3f9a1c2b>) or mask (****1111). Credentials are always "
                          "replaced.")(f)
    f = click.option("--redact-pack", "redact_packs", multiple=True, metavar="PACK|FILE",
                     expose_value=False, callback=_redact_option,
                     help="Also apply a pack of rules: pii (emails, phones, IP addresses, "
                          "IBANs, card numbers, SSNs, JWTs, private keys), paths (home and "
                          "absolute paths), or a TOML file of your own (repeatable).")(f)
    f = click.option("--redact-pattern", "redact_patterns", multiple=True, metavar="REGEX",
                     help="Also redact what this regular expression matches (repeatable).")(f)
    f = click.option("--redact-key", "redact_keys", multiple=True, metavar="NAME",
                     help="Also redact the values of keys with this name (repeatable).")(f)
    f = click.option("--redact-path", "redact_paths", multiple=True, metavar="PATH",
                     help="Also redact the value at this JSON path in every message, e.g. "
                          "params.arguments.password (repeatable).")(f)
    return f


def _redactor(paths: tuple[str, ...], keys: tuple[str, ...], patterns: tuple[str, ...]) -> Any:
    """Defaults + the project's config file + the command line. (Replay, verify, redact and
    scan add each session's own rules, from its redaction manifest.)"""
    from ..redact import Redactor, Rules, rules_from_config, split_packs

    ctx = click.get_current_context(silent=True)
    more = ctx.meta.get(_REDACT_META, {}) if ctx is not None else {}
    packs, files = split_packs(more.get("redact_packs") or ())
    return Redactor(rules_from_config().merged(Rules(
        paths=paths, keys=keys, patterns=patterns, packs=packs, user_packs=files,
        strategy=more.get("redact_strategy"), env_names=more.get("redact_env") or (),
        defaults=not more.get("no_default_redactions"))))


def _size(value: str, hint: str) -> int:
    """``256M`` -> 268435456 (K, M, G are powers of 1024; a plain number is bytes)."""
    text = value.strip().upper().rstrip("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    try:
        size = int(float(number) * scale)
    except ValueError:
        raise click.BadParameter(f"expected a size such as 64M or 1G, got {value!r}",
                                 param_hint=hint) from None
    if size < 1024:
        raise click.BadParameter("must be at least 1K", param_hint=hint)
    return size


def _duration(value: str, hint: str, *, zero: bool = False) -> float:
    """``500ms``, ``2s``, ``1.5m``, ``1h`` (or a plain number of seconds) -> seconds (the
    spelling ``ReplaySettings`` reads)."""
    from ..replay.settings import SettingError, parse_duration

    try:
        return parse_duration(value, hint, zero=zero)
    except SettingError as e:
        raise click.UsageError(str(e)) from None


def _session_idle(value: str) -> float | None:
    """``--session-idle``: a duration, or ``off`` (None: sessions never expire)."""
    if value.strip() == "off":
        return None
    return _duration(value, "--session-idle")


SESSION_IDLE_HELP = (
    "With --http or --target: end a client's session after DURATION without a request in "
    "flight (a client that left without DELETE), releasing what it holds (the proxy ends its "
    "cassette session; replay answers it 404 'Session not found' after, as a real server "
    "does). off: never.")
