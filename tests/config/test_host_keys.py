"""SSH host keys are required for every host the program reaches over SSH and for the
bastion: a stack without them is refused, in one message naming every host and the key to
set, unless ssh.acceptAnyHostKey says otherwise (and the preview warns then). A host key is
parsed, not only matched: its type and body agree, and RSA (which pulumi-command cannot
verify against OpenSSH 8.8+) is refused."""

import base64
import copy

import pytest

from config.host_security import host_key_warning, mitigations_warning
from tests.config.loading import loads, problem_lines, problems_of
from config.types import public_key_of
from preview import credentials
from tests.builders import TEST_HOST_KEY, bare_metal_config, cloud_config, hybrid_config


def _without_host_keys(values: dict) -> dict:
    values = copy.deepcopy(values)
    for host in values["hosts"]:
        host.pop("sshHostKey", None)
    return values


def _with_bastion(values: dict, host_key=None) -> dict:
    values["ssh"]["bastion"] = {"host": "203.0.113.10", **({"hostKey": host_key}
                                                            if host_key else {})}
    return values


def test_a_bare_metal_stack_without_host_keys_is_refused_naming_every_host_and_key():
    values = _with_bastion(_without_host_keys(bare_metal_config(workers=3)))

    [line] = problem_lines(values)

    assert line.startswith("gpu-cluster:hosts: no SSH host key for hosts controller, gpu000, "
                           "gpu001, gpu002 (hosts[].sshHostKey) and the bastion "
                           "(ssh.bastion.hostKey): ")
    assert "ssh-keyscan -t ed25519 ADDRESS" in line
    assert "ssh.acceptAnyHostKey: true" in line


def test_only_the_hosts_without_a_key_are_named():
    values = bare_metal_config(workers=3)
    del values["hosts"][2]["sshHostKey"]

    [(path, message)] = problems_of(values)

    assert path == "hosts"
    assert message.startswith("no SSH host key for hosts gpu001 (hosts[].sshHostKey): ")


def test_a_bastion_without_its_key_is_refused_when_every_host_has_one():
    [(path, message)] = problems_of(_with_bastion(bare_metal_config()))

    assert path == "ssh.bastion.hostKey"
    assert message.startswith("no SSH host key for the bastion (ssh.bastion.hostKey): ")


def test_hybrid_hosts_need_host_keys_and_the_ec2_control_plane_does_not():
    [(path, message)] = problems_of(_without_host_keys(hybrid_config(workers=2)))

    # The control plane's key is the one the program makes (aws.controlPlane.sshHostKey
    # only for an instance made before it did).
    assert path == "hosts"
    assert message.startswith("no SSH host key for hosts gpu000, gpu001 (hosts[].sshHostKey): ")


def test_a_cloud_stack_reaches_no_host_over_ssh_and_needs_no_host_key():
    assert loads(cloud_config()).layout == "cloud"


def test_accept_any_host_key_lets_the_stack_load_and_is_warned_about():
    values = _with_bastion(_without_host_keys(bare_metal_config(workers=1)))
    values["ssh"]["acceptAnyHostKey"] = True

    settings = loads(values)

    assert settings.ssh.accept_any_host_key
    warning = host_key_warning(settings.layout, settings.ssh, settings.hosts)
    assert warning == (
        "gpu-cluster:ssh.acceptAnyHostKey is true: SSH to hosts controller, gpu000 "
        "(hosts[].sshHostKey) and the bastion (ssh.bastion.hostKey) accepts any host key, so "
        "a machine in the middle receives the cluster CA's key, join tokens and VPN keys; "
        "pin each host key (docs/layouts.md, \"SSH host keys\")")


def test_no_warning_when_every_host_key_is_pinned():
    values = _with_bastion(bare_metal_config(workers=1), host_key=TEST_HOST_KEY)
    values["ssh"]["acceptAnyHostKey"] = True
    settings = loads(values)
    assert host_key_warning(settings.layout, settings.ssh, settings.hosts) is None


def _rsa_host_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def _mislabelled_key() -> str:
    # An ed25519 key's body under the ecdsa type: x/crypto's ParseAuthorizedKey refuses it.
    return "ecdsa-sha2-nistp256 " + TEST_HOST_KEY.split()[1]


def _truncated_key() -> str:
    body = base64.b64decode(TEST_HOST_KEY.split()[1])[:-4]
    return "ssh-ed25519 " + base64.b64encode(body).decode()


@pytest.mark.parametrize("key, fragment", [
    (_rsa_host_key(), "is an RSA host key"),
    (_mislabelled_key(), "is not a valid ecdsa-sha2-nistp256 public key"),
    (_truncated_key(), "is not a valid ssh-ed25519 public key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestOnlyKey", "is not a valid ssh-ed25519"),
], ids=["rsa", "mislabelled", "truncated", "made-up"])
def test_a_host_key_that_ssh_could_not_use_is_refused(key, fragment):
    values = bare_metal_config(workers=1)
    values["hosts"][1]["sshHostKey"] = key

    [(path, message)] = problems_of(values)

    assert path == "hosts[1] (gpu000).sshHostKey"
    assert fragment in message


def test_a_real_ecdsa_or_ed25519_host_key_loads():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    ecdsa = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    values = bare_metal_config(workers=2)
    values["hosts"][1]["sshHostKey"] = ecdsa + " root@gpu000"
    values["hosts"][2]["sshHostKey"] = public_key_of(credentials.ssh_private_key())
    hosts = loads(values).hosts
    assert hosts[1].ssh_host_key == ecdsa  # the comment dropped


def _lab_like(teams: int, mitigations_off: bool):
    values = bare_metal_config(workers=2)
    values["tuning"] = {"disableCpuMitigations": mitigations_off}
    values["access"] = {"teams": [{"name": name} for name in ("vision", "nlp")[:teams]]}
    return loads(values)


def test_mitigations_off_on_hosts_two_teams_share_is_warned_about_by_host_and_key():
    settings = _lab_like(teams=2, mitigations_off=True)
    assert mitigations_warning(settings.tuning, settings.hosts, settings.access) == (
        "gpu-cluster:tuning.disableCpuMitigations is true on gpu000, gpu001, which teams "
        "vision, nlp share: a pod of one team may read another's memory through CPU side "
        "channels (Spectre, MDS); set it to false on shared hosts")


@pytest.mark.parametrize("teams, mitigations_off", [(1, True), (2, False), (0, True)])
def test_no_mitigations_warning_with_one_team_or_mitigations_on(teams, mitigations_off):
    settings = _lab_like(teams=teams, mitigations_off=mitigations_off)
    assert mitigations_warning(settings.tuning, settings.hosts, settings.access) is None
