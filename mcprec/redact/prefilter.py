"""Which patterns can match a message at all: their anchors found by gates, by a sparse look
at rare bytes, or in one pass by Hyperscan, before any pattern runs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .patterns import _B64_CHARS, _B64_MIN, _BLOB, _NOT_B64

_GATES = ("_", "=", "-", "@")
_GATES_ANY = frozenset((*_GATES, *(g.encode() for g in _GATES)))
_PRESENCE_GATES = (".", " ")
"""Bytes that prose has plenty of, and base64 none or few ("2.0" in every JSON-RPC message): an
anchor holding one and no rarer gate (.eyJ; earer , asic ) is looked for at each of them when
there are few (``_Sparse``), else searched for. The anchor searches of a 100 KB message,
in-process (best of 5, 4 runs alternating with the tree before): letters and digits
(bench_record's large load) 194-199 -> 142-147 µs, a base64 image 202-209 -> 54-58 µs, prose
the same (456-489 against 456-472). bench_record large, 7 rounds: 1,232 -> 1,578 req/s."""
_PRESENCE_ANY = frozenset((*_PRESENCE_GATES, *(g.encode() for g in _PRESENCE_GATES)))
_SPARSE = 16
"""Gate bytes past this many: the anchors behind a presence gate are searched for instead."""
_KEY_END = re.compile(rb'"\s*:')  # the end of a key (of JSON held in a string too: \":)
_KEY_END_REVERSED = re.compile(rb':\s*"(?=([^"]{0,99})")')  # on the message reversed
_WS = b" \t\n\r\f\v"  # \s of a bytes pattern
_FEW = 32
_MANY_KEYS = 128


def _key_names(raw: bytes) -> set[bytes]:
    """The distinct keys of a JSON text as bytes, of JSON held in its strings too: for each
    quote followed by blanks and a colon (``_KEY_END``), the bytes from the quote before it, if
    that is at most 100 bytes back. 100 KB, in-process: few colons, each found by ``find``
    (memchr speed; a text message: 55 -> ~3 µs); else re finds the keys' ends, up to
    ``_MANY_KEYS`` of them (prose or source code, 95 of them: ~200 -> ~100 µs); more (a tools
    list, 4,600 keys: 6,700 -> ~1,000 µs), one pass of re over the message reversed, where the
    colon leads and the key follows: re tries each colon, not each quote, and Python sees each
    distinct key once."""
    colons: list[int] = []
    at = raw.find(b":")
    while at != -1:
        if len(colons) == _FEW:
            break
        colons.append(at)
        at = raw.find(b":", at + 1)
    out: set[bytes] = set()
    if at == -1:
        for at in colons:
            end = at - 1
            while end >= 0 and raw[end] in _WS:
                end -= 1
            if end >= 0 and raw[end] == 0x22:
                start = raw.rfind(b'"', max(0, end - 100), end)
                if start != -1:
                    out.add(raw[start + 1:end])
        return out
    for n, m in enumerate(_KEY_END.finditer(raw)):
        if n == _MANY_KEYS:
            return {k[::-1] for k in set(_KEY_END_REVERSED.findall(raw[::-1]))}
        end = m.start()
        start = raw.rfind(b'"', max(0, end - 100), end)
        if start != -1:
            out.add(raw[start + 1:end])
    return out


def _blob_parts(raw: bytes) -> list[bytes]:
    """``_BLOB.split(raw)``: the message around its base64 payloads (even indexes) and the
    payloads (odd), or ``[raw]``, found without re where it can be (100 KB, in-process; re's
    pass took 50-60 µs on text, prose or code, 260-410 on a tools list, twice 250 where it
    found a payload: search, then split).

    Few quotes (found by ``find``, memchr speed): a payload is the bytes between two of them,
    at least 1,024 and all of the base64 alphabet (``translate`` deletes them all): a text
    message ~5 µs, an image ~60. Many: a payload string holds 1,024 bytes or more that are
    neither a quote nor a blank, so a whole 512-byte block at a multiple of 512; where every
    block holds a blank or a quote (one or two ``find`` a block), there is none: prose, source
    code or a tools list ~25 µs; else re splits."""
    quotes: list[int] = []
    at = raw.find(b'"')
    while at != -1:
        if len(quotes) == _FEW:
            for at in range(0, len(raw) - 511, 512):
                if raw.find(b" ", at, at + 512) == -1 and raw.find(b'"', at, at + 512) == -1:
                    return _BLOB.split(raw)
            return [raw]
        quotes.append(at)
        at = raw.find(b'"', at + 1)
    parts: list[bytes] = []
    last = 0
    i = 0
    while i + 1 < len(quotes):
        a, b = quotes[i], quotes[i + 1]
        if b - a > _B64_MIN and _NOT_B64.search(raw, a + 1, min(b, a + 65)) is None \
                and not raw[a + 1:b].translate(None, _B64_CHARS):
            parts += (raw[last:a], raw[a:b + 1])
            last = b + 1
            i += 2  # the closing quote is taken: it opens no payload
        else:
            i += 1
    if not parts:
        return [raw]
    parts.append(raw[last:])
    return parts


_Gated = list[tuple[Any, list[tuple[Any, tuple[int, ...]]], "_AtGate | _Sparse | None"]]


class _Literals:
    """Which of the anchors occur in a large text, found in one pass by Hyperscan (the
    ``hyperscan`` package: Vectorscan, SIMD matching of many literals at once) instead of a
    substring search each (CPython's search for a literal of more than one byte runs at ~0.5 ns
    a byte, on one byte at a time; Hyperscan looks at 16 or more at once). The bundled anchors
    in 100 KB, in-process: letters and digits (bench_record's large load) ~140 -> 16 µs, prose
    ~250 -> 23 µs, a base64 image 16 µs; the recorder's writing thread, per 100 KB message of
    the large load 384 -> 245 µs (without redaction 205), of the prose load 1,170 -> 660 µs.
    Small texts (up to 4 KiB) keep their one regex pass (~1 µs): a scan's call costs ~0.6 µs.
    Where Hyperscan cannot be imported or refuses the machine, ``_selected``'s own searches
    run, with the same result."""

    __slots__ = ("_db", "_local", "_error")

    def __init__(self, db: Any, error: Any) -> None:
        import threading

        self._db = db
        self._error = error
        self._local = threading.local()  # a scratch space per thread: it is not shareable

    @classmethod
    def build(cls, anchors: Sequence[bytes]) -> _Literals | None:
        try:
            import hyperscan

            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            # each byte as \xHH: any anchor (a secret value may hold anything) is a literal
            db.compile(expressions=[b"".join(b"\\x%02x" % c for c in a) for a in anchors],
                       ids=list(range(len(anchors))), elements=len(anchors),
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(anchors))
            hyperscan.Scratch(db)  # a CPU it cannot run on says so here
        except Exception:  # not installed, no build for this machine, a CPU too old
            return None
        return cls(db, hyperscan.error)

    def found(self, data: Any) -> list[int] | None:
        """The indexes of the anchors that occur in ``data`` (shorter than 4 GiB; None:
        Hyperscan failed)."""
        found: list[int] = []
        try:
            scratch = getattr(self._local, "scratch", None)
            if scratch is None:
                import hyperscan

                scratch = self._local.scratch = hyperscan.Scratch(self._db)
            self._db.scan(data, match_event_handler=lambda i, *_: found.append(i),
                          scratch=scratch)
        except self._error:
            return None
        return found


class _Sparse:
    """A presence gate's anchors (``_PRESENCE_GATES``), each looked for where the gate byte is
    when it is there few times (``_SPARSE``), else searched for: ``_AtGate``'s job for a byte
    too common to stop at each time."""

    __slots__ = ("gate", "members")

    def __init__(self, gate: Any, members: list[tuple[Any, int, tuple[int, ...]]]) -> None:
        self.gate = gate
        self.members = members  # (anchor, index of the gate byte in it, checks)

    def picked(self, data: Any) -> list[int]:
        """The checks of the anchors that occur in ``data``."""
        at: list[int] = []
        i = data.find(self.gate)
        while i >= 0:
            if len(at) == _SPARSE:
                return [c for a, _, ids in self.members if a in data for c in ids]
            at.append(i)
            i = data.find(self.gate, i + 1)
        return [c for a, k, ids in self.members
                if any(p >= k and data.startswith(a, p - k) for p in at) for c in ids]


class _AtGate:
    """A gate's anchors that hold the gate byte, looked for in one pass: a regex that stops only
    at a gate byte where one of them is (the byte, then a look behind and ahead for each), and
    each anchor tried where it stops. The text between gate bytes is skipped at re's scan for a
    literal, not searched once per anchor. A 100 KB prose message (the docs: 1,400 "-", 150
    "="), in-process on a quiet machine: 142 -> 76 µs for sk-, glpat-, PRIVATE KEY-----; 94 ->
    52 µs for the GitHub and Stripe anchors; 157 -> 34 µs for key=, token=, secret=; its whole
    redaction 0.86x (medians of 10 runs alternating with the tree before). A gate with many
    anchors behind it gains nothing: Slack's six xox?- there took as long as a search for xox.
    Text with no gate byte (letters and digits) never runs it."""

    __slots__ = ("rx", "members")

    def __init__(self, gate: Any, members: list[tuple[Any, int, tuple[int, ...]]]) -> None:
        def lit(text: str) -> Any:
            return text.encode() if isinstance(gate, bytes) else text

        alts = []
        for a, k, _ in members:
            alt = lit("(?<=") + re.escape(a[:k + 1]) + lit(")")
            if a[k + 1:]:
                alt += lit("(?=") + re.escape(a[k + 1:]) + lit(")")
            alts.append(alt)
        self.rx = re.compile(re.escape(gate) + lit("(?:") + lit("|").join(alts) + lit(")"))
        self.members = members  # (anchor, index of the gate byte in it, checks)

    def picked(self, data: Any) -> list[int]:
        """The checks of the anchors that occur in ``data``."""
        left = list(self.members)
        out: list[int] = []
        for m in self.rx.finditer(data):
            at = m.start()
            for member in list(left):
                a, k, ids = member
                if at >= k and data.startswith(a, at - k):
                    out.extend(ids)
                    left.remove(member)
            if not left:
                break
        return out


def _gated(anchors: list[tuple[Any, int]], required: Mapping[int, Any]) -> _Gated:
    """The anchors grouped by a byte that prose seldom has (None: no such byte), each with the
    checks it selects: a byte every match of the check holds (``required``: check -> byte),
    else one of the anchor's own (else one of ``_PRESENCE_GATES``). Of a gate's anchors, those
    holding the gate byte (and longer than it) are looked for together (``_AtGate``), but for a
    presence gate; the rest one by one (``_merged``)."""
    groups: dict[Any, list[tuple[Any, int]]] = {}
    for a, i in anchors:
        key = required.get(i)
        if key is None:
            text = a.decode("latin-1") if isinstance(a, bytes) else a
            gate = next((g for g in (*_GATES, *_PRESENCE_GATES) if g in text), None)
            key = gate.encode() if gate is not None and isinstance(a, bytes) else gate
        groups.setdefault(key, []).append((a, i))
    out: _Gated = []
    for gate, group in groups.items():
        at_gate: dict[Any, list[int]] = {}
        rest = []
        presence = gate in _PRESENCE_ANY
        for a, i in group:
            if gate is not None and gate in a and a != gate:
                at_gate.setdefault(a, []).append(i)
            else:
                rest.append((a, i))
        members = [(a, a.index(gate), tuple(ids)) for a, ids in at_gate.items()]
        combined = None if not at_gate else _Sparse(gate, members) if presence \
            else _AtGate(gate, members)
        out.append((gate, _merged(rest), combined))
    return out


def _merged(group: list[tuple[Any, int]]) -> list[tuple[Any, tuple[int, ...]]]:
    """Anchors that begin with the same upper-case letter (AKIA, ASIA, AIza), or with the same
    two bytes (ghp_, gho_ ... github_pat_), looked for in one regex: re finds their common
    prefix, then tries each there, in one pass instead of one each. A 100 KB message without
    them, in-process: 168 -> 63-70 µs for AKIA, ASIA, AIza (text, prose, code alike); 340 ->
    55-63 µs for the six GitHub anchors and 110 -> 56-72 µs for _live_, _test_ (prose, code, a
    tools list: they hold "_"), whose first byte is a gate. Not for one
    lower-case first letter: one as common as "e" (earer, eyJ) made the pass 218 µs on prose,
    slower than two searches."""
    by_first: dict[Any, list[tuple[Any, int]]] = {}
    for a, i in group:
        first = a[:1]
        by_first.setdefault(first if first.isupper() or first in _GATES_ANY else a[:2],
                            []).append((a, i))
    out: list[tuple[Any, tuple[int, ...]]] = []
    for first, items in by_first.items():
        if len(items) > 1 and len({a for a, _ in items}) > 1 and (
                first.isupper() or first in _GATES_ANY or len(first) == 2):
            alts = sorted({a for a, _ in items}, key=len, reverse=True)
            joined = (b"|" if isinstance(first, bytes) else "|").join(re.escape(a) for a in alts)
            out.append((re.compile(joined), tuple(sorted({i for _, i in items}))))
        else:
            out.extend((a, (i,)) for a, i in items)
    return out
