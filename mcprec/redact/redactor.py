"""``Redactor``: applies ``Rules`` to raw messages, and finds what they would catch."""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .. import wire
from ..jsonpath import update_path
from .headers import KEPT_HEADERS, SCHEME_KEPT_HEADERS, SECRET_HEADER_WORDS, _norm_header
from .patterns import (
    _ANCHORS, _BLOB_MIN, _KEY_WORDS, _LEADS, _LED_MAX, _MASK, _PLACEHOLDER_B, _REQUIRED, _TOKEN,
    KNOWN_SECRET_PATTERNS, PLACEHOLDER, SALT_ENV, SECRET_KEYS, STRATEGIES, _norm_key, env_secrets,
)
from .prefilter import _blob_parts, _Gated, _gated, _key_names, _Literals
from .rules import Rules, rules_from_config
from .values import (
    _COMPACT, _JSON_OPENERS, _MIN_NAMED_ENV_LEN, _all_placeholders, _as_json_text, _bare_number,
    _json_in, _Lazy, _path_kind, _placeholder_at,
)


class Redactor:
    """Applies ``Rules`` to raw messages (``redact``) and finds what they would catch (``scan``).

    ``salt`` keys the ``hash`` strategy's pseudonyms; without one, ``$MCPREC_REDACT_SALT``,
    else a random salt of this redactor's own (stable within it only). Recording binds the
    cassette's salt (``with_salt``)."""

    def __init__(self, rules: Rules | None = None, *, salt: bytes | None = None) -> None:
        self.rules = rules = rules or Rules()
        self._salt = salt
        from ..jsonpath import parse_path

        self.strategy = rules.strategy or "replace"
        if self.strategy not in STRATEGIES:
            from ..errors import UsageError

            raise UsageError(f"unknown redaction strategy {self.strategy!r}; known: "
                             f"{', '.join(STRATEGIES)}")
        # (name, pattern, anchors, rule): rule None replaces with the placeholder (the fast
        # path); a rule (mcprec.redact.packs.PatternRule) validates and picks a strategy
        checks: list[tuple[str, str, tuple[str, ...] | None, Any]] = []
        combined: list[Any] = []  # bundled rules with no anchor: one pass for all of them
        key_rules: dict[str, tuple[str, str | None, str | None]] = {}
        path_rules: list[tuple[Any, str, str | None, str | None]] = []
        if rules.defaults:
            checks += [(name, p, _ANCHORS.get(name), None)
                       for name, p in KNOWN_SECRET_PATTERNS.items()]
        for i, p in enumerate(rules.patterns):
            try:
                compiled = re.compile(p)
            except re.error as e:
                from ..errors import UsageError

                raise UsageError(f"bad redaction pattern {p!r}: {e}") from None
            if compiled.fullmatch("") is not None:
                from ..errors import UsageError

                raise UsageError(f"redaction pattern {p!r} matches the empty string: it would "
                                 "put a placeholder between every two characters")
            if self.strategy == "replace":
                checks.append((f"pattern {p!r}", p, None, None))
            else:
                from .packs import PatternRule

                checks.append((f"pattern {p!r}", p, None, PatternRule("pattern", "pattern", p)))
        if rules.packs or rules.user_packs:
            from .packs import BUILTIN, PACKS

            for name in rules.packs:
                if name == "credentials":
                    continue
                if name not in PACKS:
                    from ..errors import UsageError

                    raise UsageError(f"unknown redaction pack {name!r}; bundled: "
                                     f"{', '.join(BUILTIN)} (or give a TOML file)")
                for r in PACKS[name]:
                    if r.anchors is None:
                        combined.append(r)
                    else:
                        checks.append((r.label, r.pattern, r.anchors, r))
            for pack in rules.user_packs:
                checks += [(r.label, r.pattern, r.anchors, r) for r in pack.patterns]
                for kr in pack.keys:
                    for k in kr.keys:
                        key_rules[_norm_key(k)] = (kr.kind, kr.strategy, kr.replacement)
                for pr in pack.paths:
                    path_rules.append((parse_path(pr.path), pr.kind, pr.strategy,
                                       pr.replacement))
        values = {v: "a given secret value" for v in rules.extra_values}
        if rules.env:
            values.update({v: f"value of ${k}" for v, k in env_secrets().items()})
        for name in rules.env_names:
            v = os.environ.get(name, "")
            if len(v) >= _MIN_NAMED_ENV_LEN:
                values[v] = f"value of ${name}"
        for v in sorted(values, key=len, reverse=True):
            checks.append((values[v], re.escape(v), (v,), None))
        # compiled at first use: a message rarely holds an anchor, and compiling every pattern
        # up front cost replay's first redacted request ~20 ms
        self._checks_b = [(name, _Lazy(p.encode()),
                           None if anchors is None else tuple(a.encode() for a in anchors), rule)
                          for name, p, anchors, rule in checks]
        self._checks_s = [(name, _Lazy(p), anchors, rule) for name, p, anchors, rule in checks]
        self._schemes = frozenset(i for i, c in enumerate(checks)
                                  if c[0] in ("bearer token", "basic auth"))
        # flat (anchor, check) pairs: one tight loop of substring tests picks the checks to run
        self._anchors_b = [(a, i) for i, (_, _, anchors, _) in enumerate(self._checks_b)
                           for a in anchors or ()]
        self._anchors_s = [(a, i) for i, (_, _, anchors, _) in enumerate(self._checks_s)
                           for a in anchors or ()]
        self._always = [i for i, (_, _, anchors, _) in enumerate(self._checks_b)
                        if anchors is None]
        # the bundled patterns' own facts (_REQUIRED, _LEADS), for them alone: a pack's rule or a
        # user pattern may share a name, not a pattern
        own = [i for i, (name, p, _, rule) in enumerate(checks)
               if rule is None and KNOWN_SECRET_PATTERNS.get(name) == p]
        required = {i: _REQUIRED[checks[i][0]] for i in own if checks[i][0] in _REQUIRED}
        self._gated_b = _gated(self._anchors_b, {i: g.encode() for i, g in required.items()})
        self._gated_s = _gated(self._anchors_s, required)
        self._required = required
        # the anchors of a large text looked for in one pass (_Literals); built at first use,
        # False where Hyperscan is not to be had
        self._literals: _Literals | bool | None = None if self._anchors_b else False
        self._leads_b = {i: tuple(a.encode() for a in _LEADS[checks[i][0]]) for i in own
                         if checks[i][0] in _LEADS}
        self._leads_s = {i: _LEADS[checks[i][0]] for i in own if checks[i][0] in _LEADS}
        # one pass over the message finds whether any anchor occurs at all (the usual answer:
        # none), before the per-anchor look
        self._any_anchor_b = re.compile(b"|".join(re.escape(a) for a, _ in self._anchors_b)) \
            if self._anchors_b else None
        self._any_anchor_s = re.compile("|".join(re.escape(a) for a, _ in self._anchors_s)) \
            if self._anchors_s else None
        # bundled rules with no anchor: each runs where one of its shapes occurs
        self._shaped = [(r, _Lazy(r.pattern.encode()), _Lazy(r.pattern), r.shapes)
                        for r in combined]
        # secret-named keys: kind, strategy (None: the redactor's), replacement
        if rules.defaults:
            for k in SECRET_KEYS:
                key_rules.setdefault(k, ("secret", "replace", None))
        for k in rules.keys:
            key_rules[_norm_key(k)] = (_norm_key(k) or "value", None, None)
        self._key_rules = key_rules
        self._keys = frozenset(key_rules)
        # a cheap pre-check on raw bytes: does any secret-named key occur at all?
        # a key, or a key of JSON held in a string (a tool's text content: \"password\": ...)
        self._key_probe = re.compile(rb'\\?"([A-Za-z_-]*)\\?"\s*:') if self._keys else None
        self._key_words = _KEY_WORDS if rules.defaults else ()
        if rules.keys or len(key_rules) > (len(SECRET_KEYS) if rules.defaults else 0):
            self._key_words = ()  # user key names can be anything: always look
        for p in rules.paths:
            path_rules.append((parse_path(p), _path_kind(p), None, None))
        self._paths = path_rules
        self._header_keys = frozenset(_norm_header(k) for k in (*rules.keys, *(
            k for pack in rules.user_packs for kr in pack.keys for k in kr.keys)))
        self._header_cache: dict[str, bool] = {}
        self.needs_salt = self.strategy == "hash" and bool(
            combined or rules.patterns or rules.keys or rules.paths or any(
                r[3] is not None for r in checks)) or any(
            r[3] is not None and r[3].strategy == "hash" for r in checks) or any(
            s == "hash" for _, s, _ in key_rules.values()) or any(
            s == "hash" for _, _, s, _ in path_rules)
        """Whether a rule pseudonymizes (``hash``): the cassette then needs its salt."""

    def with_salt(self, salt: bytes | None) -> Redactor:
        """The same rules, with pseudonyms keyed by ``salt``."""
        return Redactor(self.rules, salt=salt)

    # -- strategies

    def _salt_bytes(self) -> bytes:
        if self._salt is None:
            env = os.environ.get(SALT_ENV)
            self._salt = env.encode() if env else os.urandom(32)
        return self._salt

    def _digest(self, kind: str, value: str) -> str:
        import hmac

        return hmac.new(self._salt_bytes(), f"{kind}\0{value}".encode(), "sha256").hexdigest()

    def token(self, kind: str, value: str, strategy: str, replacement: str | None = None) -> str:
        """What a found text value becomes: ``[REDACTED]`` (or the rule's text),
        ``<kind:3f9a1c2b>``, or ``****1111``."""
        if strategy == "hash":
            if kind == "email":  # Ann@Example.com and ann@example.com: one person, one token
                value = value.lower()
            return f"<{kind}:{self._digest(kind, value)[:8]}>"
        if strategy == "mask":
            if kind == "email" and "@" in value:
                return _MASK + value[value.index("@"):]
            tail = [c for c in value if c.isalnum()][-4:]
            return _MASK + "".join(tail)
        return PLACEHOLDER if replacement is None else replacement

    def _number(self, kind: str, digits: str, strategy: str) -> str:
        """A bare JSON number's replacement, a number: 0, its last four digits, or a pseudonym
        of as many digits that fails the Luhn check (so that no rule finds it again)."""
        if strategy == "mask":
            return str(int(digits[-4:]))
        if strategy != "hash":
            return "0"
        h = int(self._digest(kind, digits), 16)
        n = len(digits)
        out = str(10 ** (n - 1) + h % (9 * 10 ** (n - 1)))
        from .packs import luhn_ok

        if luhn_ok(out):
            out = out[:-1] + str((int(out[-1]) + 1) % 10)
        return out

    def _replace_found(self, rule: Any, found: Any, m: Any, json: bool) -> Any:
        is_bytes = isinstance(found, bytes)
        text = found.decode("utf-8", "replace") if is_bytes else found
        if text.startswith(_MASK) or _TOKEN.fullmatch(text):
            return found
        tail = ""
        if rule.validator is not None:
            from .packs import VALIDATORS

            n = VALIDATORS[rule.validator](text)
            if n <= 0:
                return found
            text, tail = text[:n], text[n:]
        strategy = rule.strategy or self.strategy
        if json and rule.numeric and text.isdigit() and _bare_number(m.string, m.start(),
                                                                     m.start() + len(text)):
            out = self._number(rule.kind, text, strategy)
        else:
            value = text
            if rule.validator in _COMPACT:  # the same number, however it is spaced
                value = value.replace(" ", "").replace("-", "")
            if json and "\\" in value:  # the value, not its JSON escapes, is what is hashed
                try:
                    value = orjson.loads(f'"{value}"')
                except orjson.JSONDecodeError:
                    pass
            out = self.token(rule.kind, value, strategy, rule.replacement)
        out += tail
        return out.encode() if is_bytes else out

    def _sub(self, check: tuple[Any, ...], data: Any, json: bool, placeholder: Any) -> Any:
        rule = check[3]
        if rule is None:
            return check[1].sub(placeholder, data)
        return check[1].sub(lambda m: self._replace_found(rule, m.group(0), m, json), data)

    def _shaped_picks(self, data: Any) -> list[tuple[Any, ...]]:
        """The shaped rules (bundled, without anchors) that can match in ``data``."""
        if not self._shaped:
            return []
        from .packs import SHAPE

        shape = (data if isinstance(data, bytes) else data.encode("utf-8", "replace")
                 ).translate(SHAPE)
        return [s for s in self._shaped if any(x in shape for x in s[3])]

    def _sub_shaped(self, data: Any, json: bool) -> Any:
        for rule, rx_b, rx_s, _ in self._shaped_picks(data):
            rx = rx_b if json else rx_s
            data = rx.sub(lambda m, r=rule: self._replace_found(r, m.group(0), m, json), data)
        return data

    # -- headers

    def is_secret_header(self, name: str) -> bool:
        """Whether a header's value is redacted: ``--redact-key`` names (compared ignoring
        case, ``_`` and ``-``), then the default header rules above."""
        lower = name.lower()
        found = self._header_cache.get(lower)
        if found is None:
            if _norm_header(lower) in self._header_keys:
                found = True
            elif not self.rules.defaults or lower in KEPT_HEADERS:
                found = False
            else:
                found = lower in SCHEME_KEPT_HEADERS or any(w in lower
                                                            for w in SECRET_HEADER_WORDS)
            if len(self._header_cache) < 4096:
                self._header_cache[lower] = found
        return found

    def redact_headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict for the cassette: names lower-cased, secret values replaced (the
        scheme of ``Authorization`` kept), and every value cleared of the secrets that messages
        are cleared of (a ``WWW-Authenticate`` challenge names a scheme, not a credential: the
        bearer and basic rules leave it alone). Repeated headers are joined with ", " as HTTP
        allows. Idempotent: headers already redacted stay as they are."""
        out: dict[str, str] = {}
        for name, value in headers:
            lower = name.lower()
            if self.is_secret_header(lower):
                scheme = value.split(" ", 1)[0] if lower in SCHEME_KEPT_HEADERS and " " in value \
                    else ""
                value = f"{scheme} {PLACEHOLDER}" if scheme else PLACEHOLDER
            else:
                value = self._redact_text(value, self._schemes if lower == "www-authenticate"
                                          else frozenset())
            out[lower] = f"{out[lower]}, {value}" if lower in out else value
        return out

    def redact_http(self, http: Mapping[str, Any]) -> dict[str, Any]:
        """A message's HTTP details for the cassette: headers by ``redact_headers``, every
        other text value (a path's query string ...) by the message rules."""
        out: dict[str, Any] = {}
        for k, v in http.items():
            if k == "headers" and isinstance(v, Mapping):
                out[k] = self.redact_headers(v.items())
            elif k == "path" and isinstance(v, str):  # the endpoint stays: replay serves it
                path, sep, query = v.partition("?")
                out[k] = path + self.redact_text(sep + query) if sep else v
            elif isinstance(v, str):
                out[k] = self.redact_text(v)
            else:
                out[k] = v
        return out

    def scan_headers(self, headers: Mapping[str, Any]) -> list[str]:
        """Names of the headers whose values the header rules would redact but are in clear."""
        return [f"secret header {name}" for name, value in headers.items()
                if isinstance(value, str) and self.is_secret_header(name)
                and not value.endswith(PLACEHOLDER)]

    # -- redaction

    def redact(self, raw: bytes) -> bytes:
        """``raw`` with every secret replaced; unchanged bytes when there is nothing to hide.

        Long base64 or hex strings (images, audio, files) are payload, not prose: the patterns
        are not run inside them. That keeps large messages cheap, and it keeps a payload that
        happens to contain, say, ``AIza`` and 35 more characters from being corrupted.
        """
        # a 100 KB message with nothing to redact, in-process, before the shortcuts (_blob_parts,
        # _key_names, _REQUIRED, _LEADS, merged anchors) -> after: a text message 372 -> 256
        # µs, prose 4,000 -> 1,325, source code 15,600 -> 1,410, a tools list 6,200 -> 1,245,
        # an image 290 -> 89 (tests/redact/test_redact_speed_equivalence.py: the same bytes out)
        parts = _blob_parts(raw) if len(raw) > _BLOB_MIN else None
        if parts is not None and len(parts) > 1:  # even: the message around them; odd: payloads
            redacted = [p if i % 2 else self._redact_patterns(p) for i, p in enumerate(parts)]
            raw = b"".join(redacted)
            if bool(self._paths) or any(self._has_secret_key(p) for p in parts[::2]):
                raw = self._redact_keys_and_paths(raw)
            return raw
        raw = self._redact_keys_and_paths(raw) if (
            self._paths or self._has_secret_key(raw)) else raw
        return self._redact_patterns(raw)

    def redact_many(self, raws: Sequence[bytes]) -> list[bytes]:
        """``[self.redact(raw) for raw in raws]``, with the look for anything to redact done
        once over the small messages joined (a secret-named key's words, the patterns' anchors,
        the shaped rules' shapes): only the messages where one of them occurs go through
        ``redact``; the others have nothing to redact, and stay as they are.

        Each look is for a literal (the anchors and key words in the text, the shapes in its
        ``SHAPE`` translation): any occurrence in a message is one in the joined text too, found
        there at the message's offset. 500 ~200 B messages (a recorder's batch), none holding
        one, in-process: 8.1 -> 1.4 µs a message. Paths, and patterns without an anchor, run on
        every message: with those, each goes through ``redact``."""
        if self._paths or self._always or (self._key_probe is not None and not self._key_words):
            return [self.redact(raw) for raw in raws]
        out = list(raws)
        small = [i for i, raw in enumerate(raws) if len(raw) <= _BLOB_MIN]
        if len(small) < len(raws):
            for i in set(range(len(raws))).difference(small):
                out[i] = self.redact(raws[i])
        if not small:
            return out
        starts = []
        at = 0
        for i in small:
            starts.append(at)
            at += len(raws[i]) + 1
        joined = b"\n".join([raws[i] for i in small])
        hits: set[int] = set()

        def mark(data: bytes, literal: bytes) -> None:
            at = data.find(literal)
            while at != -1:
                hits.add(bisect.bisect_right(starts, at) - 1)
                at = data.find(literal, at + 1)

        if self._key_probe is not None:
            low = joined.lower()
            for word in self._key_words:
                mark(low, word)
        picked = self._selected(joined, self._gated_b, self._any_anchor_b)
        if picked:
            for anchor, i in self._anchors_b:
                if i in picked:
                    mark(joined, anchor)
        if self._shaped:
            from .packs import SHAPE

            shape = joined.translate(SHAPE)
            for rule in self._shaped:
                for x in rule[3]:
                    mark(shape, x)
        for n in hits:
            i = small[n]
            out[i] = self.redact(raws[i])
        return out

    def _redact_patterns(self, raw: bytes) -> bytes:
        for i in self._selected(raw, self._gated_b, self._any_anchor_b):
            leads = self._leads_b.get(i)
            raw = self._sub(self._checks_b[i], raw, True, _PLACEHOLDER_B) if leads is None \
                else self._sub_led(self._checks_b[i], raw, leads, True, _PLACEHOLDER_B)
        return self._sub_shaped(raw, True) if self._shaped else raw

    def _sub_led(self, check: tuple[Any, ...], data: Any, leads: tuple[Any, ...], json: bool,
                 placeholder: Any) -> Any:
        """``_sub``, for a pattern every match of which begins right after one of ``leads``:
        tried at those places alone, left to right, each from the end of the last match, as
        ``re.sub`` does (its look-behind still sees the text before)."""
        starts: set[int] = set()
        for lead in leads:
            n = len(lead)
            at = data.find(lead)
            while at != -1:
                starts.add(at + n)
                if len(starts) > _LED_MAX:
                    return self._sub(check, data, json, placeholder)
                at = data.find(lead, at + 1)
        rx, rule = check[1], check[3]
        out: list[Any] = []
        last = 0
        for at in sorted(starts):
            if at < last:
                continue
            m = rx.match(data, at)
            if m is None:
                continue
            out.append(data[last:at])
            out.append(placeholder if rule is None else
                       self._replace_found(rule, m.group(0), m, json))
            last = m.end()
        if not out:
            return data
        out.append(data[last:])
        return data[:0].join(out)

    def _redact_keys_and_paths(self, raw: bytes) -> bytes:
        try:  # exact: orjson alone would round integers past 64 bits to floats
            obj = wire.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        changed, obj = self._redact_tree(obj)
        return wire.dumps(obj) if changed else raw

    def redact_text(self, text: str) -> str:
        return self._redact_text(text, frozenset())

    def _redact_text(self, text: str, skip: frozenset[int]) -> str:
        for i in self._selected(text, self._gated_s, self._any_anchor_s):
            if i not in skip:
                leads = self._leads_s.get(i)
                text = self._sub(self._checks_s[i], text, False, PLACEHOLDER) if leads is None \
                    else self._sub_led(self._checks_s[i], text, leads, False, PLACEHOLDER)
        return self._sub_shaped(text, False) if self._shaped else text

    def _selected(self, data: Any, gated: _Gated, any_anchor: Any) -> list[int]:
        """The checks worth running on ``data``: those with an anchor in it, and anchorless ones."""
        # small messages: one regex pass beats many substring searches; large ones (base64
        # payloads): the substring searches run at memchr speed, the regex does not
        if len(data) <= 4096:
            if any_anchor is None or any_anchor.search(data) is None:
                return self._always
        elif self._literals is not False:
            found = self._found(data)
            if found is not None:
                return found
        picked = list(self._always)
        # anchors holding a byte that prose seldom has (_ = - @) are looked for only where
        # that byte occurs: one memchr instead of a search each (a 100 KB text message:
        # 1.15 -> 0.45 ms for the credential anchors, measured in-process)
        for gate, group, at_gate in gated:
            if gate is not None and gate not in data:
                continue
            if at_gate is not None:
                picked.extend(i for i in at_gate.picked(data) if i not in picked)
            for a, ids in group:
                if (a in data) if type(a) is not re.Pattern else (a.search(data) is not None):
                    picked.extend(i for i in ids if i not in picked)
        return sorted(picked)

    def _found(self, data: Any) -> list[int] | None:
        """``_selected`` of a large text by one pass of Hyperscan for all the anchors
        (``_Literals``); None where it cannot be had."""
        literals = self._literals
        if literals is None:
            literals = self._literals = _Literals.build([a for a, _ in self._anchors_b]) or False
        if literals is False:
            return None
        assert isinstance(literals, _Literals)
        if type(data) is str:
            data_b = data.encode("utf-8", "surrogatepass")  # substrings stay substrings
        else:
            data_b = data
        if len(data_b) >= 1 << 32:  # past a block scan's 32-bit length: searched for
            return None
        found = literals.found(data_b)
        if found is None:  # Hyperscan failed: the searches from now on
            self._literals = False
            return None
        picked = set(self._always)
        for n in found:
            i = self._anchors_b[n][1]
            gate = self._required.get(i)
            if gate is None or (gate if type(data) is str else gate.encode()) in data:
                picked.add(i)
        return sorted(picked)

    def redact_value(self, value: Any) -> Any:
        """A JSON value (argv, URL, tags ...) with secrets replaced."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, list):
            out = [self.redact_value(v) for v in value]
            # `--api-key VALUE` / `--token=VALUE` on a command line
            for i in range(len(out) - 1):
                if isinstance(out[i], str) and out[i].startswith("-") and \
                        _norm_key(out[i].lstrip("-")) in self._keys:
                    out[i + 1] = self._key_value(_norm_key(out[i].lstrip("-")), out[i + 1])
            for i, v in enumerate(out):
                if isinstance(v, str) and v.startswith("-") and "=" in v:
                    k, _, rest = v.partition("=")
                    if _norm_key(k.lstrip("-")) in self._keys:
                        out[i] = f"{k}={self._key_value(_norm_key(k.lstrip('-')), rest)}"
            return out
        if isinstance(value, dict):
            return self._redact_tree(value)[1]
        return value

    def _has_secret_key(self, raw: bytes) -> bool:
        if self._key_probe is None:
            return False
        if len(raw) > 4096:
            # a large message is mostly string content: look at its keys alone, found where a
            # quote meets a colon (a 100 KB text message: 390 -> ~10 µs; in-process), each
            # distinct key once (a 100 KB tools list, 4,600 keys: 6,700 -> ~1,000 µs)
            keys = _key_names(raw)
            return any(_norm_key(k.rstrip(b"\\").decode("utf-8", "replace")) in self._keys
                       for k in keys)
        if self._key_words:
            low = raw.lower()
            if not any(w in low for w in self._key_words):
                return False
        for m in self._key_probe.finditer(raw):
            if _norm_key(m.group(1).decode("ascii", "replace")) in self._keys:
                return True
        return False

    def _redact_tree(self, obj: Any) -> tuple[bool, Any]:
        changed = False
        if self._paths:
            for path, kind, strategy, replacement in self._paths:
                new = update_path(obj, path, functools.partial(
                    self._value_at, kind=kind, strategy=strategy, replacement=replacement))
                changed = changed or new is not obj
                obj = new
        if self._keys:
            hit, obj = self._redact_keys(obj)
            changed = changed or hit
        return changed, obj

    def _key_value(self, norm: str, v: Any) -> Any:
        kind, strategy, replacement = self._key_rules[norm]
        return self._value_at(v, kind, strategy, replacement)

    def _value_at(self, v: Any, kind: str, strategy: str | None, replacement: str | None) -> Any:
        """A scalar's replacement by a key or path rule (the very value when it already reads
        as one: redacting again changes nothing); containers and null stay."""
        if isinstance(v, (dict, list)) or v is None:
            return v
        strategy = strategy or self.strategy
        if not isinstance(v, str):  # numbers have no room for a token: as replace
            return _placeholder_at(v)
        if strategy == "replace":
            new = PLACEHOLDER if replacement is None else replacement
            return v if v == new else new
        if v.startswith(_MASK) or _TOKEN.fullmatch(v):
            return v
        return self.token(kind, v, strategy, replacement)

    def _redact_keys(self, value: Any) -> tuple[bool, Any]:
        if isinstance(value, dict):
            changed = False
            out = {}
            for k, v in value.items():
                norm = _norm_key(k)
                if norm in self._keys and not isinstance(v, (dict, list)) and v is not None:
                    out[k] = new = self._key_value(norm, v)
                    changed = changed or new is not v
                else:
                    hit, out[k] = self._redact_keys(v)
                    changed = changed or hit
            return changed, out
        if isinstance(value, list):
            changed = False
            items = []
            for v in value:
                hit, nv = self._redact_keys(v)
                changed = changed or hit
                items.append(nv)
            return changed, items
        if isinstance(value, str) and value[:1] in _JSON_OPENERS:
            inner = _json_in(value)
            if inner is not None:
                hit, new = self._redact_keys(inner)
                if hit:
                    return True, _as_json_text(new, value)
        return False, value

    # -- scanning

    def scan(self, raw: bytes) -> list[str]:
        """Names of the kinds of secrets found in ``raw`` (empty when clean); long base64 or hex
        payloads are skipped, as ``redact`` skips them."""
        parts = _blob_parts(raw) if len(raw) > _BLOB_MIN else None
        if parts is not None and len(parts) > 1:
            raw = b'""'.join(parts[::2])
        found: list[str] = []
        if self._has_secret_key(raw):
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                obj = None
            if obj is not None and self._redact_keys(obj)[0] and not _all_placeholders(
                    obj, self._keys):
                found.append("secret-named key")
        text = raw.decode("utf-8", "replace")
        for i in self._selected(text, self._gated_s, self._any_anchor_s):
            name, rx, _, rule = self._checks_s[i]
            if name not in found and any(self._in_clear(rule, m.group(0))
                                         for m in rx.finditer(text)):
                found.append(name)
        for rule, _, rx, _ in self._shaped_picks(raw):
            if rule.label not in found and any(self._in_clear(rule, m.group(0))
                                               for m in rx.finditer(text)):
                found.append(rule.label)
        return found

    def _in_clear(self, rule: Any, text: str) -> bool:
        """Whether a match is a value in clear (not a placeholder, a token, or a look-alike
        that its validator rejects)."""
        if PLACEHOLDER in text or text.startswith(_MASK) or _TOKEN.fullmatch(text):
            return False
        if rule is not None and rule.validator is not None:
            from .packs import VALIDATORS

            return VALIDATORS[rule.validator](text) > 0
        return True


_defaults: dict[str, Redactor] = {}


def default_redactor() -> Redactor:
    """The built-in rules plus the config files of the current directory (``mcprec.toml``,
    ``pyproject.toml``): what the library applies when it is given no ``Redactor``. Cached per
    directory, so a process that changes directory gets that directory's rules, not whichever
    directory asked first."""
    cwd = os.getcwd()
    found = _defaults.get(cwd)
    if found is None:
        found = _defaults[cwd] = Redactor(rules_from_config(cwd=cwd))
    return found
