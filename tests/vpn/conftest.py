"""The VPN bridge under the SDK's mocks, built directly (without the AWS components): a
hybrid-like stack config, real HostBootstraps for the on-prem hosts, and the EC2 control
plane as a Host reached at a public address."""

import copy
from typing import Optional

import pulumi
import pytest
from pulumi.runtime import rpc
from pulumi_command import remote

from components.distributions import distribution_for, distribution_settings
from components.hosts.bootstrap import HostBootstrap, HostBootstrapArgs
from components.hosts.steps import HostSettings
from components.common.remote_step import Ssh, SshAccess
from components.layouts.hybrid import vpn_bridge_args
from components.network.vpn_bridge import VpnBridge
from config.hosts import Host
from config.model import StackConfig
from preview.engine import run_program
from preview.plan import Plan
from tests.builders import PROJECT_DIR, TEST_PRIVATE_KEY, as_cli_config
from components.common.step_text import whole_text

# The control plane where the config puts it: .10 of the first subnet (the API address the
# users' VPN routes and filter name).
SERVER = Host(name="control-plane", address="10.20.0.10", role="controller")
SERVER_PUBLIC_ADDRESS = "203.0.113.1"
VPC_HOST_ADDRESS = "10.20.0.50"

HYBRID_VALUES = {
    "layout": "hybrid",
    "clusterName": "lab",
    "network": {"lanCidr": "192.168.2.0/24"},
    "ssh": {"user": "ops"},
    "hosts": [
        {"name": "gpu001", "address": "192.168.2.2", "gpus": 4},
        {"name": "gpu002", "address": "192.168.2.3", "gpus": 4},
        {"name": "edge", "address": "192.168.2.4"},
    ],
    "storage": {"nfs": {"server": "192.168.2.10"}},
    "aws": {"region": "eu-west-1", "adminCidrs": ["198.51.100.0/24"],
            "vpc": {"cidr": "10.20.0.0/16"}},
    "vpn": {"onpremGateway": "edge", "clientSourceCidrs": ["203.0.113.2/32"]},
    "sshPrivateKey": TEST_PRIVATE_KEY,
}


def hybrid_values(**vpn_changes) -> dict:
    values = copy.deepcopy(HYBRID_VALUES)
    values["vpn"].update(vpn_changes)
    return values


def build_plan(values: Optional[dict] = None, exports: bool = True,
               earlier: Optional[Plan] = None) -> Plan:
    """Runs a program that creates only the bootstraps and the bridge; exports the admin
    profile, the server's tunnel address and what joins wait for (unless `exports` is
    false: then only the resources' own inputs show the secrets). With `earlier`, the
    keys and certificates `pulumi up` would keep from it are its own."""
    values = values or hybrid_values()

    def program() -> None:
        settings = StackConfig.model_validate(values)
        distribution = distribution_for(distribution_settings(settings))
        access = SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key)

        def prepared(host: Host) -> HostBootstrap:
            return HostBootstrap(host.name, HostBootstrapArgs(
                host=host, ssh=access, settings=HostSettings.of(settings),
                distribution=distribution, control_plane_address=SERVER.address))

        server = prepared(SERVER)
        onprem = {host.name: prepared(host) for host in settings.hosts}
        bridge = VpnBridge("lab-vpn", vpn_bridge_args(
            settings,
            server_host=SERVER,
            server_ssh=Ssh(remote.ConnectionArgs(
                host=SERVER_PUBLIC_ADDRESS, user="ubuntu",
                private_key=pulumi.Output.secret(TEST_PRIVATE_KEY)), "ubuntu", server.ssh.bundle),
            server_public_address=pulumi.Output.from_input(SERVER_PUBLIC_ADDRESS),
            server_ready=server.ready,
            onprem={name: bootstrap.prepared for name, bootstrap in onprem.items()},
        ))
        if not exports:
            return
        pulumi.export("adminProfile", bridge.admin_profile)
        pulumi.export("serverTunnelAddress", bridge.server_tunnel_address)
        pulumi.export("tunnelUp", [resource.urn for resource in bridge.tunnel_up])
        pulumi.export("tunnelUpForGpu001", [r.urn for r in bridge.tunnel_up_for("gpu001")])
        pulumi.export("userProfiles", {user.name: bridge.user_profile(user.name)
                                       for user in settings.access.users})

    return run_program(PROJECT_DIR, as_cli_config(values), program=program, earlier=earlier)


def plain(value):
    """A recorded input without its secret wrapping (the plan keeps secrets readable)."""
    return rpc.unwrap_rpc_secret(value)


def stdin_of(plan: Plan, name: str) -> str:
    """The step rendered whole (the bundle's files it runs pasted in)."""
    return whole_text(plain(plan.named(name).inputs["stdin"]))


def exported(plan: Plan, name: str):
    return plan.outputs[name][0]


@pytest.fixture(scope="session")
def bridge_plan() -> Plan:
    return build_plan()
