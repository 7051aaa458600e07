"""Property tests: canonical form, matching, redaction and SSE framing hold for any input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcprec import jsonpath, matching, wire
from mcprec.cassette import Cassette
from mcprec.record.writer import open_session_writer
from mcprec.diff import paths as diff_paths
from mcprec.matching import Matcher, MatchOptions
from mcprec.redact import PLACEHOLDER, Redactor, Rules, placeholder_like
from mcprec.transports.sse import SSEParser, format_event

keys = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
params = st.dictionaries(keys, json_values, max_size=5)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(params)
def test_canonical_form_is_idempotent(p: dict[str, Any]) -> None:
    """Canonicalising the canonical form changes nothing."""
    once = wire.canonical_params(p)
    assert wire.canonical_params(orjson.loads(once)) == once


@given(params, st.integers(0, 2**32))
def test_key_order_never_changes_the_match_key(p: dict[str, Any], seed: int) -> None:
    """Objects with the same members in another order have the same match key."""
    assert wire.match_key("tools/call", p) == wire.match_key(
        "tools/call", shuffled(p, random.Random(seed)))


@given(params, json_values)
def test_meta_never_changes_the_match_key(p: dict[str, Any], meta: Any) -> None:
    """``_meta`` (progress tokens, client info) is left out of matching."""
    assert wire.match_key("x", p) == wire.match_key("x", {**p, "_meta": meta})


@given(st.binary(max_size=300))
def test_classify_never_raises(raw: bytes) -> None:
    """Any bytes classify as one of the known kinds."""
    assert wire.classify(raw).kind in wire.KINDS


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A real cassette with a few recorded requests (and answers) to match against."""
    path = tmp_path_factory.mktemp("props") / "c.db"
    requests = [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "add", "arguments": {"a": 2, "b": 1}},
        {"name": "echo", "arguments": {"text": "hé", "opts": {"x": [1, {"y": None}]}}},
        {"name": "echo", "arguments": {}},
    ]
    w = open_session_writer(path, "s", transport="stdio", target=["x"])
    for i, p in enumerate(requests):
        w.message(wire.CLIENT_TO_SERVER, orjson.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": p}), i * 10)
        w.message(wire.SERVER_TO_CLIENT, orjson.dumps(
            {"jsonrpc": "2.0", "id": i, "result": {"n": i}}), i * 10 + 5)
    w.close()
    return path, requests


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.integers(0, 3), st.integers(0, 2**32), st.integers(0, 10**6))
def test_matcher_ignores_key_order_and_ids(recorded: tuple[Path, list[dict[str, Any]]],
                                           which: int, seed: int, rid: int) -> None:
    """A request matches its recorded twin whatever its key order, id and ``_meta``."""
    path, requests = recorded
    with Cassette.open(path) as c:
        for options in (MatchOptions(), MatchOptions(ignore=["params.arguments.zzz"])):
            m = Matcher(c, c.session("s"), options)
            p = shuffled(requests[which], random.Random(seed))
            found = m.match({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                             "params": {**p, "_meta": {"progressToken": rid}}})
            assert found.request.seq == which * 2


secretish = st.sampled_from([
    "sk-" + "a" * 24, "Bearer abcdefghijkl", "ghp_" + "b" * 36, "AKIA" + "C" * 16, "plain text",
    "https://u:p4ssw0rd@host/x", "eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl",
])


@given(st.dictionaries(st.sampled_from(["password", "token", "note", "maxTokens", "api_key",
                                        "progressToken", "name"]),
                       st.one_of(st.integers(0, 10**6), secretish), max_size=6))
def test_redaction_is_idempotent_and_keeps_json_types(obj: dict[str, Any]) -> None:
    """Redacting twice equals redacting once; values keep their JSON type; protocol fields stay."""
    r = Redactor(Rules(env=False))
    msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"arguments": obj}}
    once = r.redact(orjson.dumps(msg))
    assert r.redact(once) == once
    out = orjson.loads(once)
    assert out["id"] == 7 and out["method"] == "tools/call"
    for k, v in obj.items():
        got = out["params"]["arguments"][k]
        assert type(got) is type(v)
        if k in ("maxTokens", "progressToken") and isinstance(v, int):
            assert got == v
    assert r.scan(once) == []
    if any(isinstance(v, str) and v != "plain text" for v in obj.values()):
        assert PLACEHOLDER.encode() in once


