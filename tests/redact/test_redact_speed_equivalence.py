"""The redactor's shortcuts on large messages (anchor gates, patterns tried where their
look-behind's literal is, keys found per colon or on the reversed message, payloads found
without re) give exactly what the straightforward way gives: every pattern run on the whole
message with ``re.sub``, keys found at every ``"\\s*:``, payloads found by ``_BLOB.split``."""

from __future__ import annotations

import base64
from typing import Any
import json
import random
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcprec.redact import patterns, prefilter
from mcprec.redact import PLACEHOLDER, Redactor, Rules
from mcprec.redact.prefilter import _Literals

ROOT = Path(__file__).resolve().parents[2]

SECRETS = [
    "Bearer abcdefgh12345678", "bearer x.y~z+/=-12345", "Basic dXNlcjpwYXNzd29yZA==",
    "basic QWxhZGRpbjpvcGVu", "sk-ant-" + "a1" * 12, "sk-proj-" + "Zx9" * 8, "sk-" + "q" * 20,
    "ghp_" + "a1B2" * 9, "gho_" + "Z" * 30, "ghs_" + "9" * 31, "github_pat_" + "x_" * 21,
    "glpat-" + "y-" * 11, "xoxb-1234567890-abcdefghij", "xoxp-" + "7" * 12,
    "AKIA" + "ABCDEFGHIJ012345", "ASIA" + "Z" * 16, "AIza" + "b_-" * 12,
    "sk_live_" + "c" * 20, "pk_test_" + "D" * 16, "rk_live_" + "e1" * 8,
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.signature123",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIabc+/=\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY-----",
    "https://user:hunter2@example.com/x", "postgres://admin:s3cr3t@db:5432/app",
    "http://h/p?api_key=abcdef123", "http://h/p?x=1&token=abcdefgh", "?key=1234567&y",
    "?secret=zzzzzzzz", "&apikey=qqqqqqqq", "?access_token=tttttttt#frag",
    "http://h/p?key=abcdef?key=ghijklmn",  # a lead inside a match: re.sub goes past it
    "Bearer abcdefgh/Bearer ijklmnop",  # a look-behind into the match before
]
# fragments that hit anchors, leads and gates without being secrets
NEAR = ["earer ", "Bearer ", "asic ", "Basic x", "://", "@", "key=", "token=", "secret=",
        "?", "&", "sk-", "gh", "ghp_", "_live_", "_test_", "xox", "xoxa", "-", "--",
        "-----BEGIN ", "PRIVATE KEY-----", "eyJ", ".eyJ", "AKIA", "AIza", "ASIA", "_", "="]
PAD = "lorem ipsum dolor-sit amet, consectetur_adipiscing elit. "


def reference_has_secret_key(r: Redactor, raw: bytes) -> bool:
    """``_has_secret_key`` as it was: every ``"\\s*:`` in turn."""
    if r._key_probe is None:
        return False
    if len(raw) > 4096:
        for m in prefilter._KEY_END.finditer(raw):
            end = m.start()
            start = raw.rfind(b'"', max(0, end - 100), end)
            if start != -1 and patterns._norm_key(raw[start + 1:end].rstrip(b"\\").decode(
                    "utf-8", "replace")) in r._keys:
                return True
        return False
    return r._has_secret_key(raw)  # small messages: unchanged


def reference_patterns(r: Redactor, raw: bytes) -> bytes:
    """Every pattern, in order, run with ``re.sub`` on the whole message: no anchor, no gate,
    no lead."""
    for check in r._checks_b:
        raw = r._sub(check, raw, True, patterns._PLACEHOLDER_B)
    return r._sub_shaped(raw, True) if r._shaped else raw


def reference_redact(r: Redactor, raw: bytes) -> bytes:
    if len(raw) > patterns._BLOB_MIN and patterns._BLOB.search(raw) is not None:
        parts = patterns._BLOB.split(raw)
        out = b"".join(p if i % 2 else reference_patterns(r, p) for i, p in enumerate(parts))
        if bool(r._paths) or any(reference_has_secret_key(r, p) for p in parts[::2]):
            out = r._redact_keys_and_paths(out)
        return out
    if r._paths or reference_has_secret_key(r, raw):
        raw = r._redact_keys_and_paths(raw)
    return reference_patterns(r, raw)


def reference_redact_text(r: Redactor, text: str) -> str:
    for check in r._checks_s:
        text = r._sub(check, text, False, PLACEHOLDER)
    return r._sub_shaped(text, False) if r._shaped else text


try:
    import hyperscan  # noqa: F401
    HYPERSCAN = True
