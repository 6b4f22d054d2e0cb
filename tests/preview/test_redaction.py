"""Redaction hides every secret the plan knows wherever it appears: a secret inside a
longer one and two that overlap leave nothing of either behind."""

import random

import pytest
from pulumi.runtime import rpc

from preview.plan import Plan
from preview.redaction import REDACTED, Redactor
from tests.builders import TEST_PRIVATE_KEY


def covered(text: str, secrets: set[str]) -> str:
    """The reference: every occurrence of every secret marked, overlapping ones merged,
    each stretch replaced once."""
    spans = sorted((start, start + len(secret)) for secret in secrets if len(secret) >= 6
                   for start in range(len(text)) if text.startswith(secret, start))
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    parts, done = [], 0
    for start, end in merged:
        parts += [text[done:start], REDACTED]
        done = end
    return "".join(parts) + text[done:]


PEM = TEST_PRIVATE_KEY
PEM_LINES = {line for line in PEM.splitlines() if len(line) >= 16}

CASES = {
    "inside a longer one": ({"abcdefgh", "cdefgh", "abcdefghij"},
                            "1 abcdefghij 2 cdefgh 3 abcdefgh 4", "1 # 2 # 3 # 4"),
    "the start of a longer one": ({"abcdef", "abcdefghijklmnopqrstuv"},
                                  "abcdefghijklmnopqrstuX", "#ghijklmnopqrstuX"),
    "overlapping": ({"xxabcd12", "abcd1234"}, "(xxabcd1234)", "(#)"),
    "a chain of overlaps": ({"aaaa1111", "1111bbbb", "bbbbcccc"}, "-aaaa1111bbbbcccc-", "-#-"),
    "side by side": ({"secret-one", "secret-two"}, "secret-onesecret-two", "##"),
    "too short to hide": ({"short", "k"}, "short k", "short k"),
    "a key, its stripped form and its lines": (
        {PEM, PEM.strip(), *PEM_LINES},
        f"key: {PEM}line: {sorted(PEM_LINES)[0]}\nquoted: '{PEM.strip()}'",
        "key: #line: #\nquoted: '#'"),
}


@pytest.mark.parametrize("secrets, text, shown", CASES.values(), ids=CASES.keys())
def test_every_secret_is_hidden_whole(secrets, text, shown):
    plan = Plan(project="p", stack="s", secrets=frozenset(secrets))
    assert plan.redact(text) == shown.replace("#", REDACTED) == covered(text, secrets)
    assert plan.redact({"nested": [text]}) == {"nested": [plan.redact(text)]}


def test_redaction_matches_the_reference_on_random_overlapping_secrets():
    rng = random.Random(20261123)
    for _ in range(300):
        # A small alphabet, so secrets share prefixes, contain and overlap one another.
        pieces = ["ab", "ba", "abc", "ca", "c", "[", "]", "\n", "a\nb"]
        secrets = {"".join(rng.choices(pieces, k=rng.randint(3, 6))) for _ in range(6)}
        text = "".join(rng.choices(pieces + [*secrets], k=30))
        assert Redactor(secrets).redact(text) == covered(text, secrets), (secrets, text)


def test_a_secret_added_later_is_hidden_too():
    plan = Plan(project="p", stack="s", secrets=frozenset({"first-secret"}))
    assert plan.redact("first-secret second-secret") == f"{REDACTED} second-secret"
    plan.add_secrets({"second-secret"})
    assert plan.redact("first-secret second-secret") == f"{REDACTED} {REDACTED}"


def test_a_secret_value_without_a_known_secret_stays_hidden_whole_however_often_read():
    """Only a known secret inside a secret-wrapped value lets the rest of it show; text
    read before (an equal string, as another object) changes nothing."""
    plan = Plan(project="p", stack="s", secrets=frozenset({"known-secret"}))
    name = "-".join(["bootstrap", "token", "ea20ae"])
    assert plan.redact(name) == name
    again = "-".join(["bootstrap", "token", "ea20ae"])
    assert again == name and again is not name
    wrapped = rpc.wrap_rpc_secret({"name": again, "namespace": "kube-system"})
    assert plan.redact(wrapped) == {"name": REDACTED, "namespace": REDACTED}
    assert plan.redact(rpc.wrap_rpc_secret({"name": again, "token": "known-secret"})) == {
        "name": again, "token": REDACTED}


def test_a_secret_with_a_quote_is_hidden_as_the_envelope_writes_it():
    """A step's inputs are single-quoted in its stdin, a ' written as '\\'' (step_text):
    the secret is hidden in that form too, not only as the plain value."""
    from components.common.step_text import Script, render_envelope

    # authorized-keys.sh takes SSH_USER and, optional, AUTHORIZED_KEYS: here the secret.
    secret = "it's-a-long-passphrase"
    stdin = render_envelope("moscow", "demo", Script("authorized-keys.sh"),
                            {"SSH_USER": "ops", "AUTHORIZED_KEYS": secret})
    assert secret not in stdin  # only its quoted form is there
    shown = Plan(project="p", stack="s", secrets=frozenset({secret})).redact(stdin)
    assert "passphrase" not in shown
    assert f"export AUTHORIZED_KEYS='{REDACTED}'" in shown