events = st.lists(st.tuples(st.binary(min_size=1, max_size=40).filter(
    lambda b: b"\n" not in b and b"\r" not in b), st.sampled_from(["message", "endpoint"]),
    st.one_of(st.none(), st.text("abc123", min_size=1, max_size=5))), max_size=6)


@given(events, st.lists(st.integers(1, 17), min_size=1, max_size=50))
def test_sse_parser_any_chunking_gives_the_same_events(
        evs: list[tuple[bytes, str, str | None]], cuts: list[int]) -> None:
    """However an SSE stream is cut into chunks, the same events come out."""
    stream = b"".join(format_event(d, event=e, id=i) for d, e, i in evs)
    parser = SSEParser()
    got = []
    pos = 0
    for n in cuts * (len(stream) // max(1, sum(cuts)) + 1):
        if pos >= len(stream):
            break
        got += parser.feed(stream[pos:pos + n])
        pos += n
    assert [(g.data, g.event, g.id) for g in got] == [(d, e, i) for d, e, i in evs]


@given(params)
def test_meta_shortcut_gives_the_same_key(p: dict[str, Any]) -> None:
    """Skipping the _meta search when a message holds none gives the same key."""
    stripped = wire.strip_meta(p)
    assert wire.match_key("x", stripped, has_meta=False) == wire.match_key("x", p)


@given(st.integers(-(10**30), 10**30))
def test_large_integers_parse_exactly(n: int) -> None:
    """Integers of any size come back exactly (orjson alone rounds those past 64 bits)."""
    assert wire.loads(b'{"n":%d}' % n) == {"n": n}


big_scalars = (st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.text(max_size=8)
               | st.floats(allow_nan=False, allow_infinity=False)
               | st.sampled_from([2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 1e19, -1e19]))
big_values = st.recursive(
    big_scalars,
    lambda children: st.lists(children, max_size=40) | st.dictionaries(keys, children, max_size=40),
    max_leaves=600,
)


@given(big_values, st.integers(0, 2))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_long_messages_parse_as_json_does(value: Any, where: int) -> None:
    """A message past the size where orjson parses first (its values then looked at for a float
    that may be a rounded integer, up to a budget) parses to the very values, of the very types,
    that ``json`` gives: wherever the long text sits, however many values there are."""
    pad = "x" * wire._SAMPLED_FROM
    doc = [pad, value] if where == 0 else {"v": value, "p": pad} if where == 1 else [value, pad]
    raw = json.dumps(doc).encode()
    assert json.dumps(wire.loads(raw)) == json.dumps(json.loads(raw))


def test_long_messages_orjson_refuses_parse_as_before() -> None:
    """What orjson refuses in a long message, json parses after 19 digits in a row, as before;
    without them the error stays."""
    pad = "x" * wire._SAMPLED_FROM
    assert wire.loads(f'["{pad}", 1e400, 12345678901234567890123]'.encode())[1] == float("inf")
    with pytest.raises(orjson.JSONDecodeError):
        wire.loads(f'["{pad}", 1e400]'.encode())


digit_texts = st.lists(
    st.one_of(st.text("0123456789", min_size=1, max_size=40),
              st.text("abc ,.:-\"{}[]e0123456789", min_size=1, max_size=9)),
    min_size=1, max_size=400,
).map(lambda parts: "".join(parts).encode())


@given(digit_texts, st.integers(0, 6000))
def test_sampled_digit_run_check_agrees_with_the_whole_check(text: bytes, pad: int) -> None:
    """The long-message shortcut (every 6th byte first) finds a run of 19 digits exactly when
    the whole check does, wherever the run sits (the padding moves the text past the size where
    the shortcut begins and slides it across the sampled positions)."""
    raw = b"x" * pad + text
    assert wire._digit_run(raw) == (wire._DIGIT_RUN in raw.translate(wire._DIGIT_MASK))
    if pad >= 19:  # a run planted at any offset is found
        at = pad - 19
        planted = raw[:at] + b"9" * 19 + raw[at + 19:]
        assert wire._digit_run(planted)


# --- paths: every path mcprec prints parses back to the same place ------------------------------

# any key a JSON object may have: the path syntax's own characters, digits, empty, unicode
# (lone surrogates too: exact parsing keeps them)
path_keys = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=8),
    st.text(".[]\"'*$/\\ 0123456789_-aZé", max_size=6),
    st.sampled_from(["", "*", "..", "io.example/key", "0", "[0]", "a b", "$", "$x", "a\n"]),
)
path_steps = st.lists(st.one_of(path_keys, st.integers(0, 10**9)), min_size=1, max_size=6)


