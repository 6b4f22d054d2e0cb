"""`write --output`: a kubeconfig from the stack outputs (JSON export) to its own file."""

import base64
import json
import stat

import yaml

from tests.distribute.conftest import CLUSTER, SERVER, assert_verifies, kubectl_view, load


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_user_kubeconfig_from_json_export_loads_in_kubectl(run, outputs_file, tmp_path, kubectl,
                                                           cluster):
    target = tmp_path / "home" / ".kube" / "test-alice.yaml"
    done = run("write", "--user", "alice", "--outputs", str(outputs_file), "--output", str(target))
    assert "wrote context 'test-alice'" in done.stderr
    assert "valid until" in done.stderr
    assert done.stdout == ""
    assert mode(target) == 0o600
    assert mode(target.parent) == mode(target.parent.parent) == 0o700
    view = kubectl_view(kubectl, target, "--minify", "--raw")
    assert view["current-context"] == f"{CLUSTER}-alice"
    assert view["clusters"][0]["name"] == CLUSTER
    assert view["clusters"][0]["cluster"]["server"] == SERVER
    client = assert_verifies(view, f"{CLUSTER}-alice", cluster.ca)
    assert f"CN={CLUSTER}-alice" in client.subject.rfc4514_string().split(",")
    assert target.read_text() == cluster.kubeconfigs["alice"]


def test_admin_kubeconfig_from_stdin(run, cluster, tmp_path, kubectl):
    target = tmp_path / "admin.yaml"
    run("write", "--admin", "--outputs", "-", "--output", str(target),
        stdin=json.dumps(cluster.outputs()))
    view = kubectl_view(kubectl, target, "--minify", "--raw")
    assert view["current-context"] == f"{CLUSTER}-admin"
    client = assert_verifies(view, f"{CLUSTER}-admin", cluster.ca)
    assert "O=system:masters" in client.subject.rfc4514_string()


def test_output_dash_prints_the_kubeconfig_only(run, outputs_file, cluster):
    done = run("write", "--user", "bob", "--outputs", str(outputs_file), "--output", "-")
    assert yaml.safe_load(done.stdout) == yaml.safe_load(cluster.kubeconfigs["bob"])
    assert "BEGIN" not in done.stderr


def test_existing_different_file_needs_force(run, outputs_file, tmp_path, cluster):
    target = tmp_path / "config"
    target.write_text("mine\n")
    done = run("write", "--user", "alice", "--outputs", str(outputs_file), "--output", str(target),
               expect=2)
    assert "--force" in done.stderr and "--merge-into" in done.stderr
    assert target.read_text() == "mine\n"
    run("write", "--user", "alice", "--outputs", str(outputs_file), "--output", str(target),
        "--force")
    assert target.read_text() == cluster.kubeconfigs["alice"]


def test_rewrite_is_idempotent_and_narrows_a_wide_mode(run, outputs_file, tmp_path):
    target = tmp_path / "alice.yaml"
    args = ("write", "--user", "alice", "--outputs", str(outputs_file), "--output", str(target))
    run(*args)
    first = target.read_bytes()
    target.chmod(0o644)
    done = run(*args)
    assert "already holds" in done.stderr
    assert "had mode 0644, now 0600" in done.stderr
    assert mode(target) == 0o600
    assert target.read_bytes() == first


def test_unknown_user_lists_the_known_ones(run, outputs_file, tmp_path):
    done = run("write", "--user", "carol", "--outputs", str(outputs_file), "--output",
               str(tmp_path / "c.yaml"), expect=2)
    assert done.stderr.strip().splitlines() == [
        f"error: no user 'carol' in output 'userKubeconfigs' of outputs file '{outputs_file}'; "
        "known users: alice, bob"]
    assert not (tmp_path / "c.yaml").exists()


def test_missing_output_names_it_and_the_source(run, tmp_path, cluster):
    exported = tmp_path / "old.json"
    values = cluster.outputs()
    del values["userKubeconfigs"]
    exported.write_text(json.dumps(values))
    done = run("write", "--user", "alice", "--outputs", str(exported), "--output",
               str(tmp_path / "a.yaml"), expect=2)
    assert f"outputs file '{exported}' has no output 'userKubeconfigs'" in done.stderr
    assert "kubeconfig" in done.stderr  # the outputs it has


