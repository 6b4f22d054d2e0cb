"""No secret value leaves the offline preview: for every example stack, with real secret
values made for this test (not the preview's placeholders), none appears in what
`python -m preview` prints or in any file it writes to build/<stack>/, also not inside the
base64 and gzip of user data, except files that are secret by design and say so in their
name (`*.secret.*`, mode 0600)."""

import base64
import contextlib
import io
import json
import secrets
import stat
from dataclasses import replace
from pathlib import Path

import bcrypt
import pytest

import preview.__main__ as preview_command
from config.model import PRIVATE_KEY_KEYS
from policy.user_data import decode_user_data
from preview import credentials, vpn_placeholder
from preview.engine import _secret_strings
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR

STACKS = list(EXAMPLE_STACKS)
NAMESPACE = "gpu-cluster"
SECRET_BY_DESIGN = ".secret."


def made_up_secret(name: str) -> str:
    """A real value of the kind the key holds, made for this run."""
    if name in PRIVATE_KEY_KEYS:
        return credentials.ssh_private_key()
    if name == "vpnClientProfile":
        # A whole profile (its keys made for this run): config refuses anything else.
        return vpn_placeholder.client_profile()
    return "Tt1-" + secrets.token_urlsafe(24)


def with_real_secrets(stack: str):
    """The stack as the CLI would hand it over, every secret a real made-up value; a
    bastion gets its own key."""
    stack_file = read_stack(PROJECT_DIR, stack)
    config = dict(stack_file.config)
    keys = list(stack_file.secret_keys)
    if "bastion" in json.loads(config.get(f"{NAMESPACE}:ssh", "{}")):
        keys.append(f"{NAMESPACE}:bastionPrivateKey")
    values = {key: made_up_secret(key.split(":", 1)[1]) for key in dict.fromkeys(keys)}
    for key, value in values.items():
        if key.endswith(":kubeflowPasswordHashes"):
            # A map: a real bcrypt hash per user it names.
            values[key] = json.dumps({name: bcrypt.hashpw(made_up_secret(name).encode(),
                                                          bcrypt.gensalt(4)).decode()
                                      for name in json.loads(config[key])})
    config.update(values)
    return replace(stack_file, config=config, secret_keys=list(values), placeholders=[],
                   missing=[]), values


def needles(value: str) -> set:
    """A secret and the forms it could be re-serialised in: whole, base64, and (as the
    preview engine redacts them) the lines of its private-key blocks and the credential
    values of a kubeconfig."""
    found = {value.strip(), base64.b64encode(value.encode()).decode(), *_secret_strings(value)}
    # A map's values (kubeflowPasswordHashes), each whole and in base64.
    found |= {base64.b64encode(s.encode()).decode() for s in _secret_strings(value)}
    return {n for n in found if len(n) >= 8}


def texts_of(path: Path) -> list:
    """A file's text, and for a plan the decoded user data inside it."""
    text = path.read_bytes().decode("utf-8", "replace")
    texts = [text]
    if path.name == "plan.json":
        for resource in json.loads(text)["resources"]:
            for field in ("userData", "userDataBase64"):
                value = resource["inputs"].get(field)
                if isinstance(value, str):
                    texts += decode_user_data(value)
    return texts


@pytest.fixture(scope="module", params=STACKS)
def previewed(request, tmp_path_factory):
    """The preview command run for a stack with real secrets: (values, plan, printed, folder)."""
    stack = request.param
    stack_file, values = with_real_secrets(stack)
    plans = []
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(preview_command, "read_stack", lambda project, name: stack_file)
    run_program = preview_command.run_program
    monkeypatch.setattr(preview_command, "run_program",
                        lambda *args: plans.append(run_program(*args)) or plans[-1])
    build = tmp_path_factory.mktemp("build")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = preview_command.main([stack, "--build-dir", str(build)])
    monkeypatch.undo()
    assert code == 0, err.getvalue()
    return values, plans[0], out.getvalue() + err.getvalue(), build / stack


def all_needles(values: dict, plan) -> dict:
    """What must not appear, each with where it comes from (never the value itself)."""
    found = {}
    for key, value in values.items():
        for needle in needles(value):
            found[needle] = f"secret config {key}"
    for name, (value, secret) in plan.outputs.items():
        if secret:
            for needle in needles(str(value)):
                found[needle] = f"secret output {name}"
    for needle in plan.secrets:
        if len(needle) >= 8:
            found.setdefault(needle, "a secret the program made (key, token)")
    return found


def test_the_preview_was_given_the_real_secrets(previewed):
    values, plan, _, _ = previewed
    assert f"{NAMESPACE}:sshPrivateKey" in values
    # The program ran with them, as secrets.
    assert all(value.strip() in plan.secrets for value in values.values())
    assert any(secret for _, secret in plan.outputs.values())


def test_no_secret_in_what_the_preview_prints(previewed):
    values, plan, printed, _ = previewed
    assert "Resources:" in printed
    leaks = sorted({what for needle, what in all_needles(values, plan).items() if needle in printed})
    assert leaks == []


def test_no_secret_in_any_file_of_the_build_folder(previewed):
    values, plan, _, build = previewed
    files = sorted(p for p in build.rglob("*") if p.is_file())
    assert len(files) > 10 and (build / "plan.json") in files
    searched = all_needles(values, plan)
    leaks = []
    for path in files:
        if SECRET_BY_DESIGN in path.name:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            continue
        for text in texts_of(path):
            leaks += [f"{path.relative_to(build)}: {what}" for needle, what in searched.items()
                      if needle in text]
    assert sorted(set(leaks)) == []


def test_the_search_finds_a_leak(previewed, tmp_path):
    """The check above can fail: a key pasted into a script, or gzipped into user data."""
    values, plan, _, _ = previewed
    key = values[f"{NAMESPACE}:sshPrivateKey"]
    body = key.splitlines()[2]
    script = tmp_path / "01-step.sh"
    script.write_text(f"#!/usr/bin/env bash\nexport NOTE='{body}'\n")
    assert any(n in script.read_text() for n in all_needles(values, plan))
    from tests.policy.test_rules import multipart_gzip_base64

    plan_json = tmp_path / "plan.json"
    plan_json.write_text(json.dumps({"resources": [
        {"inputs": {"userData": multipart_gzip_base64(f"#!/bin/bash\necho '{body}'\n")}}]}))
    assert any(n in t for t in texts_of(plan_json) for n in all_needles(values, plan))