@given(path_steps, st.sampled_from(["$", ""]))
def test_written_paths_parse_back(steps: list[str | int], root: str) -> None:
    """A path written from any keys and indexes parses back to exactly those steps."""
    assert jsonpath.parse_path(jsonpath.format_path(steps, root)) == tuple(steps)


def _at(value: Any, steps: tuple[Any, ...]) -> Any:
    """What ``steps`` point at in ``value``, going on into strings that hold JSON."""
    for step in steps:
        if isinstance(value, str):
            value = jsonpath.embedded_json(value)
        value = value[step]
    return jsonpath.plain(value)


path_values = st.recursive(
    scalars, lambda children: st.lists(children, max_size=3)
    | st.dictionaries(path_keys, children, max_size=3), max_leaves=12)


@given(st.dictionaries(path_keys, path_values, max_size=3),
       st.dictionaries(path_keys, path_values, max_size=3))
def test_reported_paths_lead_to_what_differs(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The paths of replay's no-match report and of the diff point at the values they show."""
    for d in matching.differences(a, b):
        steps = jsonpath.parse_path(d.path)
        if d.kind != "only_got":
            assert _at(a, steps) == d.recorded
        if d.kind != "only_recorded":
            assert _at(b, steps) == d.got
    for p in diff_paths.differences(a, b):
        steps = jsonpath.parse_path(p.path)
        if p.kind != "added":
            assert _at(a, steps) == jsonpath.plain(p.before)
        if p.kind != "removed":
            assert _at(b, steps) == jsonpath.plain(p.after)


# --- walking by path: ignoring (remove_paths) and redacting (Redactor) ---------------------------

walk_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([1.5, "x", PLACEHOLDER]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("ab"), c, max_size=3),
    max_leaves=15)
walk_paths = st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "*", 0, 1])),
                      min_size=1, max_size=4).map(lambda segments: "$" + "".join(
                          (".." if descend else "" if isinstance(s, int) else ".")
                          + (f"[{s}]" if isinstance(s, int) else s) for descend, s in segments))


def pointed(value: Any, path: tuple[Any, ...], at: tuple[Any, ...] = ()) -> set[tuple[Any, ...]]:
    """Where ``path`` points in ``value``: the specification, as concrete steps."""
    if not path:
        return {at}
    head, rest = path[0], path[1:]
    if head is jsonpath.DESCEND:
        children = value.items() if isinstance(value, dict) else (
            enumerate(value) if isinstance(value, list) else ())
        return pointed(value, rest, at).union(
            *(pointed(child, path, (*at, k)) for k, child in children))
    if isinstance(value, dict):
        keys = list(value) if head is jsonpath.ANY else [head] if head in value else []
    elif isinstance(value, list):
        keys = list(range(len(value))) if head is jsonpath.ANY else (
            [head] if isinstance(head, int) and head < len(value) else [])
    else:
        keys = []
    return set().union(*(pointed(value[k], rest, (*at, k)) for k in keys))


