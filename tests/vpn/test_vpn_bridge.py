"""VpnBridge under the mocks: its steps, where they run, what they wait for, what they
carry on stdin, and that the secrets in them stay secret."""

import re

import pytest
from cryptography import x509
from pulumi.runtime import rpc

from components.network import openvpn_config, vpn_clients
from preview.redaction import REDACTED
from tests.stacks.steps import waits_for
from tests.vpn.conftest import (SERVER_PUBLIC_ADDRESS, build_plan, exported, hybrid_values,
                                plain, stdin_of)

SERVER_STEP = "control-plane-install-openvpn-server"
CLIENT_STEP = "edge-install-openvpn-client"


def exports(stdin: str) -> dict[str, str]:
    """The `export NAME='value'` lines of an envelope, values unquoted."""
    found = {}
    for match in re.finditer(r"^export (\w+)='((?:[^']|'\\'')*)'$", stdin, re.M | re.S):
        found[match.group(1)] = match.group(2).replace("'\\''", "'")
    return found


def dependency_names(plan, name: str) -> list[str]:
    """The steps (not the keys and certificates) a step waits for, but the bundle step of
    the machine it runs on (tests/stacks/steps.py waits_for)."""
    return sorted(step for step in waits_for(plan, name)
                  if plan.named(step).type == "command:remote:Command")


def test_steps_run_where_they_belong(bridge_plan):
    steps = {r.name: plain(r.inputs["connection"]) for r in bridge_plan.of_type(
        "command:remote:Command") if re.search(r"openvpn|route-to-vpc", r.name)}
    assert sorted(steps) == [SERVER_STEP, CLIENT_STEP, "gpu001-route-to-vpc",
                             "gpu002-route-to-vpc"]
    assert steps[SERVER_STEP]["host"] == SERVER_PUBLIC_ADDRESS
    assert steps[CLIENT_STEP]["host"] == "192.168.2.4"
    assert steps["gpu001-route-to-vpc"]["host"] == "192.168.2.2"
    component = bridge_plan.named("lab-vpn")
    for name in steps:
        assert bridge_plan.named(name).parent == component.urn
    assert bridge_plan.named("lab-vpn-pki").parent == component.urn


def test_steps_wait_for_what_they_need(bridge_plan):
    # The server after its own bootstrap (up to the check after any reboot); the client
    # after the server and its host.
    assert dependency_names(bridge_plan, SERVER_STEP) == ["control-plane-verify-boot"]
    assert dependency_names(bridge_plan, CLIENT_STEP) == [SERVER_STEP, "edge-verify-boot"]
    # Routes need only their own host (once it is back from any reboot).
    assert dependency_names(bridge_plan, "gpu001-route-to-vpc") == ["gpu001-verify-boot"]
    pki = {r.name for r in bridge_plan.resources if r.name.startswith("lab-vpn-pki-")}
    server_inputs = {bridge_plan.by_urn[urn].name
                     for urn in bridge_plan.custom_dependencies(bridge_plan.named(SERVER_STEP))}
    assert {"lab-vpn-pki-server-cert", "lab-vpn-pki-tls-crypt-key"} <= server_inputs & pki
    urn = {r.name: r.urn for r in bridge_plan.resources}
    assert exported(bridge_plan, "tunnelUp") == [
        urn[CLIENT_STEP], urn["gpu001-route-to-vpc"], urn["gpu002-route-to-vpc"]]
    assert exported(bridge_plan, "tunnelUpForGpu001") == [urn[CLIENT_STEP],
                                                         urn["gpu001-route-to-vpc"]]
    assert exported(bridge_plan, "serverTunnelAddress") == "10.8.0.1"


def test_a_lan_router_with_the_route_means_no_route_steps():
    plan = build_plan(hybrid_values(lanRouterHasRoute=True))
    names = [r.name for r in plan.of_type("command:remote:Command")]
    assert not [name for name in names if name.endswith("-route-to-vpc")]
    assert exported(plan, "tunnelUp") == [plan.named(CLIENT_STEP).urn]


def test_server_step_env_contract(bridge_plan):
    record = bridge_plan.named(SERVER_STEP)
    stdin = stdin_of(bridge_plan, SERVER_STEP)
    env = exports(stdin)
    assert list(env) == ["GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", "OPENVPN_CONFIG", "OPENVPN_CA",
                         "OPENVPN_CERT", "OPENVPN_KEY", "OPENVPN_TLS_CRYPT", "OPENVPN_CCD",
                         "OPENVPN_CRL", "OPENVPN_FILTER", "OPENVPN_UNIT"]
    assert env["OPENVPN_CONFIG"] == openvpn_config.server_config(
        openvpn_config.Tunnel("10.8.0.0/24", 1194, "udp", 1400, "lab-vpn-server"),
        "10.20.0.0/16", "192.168.2.0/24")
    assert env["OPENVPN_CCD"].startswith(vpn_clients.MANAGED + "lab-onprem-gateway\n")
    assert "-----BEGIN X509 CRL-----" in env["OPENVPN_CRL"]
    assert env["OPENVPN_FILTER"].endswith("-j DROP\nCOMMIT\n")
    assert env["OPENVPN_UNIT"] == "openvpn-server@gpu-cluster"
    server = x509.load_pem_x509_certificate(env["OPENVPN_CERT"].encode())
    server.verify_directly_issued_by(x509.load_pem_x509_certificate(env["OPENVPN_CA"].encode()))
    assert "PRIVATE KEY-----" in env["OPENVPN_KEY"]
    assert "(openvpn/server.sh, delete: openvpn/remove.sh)" in stdin
    assert record.inputs["create"].endswith("sudo -n bash -s -- create")
    assert record.inputs["delete"].endswith("sudo -n bash -s -- delete")