def test_redacted_export_says_how_to_export(run, tmp_path, cluster):
    # What `pulumi stack output --json` (and the offline preview's outputs.json) holds.
    exported = tmp_path / "outputs.json"
    exported.write_text(json.dumps({**cluster.outputs(), "kubeconfig": "[secret]",
                                    "userKubeconfigs": "[secret]"}))
    for who in (["--admin"], ["--user", "alice"]):
        done = run("write", *who, "--outputs", str(exported), "--output", str(tmp_path / "k"),
                   expect=2)
        assert "redacted" in done.stderr and "--show-secrets" in done.stderr


def test_broken_inputs_are_one_line_without_content(run, tmp_path, cluster):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(cluster.outputs())[:-40])
    done = run("write", "--user", "alice", "--outputs", str(broken), "--output", "-", expect=2)
    assert len(done.stderr.splitlines()) == 1 and "is not JSON (line 1" in done.stderr
    assert done.stdout == ""
    done = run("write", "--user", "alice", "--outputs", str(tmp_path / "none.json"),
               "--output", "-", expect=2)
    assert "does not exist" in done.stderr
    # A kubeconfig broken inside its key: the position only, never the text around it.
    values = cluster.outputs()
    text = values["userKubeconfigs"]["alice"]
    key = yaml.safe_load(text)["users"][0]["user"]["client-key-data"]
    values["userKubeconfigs"]["alice"] = text.replace(key, key[:160] + ": x" + key[160:])
    broken.write_text(json.dumps(values))
    done = run("write", "--user", "alice", "--outputs", str(broken), "--output", "-", expect=2)
    assert "is not valid YAML (line" in done.stderr and done.stdout == ""
    assert key[140:160] not in done.stderr


def test_key_that_is_not_the_certificates_is_refused(run, tmp_path, cluster):
    values = cluster.outputs()
    alice = yaml.safe_load(values["userKubeconfigs"]["alice"])
    bob = yaml.safe_load(values["userKubeconfigs"]["bob"])
    alice["users"][0]["user"]["client-key-data"] = bob["users"][0]["user"]["client-key-data"]
    values["userKubeconfigs"]["alice"] = yaml.safe_dump(alice)
    exported = tmp_path / "outputs.json"
    exported.write_text(json.dumps(values))
    done = run("write", "--user", "alice", "--outputs", str(exported), "--output",
               str(tmp_path / "a.yaml"), expect=2)
    assert "client key does not belong to the client certificate" in done.stderr
    assert not (tmp_path / "a.yaml").exists()


def test_certificate_from_another_ca_is_flagged(run, tmp_path, cluster, other_ca):
    values = cluster.outputs()
    alice = yaml.safe_load(values["userKubeconfigs"]["alice"])
    alice["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        other_ca.cert_pem.encode()).decode()
    values["userKubeconfigs"]["alice"] = yaml.safe_dump(alice)
    exported = tmp_path / "outputs.json"
    exported.write_text(json.dumps(values))
    # Written, with the warning named: exit code 1.
    done = run("write", "--user", "alice", "--outputs", str(exported), "--output",
               str(tmp_path / "a.yaml"), expect=1)
    assert "warning: the client certificate of user 'test-alice' is not signed by the CA" \
        in done.stderr


def test_usage_errors_exit_2(run, outputs_file, tmp_path):
    target = str(tmp_path / "a.yaml")
    done = run("write", "--user", "alice", "--outputs", str(outputs_file), "--output", target,
               "--set-current", expect=2)
    assert "--set-current goes with --merge-into" in done.stderr
    run("write", "--user", "alice", "--admin", "--outputs", str(outputs_file), "--output",
        target, expect=2)
    run("write", "--user", "alice", "--outputs", str(outputs_file), expect=2)
    done = run("write", "--user", "alice", "--outputs", str(outputs_file), "--cwd", "/",
               "--output", target, expect=2)
    assert "--cwd goes with STACK" in done.stderr
    assert not (tmp_path / "a.yaml").exists()


def test_written_file_equals_what_kubectl_reads(run, outputs_file, tmp_path, kubectl, cluster):
    target = tmp_path / "bob.yaml"
    run("write", "--user", "bob", "--outputs", str(outputs_file), "--output", str(target))
    view = kubectl_view(kubectl, target, "--raw")
    assert view["users"] == [{"name": f"{CLUSTER}-bob",
                              "user": load(target)["users"][0]["user"]}]
    assert_verifies(view, f"{CLUSTER}-bob", cluster.ca)
