"""The kubeconfigs the program itself builds (the lab and prod stacks under the offline
preview, with their real generated certificates), handed out by the command and loaded by
kubectl."""

import base64
import json
import os
import subprocess

import pytest
import yaml
from cryptography import x509

from preview.engine import run_program
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR
from tests.distribute.conftest import exported, kubectl_view


@pytest.fixture
def lab_outputs(lab_plan, tmp_path):
    return exported(lab_plan, tmp_path / "lab-outputs.json")


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


def test_admin_kubeconfig_of_the_program(run, lab_outputs, tmp_path, kubectl):
    path, values = lab_outputs
    target = tmp_path / "config"
    done = run("write", "--admin", "--outputs", str(path), "--merge-into", str(target))
    assert _key_slice(values["kubeconfig"]) not in done.stderr + done.stdout
    view, client = _view_and_verify(kubectl, target, "lab-admin")
    assert view["clusters"][0]["name"] == "lab"
    assert view["clusters"][0]["cluster"]["server"] == values["apiEndpoint"]
    assert "O=system:masters" in client.subject.rfc4514_string()


def test_user_kubeconfigs_of_the_program(run, lab_outputs, tmp_path, kubectl):
    path, values = lab_outputs
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


@pytest.fixture(scope="module")
def hybrid_outputs(tmp_path_factory):
    """The prod stack's outputs (hybrid: users reach the API at its private address)."""
    plan = run_program(PROJECT_DIR, read_stack(PROJECT_DIR, "prod"))
    return exported(plan, tmp_path_factory.mktemp("prod") / "prod-outputs.json")


def test_hybrid_admin_and_user_kubeconfigs_merge_apart(run, hybrid_outputs, tmp_path, kubectl):
    """An admin who is also a user keeps both: kubectl merging KUBECONFIG=admin:user keeps
    the first file's entry of a name, so the user's context must name its own cluster entry
    to reach the private address; `distribute --merge-into` merges both without --force."""
    path, values = hybrid_outputs
    users = values["userKubeconfigs"]
    user = sorted(users)[0]
    admin_file, user_file = tmp_path / "admin", tmp_path / "user"
    admin_file.write_text(values["kubeconfig"])
    user_file.write_text(users[user])
    private = yaml.safe_load(users[user])["clusters"][0]["cluster"]["server"]
    assert private != values["apiEndpoint"]
    merged = subprocess.run(
        [kubectl, "config", "view", "--minify", "--raw", "-o", "json", "--context",
         f"prod-{user}"], env={**os.environ, "KUBECONFIG": f"{admin_file}:{user_file}"},
        capture_output=True, text=True, check=True)
    assert json.loads(merged.stdout)["clusters"][0]["cluster"]["server"] == private
    target = tmp_path / "config"
    run("write", "--admin", "--outputs", str(path), "--merge-into", str(target))
    run("write", "--user", user, "--outputs", str(path), "--merge-into", str(target))
    for context, server in (("prod-admin", values["apiEndpoint"]), (f"prod-{user}", private)):
        view, _ = _view_and_verify(kubectl, target, context)
        assert view["clusters"][0]["cluster"]["server"] == server