except ImportError:  # not installed, or blocked by the fallback pass (tests/no_speedups)
    HYPERSCAN = False
needs_hyperscan = pytest.mark.skipif(not HYPERSCAN, reason="Hyperscan is not importable")


def searching(r: Redactor) -> Redactor:
    """``r`` looking for its anchors by its own searches, as where Hyperscan is not to be had."""
    r._literals = False
    return r


_RULES = {
    "defaults": Rules(env=False),
    "values and keys": Rules(env=False, extra_values=["hunter2hunter2", "gh-secret-1"],
                             keys=["my_field"], patterns=[r"(?<=zz:)\d{4,}"]),
    "pii": Rules(env=False, packs=["pii"]),
}
REDACTORS = {**{name: Redactor(rules) for name, rules in _RULES.items()},
             **{f"{name}, searching": searching(Redactor(rules))
                for name, rules in _RULES.items()}}


def check_same(raw: bytes) -> None:
    for name, r in REDACTORS.items():
        assert r.redact(raw) == reference_redact(r, raw), name
        assert r._has_secret_key(raw) == reference_has_secret_key(r, raw), name
        assert prefilter._blob_parts(raw) == patterns._BLOB.split(raw), name
        text = raw.decode("utf-8", "replace")
        assert r.redact_text(text) == reference_redact_text(r, text), name


def message(text: str, pad: int, how: str) -> bytes:
    filler = (PAD * (pad // len(PAD) + 1))[:pad]
    half = len(filler) // 2
    body = filler[:half] + text + filler[half:]
    if how == "text":
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo",
                             "params": {"text": body}})
    if how == "json text":  # a tool's structured result as indented JSON text
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [
            {"type": "text", "text": json.dumps({"note": body, "password": "pw12345678"},
                                                indent=2)}]}})
    if how == "tools":
        n = max(1, pad // 200)
        tools = [{"name": f"tool_{i}", "description": f"reads a file {i}",
                  "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
                 for i in range(n)]
        tools[n // 2]["description"] = text
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}})
    assert how == "payload"  # an image around the text
    data = base64.b64encode(random.Random(pad).randbytes(max(800, pad * 3 // 4))).decode()
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "image", "data": data, "mimeType": "image/png"},
        {"type": "text", "text": body}, {"type": "image", "data": data[::-1]}]}})


@pytest.mark.parametrize("how", ["text", "json text", "tools", "payload"])
@pytest.mark.parametrize("pad", [0, 5_000, 100_000])
@pytest.mark.parametrize("secret", SECRETS)
def test_each_secret_kind_goes_as_the_reference_says(secret: str, pad: int, how: str) -> None:
    raw = message(f"see {secret} there", pad, how)
    check_same(raw)
    assert PLACEHOLDER.encode() in Redactor(Rules(env=False)).redact(raw)


REAL_TEXTS = {
    "prose": "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))),
    "code": "".join(p.read_text() for p in sorted((ROOT / "mcprec").glob("*.py"))),
}


@pytest.mark.parametrize("kind", sorted(REAL_TEXTS))
@pytest.mark.parametrize("how", ["text", "json text", "tools", "payload"])
def test_real_texts_with_secrets_sprinkled_go_as_the_reference_says(kind: str, how: str) -> None:
    rnd = random.Random(f"{kind}{how}")
    text = REAL_TEXTS[kind][:100_000]
    for secret in rnd.sample(SECRETS, 8):
        at = rnd.randrange(len(text))
        text = text[:at] + " " + secret + " " + text[at:]
    check_same(message(text, 0, how))
    check_same(message(REAL_TEXTS[kind][:100_000], 0, how))


pieces = st.one_of(st.sampled_from(SECRETS), st.sampled_from(NEAR),
                   st.text(alphabet='ab Z09"\\:,{}[]\n\t_-=@?&/.+', max_size=30),
                   st.sampled_from(['"password": "hunter2x"', '\\"api_key\\": \\"v\\"',
                                    '"my-field" :1', '"x" :y":', '"' + "k" * 120 + '":1',
                                    '"' + "A" * 1100 + '"', '"' + "B/+=" * 300 + '" :']))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pieces, max_size=12), st.sampled_from([0, 100, 5_000, 20_000]),
       st.sampled_from(["raw", "text", "payload"]))
