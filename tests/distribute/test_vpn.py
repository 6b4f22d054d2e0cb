"""`write --vpn`: the user's OpenVPN profile of a hybrid stack (the prod example under the
offline preview, with its real generated PKI) written beside the kubeconfig, and brought up
by OpenVPN against the server the program configures, in network namespaces."""

import json
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from preview.engine import run_program
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR
from tests.distribute.conftest import exported
from tests.distribute.conftest import kubectl_view
from tests.vpn.conftest import stdin_of
from tests.vpn.netns import Lab, ping, require_network_namespaces, wait_for_text
from tests.vpn.test_tunnel import READY, STARTUP_TIMEOUT, run_step

USER = "carol"  # the prod stack's user


@pytest.fixture(scope="module")
def prod_plan():
    return run_program(PROJECT_DIR, read_stack(PROJECT_DIR, "prod"))


@pytest.fixture
def prod_outputs(prod_plan, tmp_path):
    return exported(prod_plan, tmp_path / "prod-outputs.json")


def _key_of(profile: str) -> str:
    """A slice of the profile's private key, to look for where it must not be."""
    return profile.split("<key>\n", 1)[1].splitlines()[1]


def test_profile_is_written_beside_the_kubeconfig(run, prod_outputs, tmp_path, kubectl):
    path, values = prod_outputs
    config = tmp_path / "home" / ".kube" / "config"
    done = run("write", "--user", USER, "--outputs", str(path), "--merge-into", str(config),
               "--vpn")
    profile = config.parent / f"prod-{USER}.ovpn"
    assert profile.read_text() == values["userVpnProfiles"][USER]
    assert stat.S_IMODE(profile.stat().st_mode) == 0o600
    assert f"wrote VPN profile 'user-{USER}' (server 203.0.113.23 1194 udp) to {profile}" \
        in done.stderr
    assert f"sudo openvpn --config {profile}" in done.stderr
    assert _key_of(values["userVpnProfiles"][USER]) not in done.stderr + done.stdout
    assert kubectl_view(kubectl, config)["current-context"] == f"prod-{USER}"
    # Again: nothing changes; a widened mode is narrowed.
    profile.chmod(0o644)
    done = run("write", "--user", USER, "--outputs", str(path), "--merge-into", str(config),
               "--vpn")
    assert f"{profile} already holds VPN profile" in done.stderr
    assert f"{profile} had mode 0644, now 0600" in done.stderr
    assert profile.read_text() == values["userVpnProfiles"][USER]


def test_admin_profile_beside_an_output_file(run, prod_outputs, tmp_path):
    path, values = prod_outputs
    run("write", "--admin", "--outputs", str(path), "--output", str(tmp_path / "admin.yaml"),
        "--vpn")
    assert (tmp_path / "prod-admin.ovpn").read_text() == values["vpnAdminProfile"]


def test_a_different_profile_is_replaced_only_with_force(run, prod_outputs, tmp_path):
    path, values = prod_outputs
    config, profile = tmp_path / "config", tmp_path / f"prod-{USER}.ovpn"
    profile.write_text("remote vpn.example.org\n")
    args = ("write", "--user", USER, "--outputs", str(path), "--merge-into", str(config), "--vpn")
    done = run(*args, expect=2)
    assert done.stderr.strip() == (f"error: {profile} exists and holds another VPN profile: "
                                   "rerun with --force to replace it")
    # Both files or neither: the kubeconfig is not written either.
    assert not config.exists() and profile.read_text() == "remote vpn.example.org\n"
    run(*args, "--force")
    assert profile.read_text() == values["userVpnProfiles"][USER]


def test_stack_without_vpn_profiles_names_the_output(run, outputs_file, tmp_path):
    # A bare-metal stack's outputs (tests/distribute/conftest.py): no VPN.
    done = run("write", "--user", "alice", "--outputs", str(outputs_file), "--output",
               str(tmp_path / "a.yaml"), "--vpn", expect=2)
    assert done.stderr.strip() == (
        f"error: outputs file '{outputs_file}' has no output 'userVpnProfiles': only hybrid "
        "stacks with vpn.mode server-on-ec2 export VPN profiles; other layouts reach the API "
        "without one")
    assert list(tmp_path.iterdir()) == [outputs_file]
    done = run("write", "--admin", "--outputs", str(outputs_file), "--output",
               str(tmp_path / "a.yaml"), "--vpn", expect=2)
    assert "has no output 'vpnAdminProfile'" in done.stderr


