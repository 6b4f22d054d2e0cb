"""`--merge-into`: the new context joins an existing kubeconfig; everything else stays, and
entries of the same name that describe another cluster are refused without --force."""

import base64
import json
import os
import stat
import subprocess

import pytest
import yaml

from distribute.__main__ import main
from tests.distribute.conftest import (CLUSTER, OTHER_SERVER, SERVER, assert_verifies,
                                       kubectl_view, load)


@pytest.fixture
def existing(tmp_path, other_ca):
    """A user's kubeconfig with another cluster: a certificate user, a token user and an
    exec user, a context per user, the first one current; mode 0644 as many tools leave it."""
    ca_data = base64.b64encode(other_ca.cert_pem.encode()).decode()
    document = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "lab", "cluster": {"server": OTHER_SERVER,
                                                 "certificate-authority-data": ca_data}}],
        "users": [
            {"name": "lab-admin", "user": {"token": "placeholder-token-for-tests"}},
            {"name": "lab-sso", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "command": "kubelogin",
                "args": ["get-token"], "interactiveMode": "IfAvailable"}}},
        ],
        "contexts": [
            {"name": "lab-admin", "context": {"cluster": "lab", "user": "lab-admin"}},
            {"name": "lab-sso", "context": {"cluster": "lab", "user": "lab-sso",
                                            "namespace": "research"}},
        ],
        "current-context": "lab-admin",
    }
    path = tmp_path / "kube" / "config"
    path.parent.mkdir(mode=0o755)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o644)
    return path


def merge_alice(run, outputs_file, path, *extra, expect=0):
    return run("write", "--user", "alice", "--outputs", str(outputs_file), "--merge-into",
               str(path), *extra, expect=expect)


def test_merge_keeps_other_contexts_and_current(run, outputs_file, existing, kubectl, cluster):
    before = load(existing)
    done = merge_alice(run, outputs_file, existing)
    assert "cluster 'test' added, user 'test-alice' added, context 'test-alice' added" \
        in done.stderr
    assert "current context 'lab-admin'" in done.stderr
    assert "had mode 0644, now 0600" in done.stderr
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    view = kubectl_view(kubectl, existing, "--raw")
    assert [c["name"] for c in view["contexts"]] == ["lab-admin", "lab-sso", "test-alice"]
    assert view["current-context"] == "lab-admin"
    after = load(existing)
    for section in ("clusters", "users", "contexts"):
        assert after[section][:len(before[section])] == before[section]
    minified = kubectl_view(kubectl, existing, "--minify", "--raw", "--context", "test-alice")
    assert minified["clusters"][0]["cluster"]["server"] == SERVER
    assert_verifies(minified, "test-alice", cluster.ca)
    # The other cluster's entries are untouched, as kubectl reads them.
    lab = kubectl_view(kubectl, existing, "--minify", "--raw", "--context", "lab-sso")
    assert lab["clusters"][0]["cluster"]["server"] == OTHER_SERVER
    assert lab["users"][0]["user"]["exec"]["command"] == "kubelogin"
    assert lab["contexts"][0]["context"]["namespace"] == "research"


def test_set_current_and_second_user(run, outputs_file, existing, kubectl, cluster):
    merge_alice(run, outputs_file, existing)
    run("write", "--admin", "--outputs", str(outputs_file), "--merge-into", str(existing),
        "--set-current")
    view = kubectl_view(kubectl, existing, "--raw")
    assert view["current-context"] == "test-admin"
    assert [c["name"] for c in view["clusters"]] == ["lab", "test"]
    # kubectl lists them by name; the file keeps the order they came in.
    assert [c["name"] for c in view["contexts"]] == [
        "lab-admin", "lab-sso", "test-admin", "test-alice"]
    assert [c["name"] for c in load(existing)["contexts"]] == [
        "lab-admin", "lab-sso", "test-alice", "test-admin"]
    assert_verifies(kubectl_view(kubectl, existing, "--minify", "--raw"), "test-admin", cluster.ca)


def test_remerge_is_idempotent(run, outputs_file, existing):
    merge_alice(run, outputs_file, existing)
    first = existing.read_bytes()
    inode = existing.stat().st_ino
    done = merge_alice(run, outputs_file, existing)
    assert "already up to date" in done.stderr
    assert "unchanged" in done.stderr
    assert existing.read_bytes() == first
    assert existing.stat().st_ino == inode  # not even rewritten


def test_renewed_certificate_replaces_without_force(run, outputs_file, existing, cluster,
                                                    tmp_path, kubectl):
    merge_alice(run, outputs_file, existing)
    renewed = tmp_path / "renewed.json"
    values = cluster.outputs()
    values["userKubeconfigs"]["alice"] = cluster.kubeconfig("alice", days=30)
    renewed.write_text(json.dumps(values))
    done = merge_alice(run, renewed, existing)
    assert "user 'test-alice' updated" in done.stderr and "cluster 'test' unchanged" in done.stderr
    client = assert_verifies(kubectl_view(kubectl, existing, "--minify", "--raw", "--context",
                                          "test-alice"), "test-alice", cluster.ca)
    lifetime = client.not_valid_after_utc - client.not_valid_before_utc
    assert lifetime.days <= 31


