"""The kubeconfigs the program itself builds (the lab stack under the offline preview, with
its real generated certificates), handed out by the command and loaded by kubectl."""

import base64
import json

import pytest
from cryptography import x509

from preview.engine import unwrap_secrets
from tests.distribute.conftest import kubectl_view


@pytest.fixture
def exported(lab_plan, tmp_path):
    """What `pulumi stack output --json --show-secrets` would print for the lab stack."""
    values = {name: unwrap_secrets(value) for name, (value, _) in lab_plan.outputs.items()}
    path = tmp_path / "lab-outputs.json"
    path.write_text(json.dumps(values))
    return path, values


def _key_slice(kubeconfig: str) -> str:
    """A piece of the client key's base64, to look for where it must not be."""
    line = next(l for l in kubeconfig.splitlines() if "client-key-data:" in l)
    return line.split(":", 1)[1].strip()[100:164]


def _view_and_verify(kubectl, path, context):
    view = kubectl_view(kubectl, path, "--minify", "--raw", "--context", context)
    cluster = view["clusters"][0]["cluster"]
    user = view["users"][0]["user"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(cluster["certificate-authority-data"]))
    client = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    client.verify_directly_issued_by(ca)
    return view, client


def test_admin_kubeconfig_of_the_program(run, exported, tmp_path, kubectl):
    path, values = exported
    target = tmp_path / "config"
    done = run("write", "--admin", "--outputs", str(path), "--merge-into", str(target))
    assert _key_slice(values["kubeconfig"]) not in done.stderr + done.stdout
    view, client = _view_and_verify(kubectl, target, "lab-admin")
    assert view["clusters"][0]["name"] == "lab"
    assert view["clusters"][0]["cluster"]["server"] == values["apiEndpoint"]
    assert "O=system:masters" in client.subject.rfc4514_string()


def test_user_kubeconfigs_of_the_program(run, exported, tmp_path, kubectl):
    path, values = exported
    users = values["userKubeconfigs"]
    if isinstance(users, str):
        users = json.loads(users)
    assert users, "userKubeconfigs is empty"
    target = tmp_path / "config"
    run("write", "--admin", "--outputs", str(path), "--merge-into", str(target))
    for user in sorted(users):
        done = run("write", "--user", user, "--outputs", str(path), "--merge-into", str(target))
        assert _key_slice(users[user]) not in done.stderr + done.stdout
        view, _ = _view_and_verify(kubectl, target, f"lab-{user}")
        assert view["clusters"][0]["cluster"]["server"] == values["apiEndpoint"]
    contexts = kubectl_view(kubectl, target)["contexts"]
    assert {c["name"] for c in contexts} == {"lab-admin"} | {f"lab-{u}" for u in users}
    assert kubectl_view(kubectl, target)["current-context"] == "lab-admin"