def test_generated_messages_go_as_the_reference_says(parts: list[str], pad: int,
                                                      how: str) -> None:
    body = "".join(parts)
    if how == "raw":  # not necessarily JSON: the byte-level steps must agree all the same
        filler = (PAD * (pad // len(PAD) + 1))[:pad]
        raw = (filler + body + filler).encode()
    else:
        raw = message(body, pad, how)
    check_same(raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([0, 5_000, 40_000]),
       st.sampled_from([b" ", b'"', b":", b"a", b"\\", b"="]))
def test_key_names_and_payloads_agree_on_any_bytes(chunk: bytes, pad: int, fill: bytes) -> None:
    raw = fill * (pad // 2) + chunk + b'"' + b"Q" * (pad // 2) + b'"' + chunk
    ends = [m.start() for m in prefilter._KEY_END.finditer(raw)]
    expected = set()
    for end in ends:
        start = raw.rfind(b'"', max(0, end - 100), end)
        if start != -1:
            expected.add(raw[start + 1:end])
    assert prefilter._key_names(raw) == expected
    assert prefilter._blob_parts(raw) == patterns._BLOB.split(raw)


def test_every_colon_path_of_key_names_is_taken() -> None:
    """Few colons (find), some keys (re forward), many keys (re on the reversed message); keys
    of 98 to 101 bytes about the 100-byte window."""
    for n in (3, 20, 1000):
        raw = orjson.dumps({"a": [{"k": i, f"key{i % 7}": "v", "x:y": "z",
                                   "w" * (98 + i % 4): 1} for i in range(n)]})
        expected = {raw[raw.rfind(b'"', max(0, e - 100), e) + 1:e]
                    for e in (m.start() for m in prefilter._KEY_END.finditer(raw))
                    if raw.rfind(b'"', max(0, e - 100), e) != -1}
        assert prefilter._key_names(raw) == expected


def test_led_patterns_are_the_bundled_ones_only() -> None:
    """A pack rule or a user pattern under a bundled name gets no shortcut of the bundled one."""
    r = Redactor(Rules(env=False, patterns=[r"(?<=earer )\w+"]))
    names = {r._checks_b[i][0] for i in r._leads_b}
    assert names == {"bearer token", "basic auth", "URL credentials", "secret query parameter"}
    assert all(r._checks_b[i][3] is None for i in r._leads_b)
    raw = message("Bearer  x Xearer abcdefghij", 100_000, "text")
    check_same(raw)
    assert b"abcdefghij" not in r.redact(raw)


@pytest.mark.parametrize("gap", [b"", b" ", b'"'])
def test_payloads_side_by_side_share_no_quote(gap: bytes) -> None:
    """A payload's closing quote opens no other: ``"A..."B..."`` holds one payload."""
    for pad in (b"", b" x" * 40):  # few quotes, many
        raw = pad + b'{"a":"' + b"A" * 1100 + b'"' + gap + b"B" * 1100 + b'","c":"' + \
            b"C/+=" * 300 + b'""' + b"D" * 1030 + b'"}' + pad * 20
        assert prefilter._blob_parts(raw) == patterns._BLOB.split(raw)
        check_same(raw)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["sk-", "glpat-", "xoxb-", "xoxr", "PRIVATE KEY-----",
                                 "PRIVATE KEY-", "key=", "token=", "secret=", "ghp_",
                                 "github_pat_", "_live_", "_test_", "pk", "-", "=", "_", "@",
                                 "x", "KEY", " ", ".", ".eyJ", "eyJ", "earer ", "asic ",
                                 ". . . . "]), max_size=30),
       st.booleans())
def test_anchors_at_a_gate_are_found_as_a_search_finds_them(parts: list[str],
                                                           as_bytes: bool) -> None:
    """The checks one pass per gate (``_AtGate``) selects are those whose anchors a substring
    search finds, for text made of anchors, their pieces and the gate bytes."""
    r = Redactor(Rules())
    text = "".join(parts)
    data: Any = text.encode() if as_bytes else text
    gated = r._gated_b if as_bytes else r._gated_s
    anchors = r._anchors_b if as_bytes else r._anchors_s
    any_anchor = r._any_anchor_b if as_bytes else r._any_anchor_s
    for gate, _, at_gate in gated:
        if at_gate is None:
            continue
        want = sorted({i for a, _, ids in at_gate.members if a in data for i in ids})
        assert sorted(set(at_gate.picked(data))) == want, (gate, text)
    # a check whose every match holds a byte (patterns._REQUIRED) is skipped without that byte
    required = {i: patterns._REQUIRED.get(name) for i, (name, *_) in enumerate(r._checks_s)}
    assert set(r._selected(data, gated, any_anchor)) == {
        i for a, i in anchors if a in data and (required[i] is None or required[i] in text)
    } | set(r._always)