def test_client_step_env_contract(bridge_plan):
    env = exports(stdin_of(bridge_plan, CLIENT_STEP))
    assert list(env) == ["GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", "OPENVPN_CONFIG", "OPENVPN_CA",
                         "OPENVPN_CERT", "OPENVPN_KEY", "OPENVPN_TLS_CRYPT", "REMOTE_CIDR",
                         "TUNNEL_CHECK_ADDRESS", "OPENVPN_UNIT"]
    assert f"\nremote {SERVER_PUBLIC_ADDRESS} 1194 udp\n" in env["OPENVPN_CONFIG"]
    assert env["REMOTE_CIDR"] == "10.20.0.0/16"
    assert env["TUNNEL_CHECK_ADDRESS"] == "10.8.0.1"
    assert env["OPENVPN_UNIT"] == "openvpn-client@gpu-cluster"
    gateway = x509.load_pem_x509_certificate(env["OPENVPN_CERT"].encode())
    assert gateway.subject.rfc4514_string() == "O=gpu-cluster,CN=lab-onprem-gateway"
    # Both ends share the CA and the tls-crypt key.
    server_env = exports(stdin_of(bridge_plan, SERVER_STEP))
    assert env["OPENVPN_CA"] == server_env["OPENVPN_CA"]
    assert env["OPENVPN_TLS_CRYPT"] == server_env["OPENVPN_TLS_CRYPT"]
    assert env["OPENVPN_KEY"] != server_env["OPENVPN_KEY"]


def test_route_step_env_contract(bridge_plan):
    stdin = stdin_of(bridge_plan, "gpu002-route-to-vpc")
    assert exports(stdin) == {"GPU_CLUSTER_HOST": "gpu002", "GPU_CLUSTER_STEP": "route-to-vpc",
                              "VPC_CIDR": "10.20.0.0/16", "GATEWAY_ADDRESS": "192.168.2.4",
                              "TUNNEL_CIDR": "10.8.0.0/24"}
    assert "(route-to-vpc.sh, delete: route-to-vpc-remove.sh)" in stdin
    # Nothing secret in it: recorded as plain text.
    assert not rpc.is_rpc_secret(bridge_plan.named("gpu002-route-to-vpc").inputs["stdin"])


@pytest.mark.parametrize("step", [SERVER_STEP, CLIENT_STEP])
def test_secrets_are_secret_and_redacted(step):
    # No stack outputs: only the steps' own inputs tell the preview what to hide.
    plan = build_plan(exports=False)
    recorded = plan.named(step).inputs["stdin"]
    assert rpc.is_rpc_secret(recorded)
    env = exports(rpc.unwrap_rpc_secret(recorded))
    shown = plan.redact(recorded)
    for name in ("OPENVPN_KEY", "OPENVPN_TLS_CRYPT"):
        secret_lines = [line for line in env[name].splitlines()
                        if len(line) >= 16 and not line.startswith(("#", "-----"))]
        assert len(secret_lines) >= 3, name
        for line in secret_lines:
            assert line not in shown, (name, line)
    assert f"{REDACTED}\n{REDACTED}" in shown
    # What is not secret stays readable for review.
    assert "tun-mtu 1400" in shown and "-----BEGIN CERTIFICATE-----\nMII" in shown


def test_admin_profile_is_a_secret_output(bridge_plan):
    profile, secret = bridge_plan.outputs["adminProfile"]
    assert secret
    assert f"\nremote {SERVER_PUBLIC_ADDRESS} 1194 udp\n" in profile
    assert "<key>\n-----BEGIN EC PRIVATE KEY-----" in profile
    admin = x509.load_pem_x509_certificate(
        re.search(r"<cert>\n(.+?)</cert>", profile, re.S).group(1).encode())
    assert admin.subject.rfc4514_string() == "O=gpu-cluster,CN=lab-admin"
    assert bridge_plan.redact(profile).count(REDACTED) >= 1


def test_missing_vpn_settings_are_refused():
    values = hybrid_values()
    del values["vpn"]
    with pytest.raises(Exception, match="needs the gpu-cluster:vpn and gpu-cluster:aws"):
        build_plan(values)