def test_user_without_a_profile_or_redacted_profiles(run, prod_outputs, tmp_path):
    _, values = prod_outputs
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**values, "userVpnProfiles": {}}))
    done = run("write", "--user", USER, "--outputs", str(edited), "--output",
               str(tmp_path / "c.yaml"), "--vpn", expect=2)
    assert done.stderr.strip() == (f"error: no user '{USER}' in output 'userVpnProfiles' of "
                                   f"outputs file '{edited}'; users with a VPN profile: none")
    edited.write_text(json.dumps({**values, "userVpnProfiles": "[secret]"}))
    done = run("write", "--user", USER, "--outputs", str(edited), "--output",
               str(tmp_path / "c.yaml"), "--vpn", expect=2)
    assert "output 'userVpnProfiles'" in done.stderr and "--show-secrets" in done.stderr
    assert not (tmp_path / "c.yaml").exists()


def test_a_profile_whose_key_is_not_its_certificates_is_refused(run, prod_outputs, tmp_path):
    _, values = prod_outputs
    profile = values["userVpnProfiles"][USER]
    admin_key = values["vpnAdminProfile"].split("<key>\n", 1)[1].split("</key>")[0]
    user_key = profile.split("<key>\n", 1)[1].split("</key>")[0]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**values, "userVpnProfiles": {
        USER: profile.replace(user_key, admin_key)}}))
    done = run("write", "--user", USER, "--outputs", str(edited), "--output",
               str(tmp_path / "c.yaml"), "--vpn", expect=2)
    assert done.stderr.strip() == (f"error: user '{USER}' of output 'userVpnProfiles' of "
                                   f"outputs file '{edited}': the key does not belong to the "
                                   "certificate")
    assert admin_key.splitlines()[1] not in done.stderr


def test_vpn_needs_a_file_destination(run, prod_outputs):
    path, _ = prod_outputs
    done = run("write", "--user", USER, "--outputs", str(path), "--output", "-", "--vpn",
               expect=2)
    assert done.stdout == ""
    assert "--vpn writes the profile beside the kubeconfig file" in done.stderr


def test_written_profile_connects_to_the_programs_server(run, prod_outputs, prod_plan, tmp_path):
    """The profile as written, run by openvpn against the server the program's own step
    configures on the EC2 instance: the tunnel comes up and the server answers across it."""
    require_network_namespaces()
    path, _ = prod_outputs
    run("write", "--user", USER, "--outputs", str(path), "--output",
        str(tmp_path / "kube" / "config"), "--vpn")
    profile = tmp_path / "kube" / f"prod-{USER}.ovpn"
    remote = next(line.split() for line in profile.read_text().splitlines()
                  if line.startswith("remote "))
    workdir = Path(tempfile.mkdtemp(prefix="gpu-cluster-distribute-vpn-"))
    # OpenVPN reads the client-config-dir after dropping to nobody.
    workdir.chmod(0o755)
    lab = Lab()
    try:
        server_root = run_step(workdir, "server",
                               stdin_of(prod_plan, "control-plane-install-openvpn-server"))
        lab.namespace("server")
        lab.namespace("user")
        lab.link("server", f"{remote[1]}/24", "user", "203.0.113.77/24")
        logs = {role: workdir / f"openvpn-{role}.log" for role in ("server", "user")}
        server = lab.start("server", "openvpn", "--cd",
                           str(server_root / "etc/openvpn/server"), "--config",
                           "gpu-cluster.conf", log=logs["server"])
        wait_for_text(logs["server"], READY, STARTUP_TIMEOUT, server)
        client = lab.start("user", "openvpn", "--config", str(profile), log=logs["user"])
        wait_for_text(logs["user"], READY, STARTUP_TIMEOUT, client)
        assert f"user-{USER}" in logs["server"].read_text()
        ping(lab, "user", "10.8.0.1")
    finally:
        lab.close()
        shutil.rmtree(workdir, ignore_errors=True)