@pytest.mark.parametrize("clash, named", [
    # A cluster of the same name elsewhere.
    (lambda d: d["clusters"].append({"name": CLUSTER, "cluster": {
        "server": OTHER_SERVER, "certificate-authority-data": d["clusters"][0]["cluster"][
            "certificate-authority-data"]}}), "cluster 'test' has server " + OTHER_SERVER),
    # A context of the same name for another cluster.
    (lambda d: d["contexts"].append({"name": "test-alice", "context": {
        "cluster": "lab", "user": "lab-admin"}}), "context 'test-alice' uses cluster 'lab'"),
    # A user of the same name that another cluster's context uses.
    (lambda d: d["users"].append({"name": "test-alice", "user": {"token": "placeholder"}})
     or d["contexts"].append({"name": "lab-alice", "context": {"cluster": "lab",
                                                                "user": "test-alice"}}),
     "user 'test-alice' is used by context 'lab-alice' of cluster 'lab'"),
])
def test_same_name_other_cluster_needs_force(run, outputs_file, existing, kubectl, clash, named):
    document = load(existing)
    clash(document)
    existing.write_text(yaml.safe_dump(document, sort_keys=False))
    before = existing.read_bytes()
    done = merge_alice(run, outputs_file, existing, expect=2)
    assert done.stderr.startswith(f"error: refusing to merge into {existing}: ")
    assert named in done.stderr and "--force" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert existing.read_bytes() == before
    done = merge_alice(run, outputs_file, existing, "--force")
    assert "replaced (--force): " + named in done.stderr
    view = kubectl_view(kubectl, existing, "--raw")
    names = {c["name"] for c in view["contexts"]}
    assert {"lab-admin", "lab-sso", "test-alice"} <= names
    minified = kubectl_view(kubectl, existing, "--minify", "--raw", "--context", "test-alice")
    assert minified["clusters"][0]["cluster"]["server"] == SERVER


def test_same_server_other_ca_is_another_cluster(run, outputs_file, existing, other_ca):
    document = load(existing)
    document["clusters"].append({"name": CLUSTER, "cluster": {
        "server": SERVER,
        "certificate-authority-data": base64.b64encode(other_ca.cert_pem.encode()).decode()}})
    existing.write_text(yaml.safe_dump(document))
    done = merge_alice(run, outputs_file, existing, expect=2)
    assert f"cluster 'test' has server {SERVER} with another CA" in done.stderr


def test_same_cluster_by_ca_file_is_not_a_clash(run, outputs_file, existing, cluster):
    (existing.parent / "test-ca.crt").write_text(cluster.ca.cert_pem)
    document = load(existing)
    document["clusters"].append({"name": CLUSTER, "cluster": {
        "server": SERVER + "/", "certificate-authority": "test-ca.crt"}})
    existing.write_text(yaml.safe_dump(document))
    done = merge_alice(run, outputs_file, existing)
    assert "cluster 'test' updated" in done.stderr


def test_new_file_in_new_folders(run, outputs_file, tmp_path, kubectl):
    target = tmp_path / "a" / "b" / "config"
    done = merge_alice(run, outputs_file, target)
    assert f"created {tmp_path / 'a'} (mode 0700)" in done.stderr
    for path, expected in ((target, 0o600), (target.parent, 0o700), (target.parent.parent, 0o700)):
        assert stat.S_IMODE(path.stat().st_mode) == expected
    # A new file gets the new context as current: there was none to keep.
    assert kubectl_view(kubectl, target)["current-context"] == "test-alice"


def test_empty_file_and_symlink(run, outputs_file, tmp_path, kubectl):
    real = tmp_path / "real-config"
    real.write_text("")
    link = tmp_path / "config"
    link.symlink_to(real)
    done = merge_alice(run, outputs_file, link)
    assert link.is_symlink() and f"is a link to {real}" in done.stderr
    assert kubectl_view(kubectl, link)["contexts"][0]["name"] == "test-alice"


def test_unreadable_existing_file_is_left_alone(run, outputs_file, existing):
    existing.write_text("clusters: [\n  {name: x, cluster: {server: a\n")
    before = existing.read_bytes()
    done = merge_alice(run, outputs_file, existing, expect=2)
    assert f"{existing} is not valid YAML (line" in done.stderr
    existing.write_text("- just\n- a list\n")
    done = merge_alice(run, outputs_file, existing, expect=2)
    assert "is not a kubeconfig" in done.stderr
    existing.write_bytes(before)
    assert existing.read_bytes() == before


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_leaves_the_file_whole(monkeypatch, capsys, outputs_file, existing,
                                            failing, cluster):
    before = existing.read_bytes()
    real = getattr(os, failing)

    def broken(*args, **kwargs):
        # Fails the kubeconfig write itself (not the folder sync after it).
        if failing == "replace" or os.fstat(args[0]).st_size > 0:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, failing, broken)
    code = main(["write", "--user", "alice", "--outputs", str(outputs_file), "--merge-into",
                 str(existing)])
    assert code == 2  # nothing done: the file is unchanged
    err = capsys.readouterr().err
    assert err.strip() == (f"error: cannot write {existing}: No space left on device; "
                           "the file is unchanged")
    assert existing.read_bytes() == before
    assert stat.S_IMODE(existing.stat().st_mode) == 0o644
    assert sorted(p.name for p in existing.parent.iterdir()) == ["config"]
    assert not any(secret in err for secret in cluster.secrets)


def test_kubectls_lock_is_respected(run, outputs_file, existing, kubectl):
    lock = existing.with_name("config.lock")
    lock.touch()
    before = existing.read_bytes()
    # kubectl itself takes this lock while it writes a kubeconfig: the same file name.
    refused = subprocess.run([kubectl, "config", "set-context", "x", "--cluster", "lab",
                              "--kubeconfig", str(existing)], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and "config.lock" in refused.stderr
    done = merge_alice(run, outputs_file, existing, expect=2)
    assert f"{lock} exists: another program (kubectl) is writing {existing}" in done.stderr
    assert existing.read_bytes() == before
    lock.unlink()
    merge_alice(run, outputs_file, existing)
    assert not lock.exists()
