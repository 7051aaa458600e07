"""``Redactor.redact_many`` (the look for anything to redact done once over a batch) gives
exactly what ``redact`` gives message by message, whatever the batch holds and whatever the
rules."""

from __future__ import annotations

import base64
import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcprec.redact import Redactor, Rules
from mcprec.redact.packs import parse_pack

from test_redact_speed_equivalence import NEAR, SECRETS

CRM = parse_pack('name = "crm"\nstrategy = "hash"\n\n[[rules]]\nkind = "customer"\n'
                 'pattern = "CUST-[0-9]{6}"\nanchors = ["CUST-"]\n', "crm.toml", sha256="0" * 64)
CRM_KEYS = parse_pack('name = "crm2"\n\n[[rules]]\nkeys = ["backup"]\nreplacement = "<B>"\n'
                      '\n[[rules]]\nkind = "ticket"\npattern = "TCK[0-9]{4}"\n',
                      "crm2.toml", sha256="1" * 64)

REDACTORS = {
    "defaults": Redactor(Rules(env=False)),
    "no defaults": Redactor(Rules(env=False, defaults=False)),
    "no defaults, a value": Redactor(Rules(env=False, defaults=False,
                                           extra_values=["hunter2hunter2"])),
    "values and keys": Redactor(Rules(env=False, extra_values=["hunter2hunter2", "gh-secret-1",
                                                               "two\nlines-x"],
                                      keys=["my_field"], patterns=[r"(?<=zz:)\d{4,}"])),
    "pii": Redactor(Rules(env=False, packs=["pii"])),
    "pii and paths, hashed": Redactor(Rules(env=False, packs=["pii", "paths"], strategy="hash"),
                                      salt=b"k"),
    "masked": Redactor(Rules(env=False, packs=["pii"], strategy="mask")),
    "json paths": Redactor(Rules(env=False, paths=["params.arguments.query"])),
    "user pack with anchors": Redactor(Rules(env=False, user_packs=(CRM,)), salt=b"k"),
    "user pack with keys": Redactor(Rules(env=False, user_packs=(CRM_KEYS,))),
}

WORDS = ["password", "progressToken", "api_key", "Authorization", "my_field", "backup",
         "cookie", "passport", "keyboard", "monkey", "author", "CUST-123456", "TCK1234",
         "ann@example.com", "+1 (555) 123-4567", "4111 1111 1111 1111", "/home/ann/notes.txt",
         "10.0.0.1", "zz:123456", "hunter2hunter2", "two\nlines-x", "\\u0040", "é", "\u2028"]


def call(rid: int, query: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": {"name": "search", "arguments": {"query": query}}})


def result(rid: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {
        "content": [{"type": "text", "text": text}], "isError": False}})


def check_same(batch: list[bytes]) -> None:
    for name, r in REDACTORS.items():
        assert r.redact_many(batch) == [r.redact(raw) for raw in batch], name


def test_a_batch_without_secrets_is_left_as_it_is() -> None:
    """Nothing to redact anywhere: the same bytes out, for each redactor."""
    batch = [m for i in range(300) for m in (call(i, f"notes about item {i}"),
                                             result(i, f"item {i} has 3 notes"))]
    check_same(batch)
    assert REDACTORS["defaults"].redact_many(batch) == batch


@pytest.mark.parametrize("secret", SECRETS + NEAR + WORDS)
@pytest.mark.parametrize("where", [0, 7, 99])
def test_one_secret_in_a_batch_is_redacted_in_its_own_message(secret: str, where: int) -> None:
    """A secret, a near miss or a secret-named key in one message of 100: that message as
    ``redact`` makes it, the others untouched."""
    batch = [call(i, "plain words") for i in range(100)]
    batch[where] = call(where, f"see {secret} there") if where % 2 else orjson.dumps(
        {"jsonrpc": "2.0", "id": where, "result": {secret: "v4lue-of-it", "text": secret}})
    check_same(batch)


def test_large_messages_and_payloads_in_a_batch_go_through_redact() -> None:
    """Messages past the small size (payloads, long texts) beside small ones."""
    rnd = random.Random(7)
    image = base64.b64encode(rnd.randbytes(3000)).decode()
    batch = [call(1, "x"), result(1, "Bearer abcdefgh12345678 " * 200),
             orjson.dumps({"id": 2, "result": {"content": [{"type": "image", "data": image}]}}),
             call(3, "password=" + "y" * 3000), result(3, "fine"), b"", b"not json at all"]
    check_same(batch)


pieces = st.one_of(st.sampled_from(SECRETS), st.sampled_from(NEAR), st.sampled_from(WORDS),
                   st.text(alphabet='ab Z09"\\:,{}[]\n\t_-=@?&/.+', max_size=30),
                   st.sampled_from(['"password": "hunter2x"', '\\"api_key\\": \\"v\\"',
                                    '"my-field" :1', '"x" :y":', '"' + "A" * 1100 + '"']))
messages = st.one_of(
    st.builds(lambda ps, i: call(i, "".join(ps)), st.lists(pieces, max_size=4),
              st.integers(0, 10**6)),
    st.builds(lambda ps, i: result(i, "".join(ps)), st.lists(pieces, max_size=4),
              st.integers(0, 10**6)),
    st.builds(lambda ps: "".join(ps).encode(), st.lists(pieces, max_size=6)),  # any bytes
    st.binary(max_size=200),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, max_size=40))
def test_generated_batches_go_as_redact_says(batch: list[bytes]) -> None:
    check_same(batch)