@pytest.mark.parametrize("dots", [0, 3, prefilter._SPARSE - 1, prefilter._SPARSE, 40])
@pytest.mark.parametrize("as_bytes", [True, False])
def test_presence_gates_find_their_anchors_however_many_gate_bytes(dots: int,
                                                                  as_bytes: bool) -> None:
    """An anchor behind a presence gate (.eyJ behind ".", Bearer behind " ") is found whether
    the gate byte is there few times (looked for at each) or many (searched for)."""
    r = Redactor(Rules())
    jwt = "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.signature123"
    for text in ("v2.0 " * dots + "x" * 5000 + jwt, jwt + "." * dots + "y" * 5000,
                 "a.b" * dots + "z" * 5000, "w " * dots + "Bearer abcdefgh12345678" + "q" * 5000):
        data: Any = text.encode() if as_bytes else text
        gated = r._gated_b if as_bytes else r._gated_s
        anchors = r._anchors_b if as_bytes else r._anchors_s
        any_anchor = r._any_anchor_b if as_bytes else r._any_anchor_s
        want = {i for a, i in anchors if a in data} | set(r._always)
        assert set(r._selected(data, gated, any_anchor)) == want, text[:40]
        if as_bytes:
            check_same(orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": text}}))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["sk-", "glpat-", "xoxb-", "xoxr", "PRIVATE KEY-----", "KEY-",
                                 "key=", "token=", "secret=", "ghp_", "github_pat_", "_live_",
                                 "_test_", "AKIA", "AIz", "@", "-", "=", "_", " ", ".", ".eyJ",
                                 "earer ", "asic ", "hunter2hunter2", "h\x00nter2", "päss-wörd",
                                 "pä", "x" * 700, "y " * 300]), max_size=30),
       st.booleans())
def test_one_pass_for_all_anchors_selects_as_the_searches_do(parts: list[str],
                                                            as_bytes: bool) -> None:
    """The checks Hyperscan's one pass selects in a large text (``_Literals``) are those whose
    anchors occur, less a check whose required byte is absent; an anchor of any bytes (a NUL,
    UTF-8) is a literal. The redactor's own searches select those or more (anchors searched
    for together select all their checks: AKIA, ASIA, AIza)."""
    rules = Rules(env=False, extra_values=["h\x00nter2hunter2", "päss-wörd-1"])
    fast, slow = Redactor(rules), searching(Redactor(rules))
    text = "z" * 4097 + "".join(parts)
    data: Any = text.encode() if as_bytes else text
    picks = []
    pytest.importorskip("hyperscan")  # the fallback pass (scripts/test.sh) runs without it
    for r in (fast, slow):
        gated = r._gated_b if as_bytes else r._gated_s
        any_anchor = r._any_anchor_b if as_bytes else r._any_anchor_s
        picks.append(r._selected(data, gated, any_anchor))
    anchors = fast._anchors_b if as_bytes else fast._anchors_s
    required = {i: patterns._REQUIRED.get(name) for i, (name, *_) in enumerate(fast._checks_s)}
    assert picks[0] == sorted({i for a, i in anchors if a in data and (
        required[i] is None or required[i] in text)})
    assert set(picks[0]) <= set(picks[1])
    assert isinstance(fast._literals, _Literals)  # the one pass ran: Hyperscan is installed


@needs_hyperscan
def test_small_texts_keep_their_one_regex_pass() -> None:
    """Up to 4 KiB, a text's anchors are looked for by one regex (cheaper than a scan's call):
    the scanner is not even built."""
    r = Redactor(Rules(env=False))
    assert r.redact(b'{"a": "Bearer abcdefgh12345678"}') == b'{"a": "Bearer [REDACTED]"}'
    assert r._literals is None
    r.redact(b'{"a": "' + b"x " * 2500 + b'"}')
    assert isinstance(r._literals, _Literals)


@needs_hyperscan
def test_threads_scan_at_once_each_with_its_own_scratch() -> None:
    """Hyperscan's scratch space is not shareable: each thread gets its own, so threads that
    redact large messages at once all get the one pass (none falls back), and the right
    bytes."""
    import threading

    r = Redactor(Rules(env=False))
    raws = [message(f"see {secret} there", 20_000, "text") for secret in SECRETS[:8]]
    want = [reference_redact(r, raw) for raw in raws]
    bad: list[int] = []

    def work(k: int) -> None:
        for _ in range(30):
            for raw, expected in zip(raws, want):
                if r.redact(raw) != expected:
                    bad.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
    assert isinstance(r._literals, _Literals)  # no thread's scan failed
