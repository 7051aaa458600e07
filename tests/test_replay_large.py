"""Replaying large answers: sent from the cassette in pieces, never read whole, and byte for byte
what replay sent when it read them whole and spliced the client's id in (``wire.with_id``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcprec import wire

# --- where the id is, from the head and tail alone -------------------------------------------------

ids = st.integers(-(2**70), 2**70) | st.text(max_size=12)
blanks = st.sampled_from(["", " ", "\n  ", "\t"])


@settings(max_examples=500, deadline=None)
@given(ids, ids, st.sampled_from(["head", "tail", "tail after jsonrpc", "middle", "both"]),
       blanks, st.integers(0, 300), st.data())
def test_id_span_finds_what_with_id_finds(old: Any, new: Any, where: str, blank: str,
                                          pad: int, data: st.DataObject) -> None:
    """From any head of a message (and its tail), ``wire.id_span`` gives the span ``with_id``
    splices, or None (then the message is read whole); a head holding the whole id says."""
    rid = json.dumps(old)
    result = json.dumps({"text": "x" * pad, "id": 5})
    b = blank
    members = {
        "head": [f'"jsonrpc"{b}:{b}"2.0"', f'"id"{b}:{b}{rid}', f'"result":{result}'],
        "tail": [f'"result":{result}', f'"id"{b}:{b}{rid}'],
        "tail after jsonrpc": [f'"result":{result}', f'"id":{rid}', '"jsonrpc":"2.0"'],
        "middle": [f'"result":{result}', f'"id":{rid}', '"x":1'],
        "both": [f'"id":{rid}', f'"result":{result}', '"id":3'],
    }[where]
    raw = (b + "{" + b + f",{b}".join(members) + b + "}" + b).encode()
    h = data.draw(st.integers(0, len(raw)))
    span = wire.id_span(raw[:h], len(raw), lambda n: raw[len(raw) - n:])
    spliced = wire.with_id(raw, new)
    if span is not None:
        assert raw[:span[0]] + wire.dumps(new) + raw[span[1]:] == spliced
    elif h == len(raw):
        assert spliced is None
    found = wire._id_patterns()[0].match(raw)
    if found is not None and h >= found.end():
        assert span == found.span(1)