def exact(value: Any) -> bytes:
    """JSON text that tells 1 from true and 0 from 0.0, key order aside."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@given(walk_values, walk_paths)
def test_ignore_removes_exactly_what_the_path_points_at(value: Any, text: str) -> None:
    """Keys the path points at go, list items it points at become null; nothing else changes."""
    path = jsonpath.parse_path(text)
    expected = orjson.loads(orjson.dumps(value))
    for steps in sorted(pointed(value, path), key=len, reverse=True):  # innermost first
        parent = expected
        for step in steps[:-1]:
            parent = parent[step]
        if isinstance(parent, dict):
            del parent[steps[-1]]
        else:
            parent[steps[-1]] = None
    assert exact(jsonpath.remove_paths(value, (path,))) == exact(expected)


@given(walk_values, walk_paths)
def test_redaction_by_path_replaces_exactly_the_values_it_points_at(value: Any, text: str) -> None:
    """Numbers and strings the path points at become placeholders of their type; the rest,
    and a message with nothing to replace, stay as they are, byte for byte."""
    raw = json.dumps({"jsonrpc": "2.0", "method": "x", "params": value}).encode()  # spaced
    expected = orjson.loads(raw)
    for steps in pointed(value, jsonpath.parse_path(text)):
        parent, key = expected, "params"
        for step in steps:
            parent, key = parent[key], step
        if not isinstance(parent[key], (dict, list)) and parent[key] is not None:
            parent[key] = placeholder_like(parent[key])
    out = Redactor(Rules(paths=[text.replace("$", "$.params", 1)], defaults=False,
                         env=False)).redact(raw)
    assert exact(orjson.loads(out)) == exact(expected)
    if exact(expected) == exact(orjson.loads(raw)):
        assert out == raw


@given(json_values, json_values)
def test_replay_and_diff_report_the_same_leaf_differences(a: Any, b: Any) -> None:
    """The replay's no-match report and the diff walk values with one walker: the same leaves,
    under the same paths, with each side named as the tool names it."""
    from mcprec.diff.paths import differences as diff_leaves
    from mcprec.matching import differences as replay_leaves

    names = {"changed": "changed", "removed": "only_recorded", "added": "only_got"}
    for value in (a, b):  # strings holding JSON compare as strings in both views here
        assume(not any(isinstance(v, str) and v.lstrip()[:1] in ("{", "[") for v in leaves(value)))
    replay = sorted((d.path, d.kind) for d in replay_leaves(a, b))
    diff = sorted((d.path or "$", names[d.kind]) for d in diff_leaves(a, b, ""))
    assert replay == diff
    if not _same_types(a, b):
        assert replay  # a type change is a difference, even where Python's == says equal


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def _same_types(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_types(x, y) for x, y in zip(a, b))
    return type(a) is type(b)


ids = st.integers(-(2**70), 2**70) | st.text(max_size=12)


@given(ids, ids, json_values, st.sampled_from(["head", "tail", "middle"]), st.booleans())
def test_id_splice_changes_the_id_alone(old: Any, new: Any, result: Any, where: str,
                                        spaced: bool) -> None:
    """wire.with_id gives the message with the new id and every other byte as it was, or
    None; it finds the id wherever the SDKs write it (first, or last)."""
    order = {"head": ["jsonrpc", "id", "result"], "tail": ["result", "jsonrpc", "id"],
             "middle": ["result", "id", "jsonrpc"]}[where]
    comma, colon = (", ", ": ") if spaced else (",", ":")

    def message(id_text: str) -> bytes:
        text = {"jsonrpc": '"2.0"', "id": id_text, "result": json.dumps(result)}
        return ("{" + comma.join(f'"{k}"{colon}{text[k]}' for k in order) + "}").encode()

    raw = message(json.dumps(old))
    out = wire.with_id(raw, new)
    if where in ("head", "tail"):
        assert out is not None
    if out is not None:
        assert out == message(wire.dumps(new).decode())


@pytest.mark.parametrize("pad", [0, 5_000, 100_000])
@pytest.mark.parametrize("secret, make", [
    ("hunter2hunter2", lambda s, pad: {"password": s, "pad": pad}),
    ("hunter2hunter2", lambda s, pad: {"text": json.dumps({"api_key": s, "pad": pad},
                                                          indent=2)}),
    ("ghp_" + "a1B2" * 9, lambda s, pad: {"note": f"{pad} token {s} end"}),
    ("sk-" + "Zx9" * 16, lambda s, pad: {"note": f"{pad} key={s}"}),
    ("xoxb-1234567890-abcdefghij", lambda s, pad: {"note": f"slack {s} {pad}"}),
])
def test_secrets_go_whatever_the_message_size(secret: str, make: Any, pad: int) -> None:
    """Small and large messages take different look-ups (large ones look for rare bytes and
    for keys alone); both redact the same secrets."""
    value = make(secret, "lorem ipsum dolor sit amet " * (pad // 27))
    raw = wire.dumps({"jsonrpc": "2.0", "id": 1, "result": value})
    assert secret.encode() not in Redactor(Rules()).redact(raw)


@given(st.lists(st.sampled_from([b"{", b"}", b'"a"', b":", b"1", b" ", b"\n", b"\r", b"\r\n"]),
                max_size=40).map(b"".join), st.lists(st.integers(1, 17), min_size=1, max_size=20))
def test_an_event_with_line_breaks_reads_back_as_its_lines(data: bytes, cuts: list[int]) -> None:
    """Data holding CR LF, CR or LF (JSON written with line breaks between its tokens) is read
    back, however the stream is cut, as its lines joined by LF: no line ends early at a CR."""
    stream = format_event(data, id="e1")
    parser = SSEParser()
    got = []
    pos = 0
    for n in cuts * (len(stream) // sum(cuts) + 1):
        if pos >= len(stream):
            break
        got += parser.feed(stream[pos:pos + n])
        pos += n
    assert [(g.data, g.id) for g in got] == [
        (data.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), "e1")]
